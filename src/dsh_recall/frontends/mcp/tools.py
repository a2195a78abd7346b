"""MCP tool definitions: names, descriptions that steer the model, input and output schemas.

Schemas stay within plain JSON schema (object / array / string / integer / number / boolean,
no `$ref`, no `null` unions) because harnesses such as dsh only use an output schema that
fits their supported subset. Every object in a result has `additionalProperties: false`;
optional fields are simply left out of `required`, never sent as null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


# -- schema helpers ------------------------------------------------------------------------
def S(desc: str = "", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", **kw}
    if desc:
        out["description"] = desc
    return out


def I(desc: str = "", **kw: Any) -> dict[str, Any]:  # noqa: E743  (S, I, B: JSON Schema types, one letter each for a dense table)
    out: dict[str, Any] = {"type": "integer", **kw}
    if desc:
        out["description"] = desc
    return out


NUM: dict[str, Any] = {"type": "number"}
BOOL: dict[str, Any] = {"type": "boolean"}
STRS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


def arr(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def obj(props: dict[str, Any], required: list[str] | None = None, closed: bool = True,
        desc: str = "") -> dict[str, Any]:
    """An object schema; `required` defaults to every property; closed = no extra keys."""
    out: dict[str, Any] = {"type": "object", "properties": props,
                           "required": list(props) if required is None else required}
    if closed:
        out["additionalProperties"] = False
    if desc:
        out["description"] = desc
    return out


def free_obj(desc: str = "") -> dict[str, Any]:
    """An open map (counts, settings) whose keys are data, not schema."""
    out: dict[str, Any] = {"type": "object"}
    if desc:
        out["description"] = desc
    return out


CURSOR_IN = S("Opaque cursor from a previous answer's next_cursor, to get the next page. "
              "Pass the same other arguments.")
PAGE_OUT = {"next_cursor": S("Present when more results exist: call again with this cursor."),
            "truncated": {"type": "boolean",
                          "description": "True when a long text was cut to fit the token budget."}}
PAGE_REQ = ["truncated"]
# How sure an answer is (services/base.py MATCHES), and each of its hits; left out by a
# source that does not judge.
MATCH_OUT = S("strong | weak (the closest hits, none clearly answers) | none (nothing "
              "related found)", enum=["strong", "weak", "none"])
HIT_MATCH = S(enum=["strong", "weak"])


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: what the model sees, plus which service it needs to exist."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool = True
    service: str | None = None  # dotted module that must import for the tool to be offered
    list_key: str | None = None  # the paginated list in the answer, if any
    annotations: dict[str, Any] = field(default_factory=dict)


# -- code ------------------------------------------------------------------------------------
CODE_RESULT = obj({
    "path": S("Path relative to the workspace (source roots are prefixed by their label)."),
    "source_path": S("Absolute path on disk, for your file-reading tool."),
    "start_line": I(), "end_line": I(), "score": NUM,
    "symbols": STRS, "excerpt": S("The lines start_line..end_line, verbatim."),
    "stale": {"type": "boolean", "description": "The file changed since it was indexed."},
    "match": HIT_MATCH,
}, required=["path", "source_path", "start_line", "end_line", "score", "symbols", "excerpt",
             "stale"])

CODE_SEARCH = ToolSpec(
    name="code_search",
    title="Search code",
    description=(
        "Find where something lives in the workspace code: returns ranked, bounded excerpts "
        "(path, line range, up to ~40 lines each) for a free-text or identifier query. Use it "
        "BEFORE reading files, to learn which file and lines matter, then read only those "
        "lines. Prefer grep when you already know an exact symbol name, and your read tool for "
        "a whole file you already know you need. Do not re-read a range an excerpt already "
        "gave you. `focus` (or `path`) narrows to a sub-project; the answer says when a scoped "
        "match is weak."),
    input_schema=obj({
        "query": S("What you are looking for: words, identifiers, an error message."),
        "limit": I("Number of excerpts (default from config, usually 8).", minimum=1, maximum=50),
        "path": S("Only results under this directory (relative to the workspace)."),
        "focus": S("Search inside this sub-project scope; says so when the match is weak."),
        "files": {"type": "boolean", "description": "One best excerpt per distinct file."},
        "cursor": CURSOR_IN,
    }, required=["query"]),
    output_schema=obj({
        "query": S(), "results": arr(CODE_RESULT), "match": MATCH_OUT,
        "layers": {**STRS, "description": "Ranking layers that answered (lexical, vector)."},
        "pending": I("Chunks still waiting for vectors."),
        "scope": S(), "notes": STRS,
        "rerank": S("The optional rerank stage: applied, partial, disabled, skipped, failed or "
                    "timed out (then the fused order stands)."),
        **PAGE_OUT,
    }, required=["query", "results", "layers", "pending", "scope", "notes", *PAGE_REQ]),
    list_key="results",
)

JOB = obj({
    "state": S("idle | starting | running | done | failed | interrupted",
               enum=["idle", "starting", "running", "done", "failed", "interrupted"]),
    "started": NUM, "finished": NUM,
    "phase": S(), "done": I(), "total": I(),
    "report": free_obj("Counts from the finished job: files, indexed, chunks, embedded, ..."),
    "error": S(),
}, required=["state"])

CODE_INDEX = ToolSpec(
    name="code_index",
    title="Index code",
    description=(
        "Bring the workspace code index up to date in the background (only changed files are "
        "re-read). Returns at once with the job's state; call `status` to follow it. Search "
        "works meanwhile (lexical first, vectors fill in). Rarely needed: search indexes a "
        "cold workspace by itself."),
    input_schema=obj({
        "wait_s": NUM | {"description": "Wait up to this many seconds for the job (max 50).",
                         "minimum": 0, "maximum": 50},
    }, required=[]),
    output_schema=obj({"started": BOOL, "job": JOB}),
    read_only=False,
)

# -- status / configure -----------------------------------------------------------------------
STATUS = ToolSpec(
    name="status",
    title="Recall status",
    description=(
        "What the recall engine knows: the workspace, how much code is indexed and how many "
        "vectors are pending, the index job, and which sources (history, objects, notes) are "
        "available. Cheap; call it when a search answer looks thin."),
    input_schema=obj({}, required=[]),
    output_schema=obj({
        "workspace": S(), "token_budget": I(), "session": S(),
        "tools": STRS,
        "code": obj({"indexed": BOOL, "files": I(), "chunks": I(), "vectors": I(),
                     "pending": I(), "embedder": S(), "scopes": STRS, "problems": STRS},
                    required=["indexed", "files", "chunks", "vectors", "pending", "embedder"]),
        "job": JOB,
        "sources": free_obj("Per optional source (history, objects, notes): its own summary."),
        "access": obj({"channel": S(), "reason": S()}, required=["channel"],
                      desc="The access channel this server answers for (set when it started)."),
    }, required=["workspace", "token_budget", "tools", "code", "job", "sources"]),
)

CONFIGURE = ToolSpec(
    name="configure",
    title="Configure recall",
    description=(
        "Change this client's settings for the rest of the session: the workspace to search "
        "(one the user allowed: the server's workspace, its source roots, or directories "
        "the user listed), the current session id (history is scoped to it by default), the "
        "token budget per answer. Access to notes, history and objects is fixed by how the "
        "server was started and cannot be changed here. Call with no arguments to see the "
        "current settings."),
    input_schema=obj({
        "workspace": S("Absolute path of the workspace root."),
        "session": S("Current history session id (history searches default to it)."),
        "token_budget": I("Max tokens per answer.", minimum=200, maximum=24000),
    }, required=[]),
    output_schema=obj({"workspace": S(), "session": S(), "token_budget": I(),
                       "changed": STRS}, required=["workspace", "token_budget", "changed"]),
    read_only=False,
)

# -- history -------------------------------------------------------------------------------
HISTORY_HIT = obj({
    "session": S(), "start_seq": I(), "end_seq": I(), "message_ids": STRS, "role": S(),
    "time": S(), "snippet": S(), "score": NUM, "layers": STRS, "kind": S(), "tool": S(),
    "flags": STRS, "match": HIT_MATCH,
}, required=["session", "start_seq", "end_seq", "role", "snippet", "score"])

HISTORY_SEARCH = ToolSpec(
    name="history_search",
    title="Search conversation history",
    description=(
        "Recall what was said, decided or done earlier: searches past agent transcripts "
        "(this harness's sessions, Claude Code, Codex) and returns short snippets with their "
        "session and event seq range. Use it when details are missing from your context, "
        "after a compaction, or when the user refers to earlier discussion. Scope is the "
        "current session unless the user asks wider (scope='workspace' for this project's "
        "sessions, 'all' for everything). Then call history_detail for the exact text."),
    input_schema=obj({
        "query": S("Words to look for (any language; exact phrases and identifiers work)."),
        "scope": S("session (default) | workspace | all", enum=["session", "workspace", "all"]),
        "session": S("A specific session id (overrides the current one)."),
        "limit": I("Max events to return.", minimum=1, maximum=50),
        "detail": {"type": "boolean", "description": "One hit per event, full ranked list."},
        "cursor": CURSOR_IN,
    }, required=["query"]),
    output_schema=obj({
        "query": S(), "scope": obj({"kind": S(), "value": S()}, required=["kind"]),
        "hits": arr(HISTORY_HIT), "match": MATCH_OUT,
        "sessions": free_obj("session id -> {title, date}"),
        "layers": STRS, "layer_status": free_obj("layer -> ok | no match | why it is off"),
        **PAGE_OUT,
    }, required=["query", "scope", "hits", "layers", *PAGE_REQ]),
    service="dsh_recall.services.history",
    list_key="hits",
)

HISTORY_EVENT = obj({
    "seq": I(), "role": S(), "time": S(), "message_id": S(), "text": S(),
    "truncated": I("Full length of the original text when it was cut."), "flags": STRS,
}, required=["seq", "role", "text"])

HISTORY_DETAIL = ToolSpec(
    name="history_detail",
    title="Original conversation text",
    description=(
        "The exact original text of a session's events: `window` events either side of seq "
        "`around` (from a history_search hit or a compaction anchor), or a page of the "
        "session. Use it to get verbatim details (commands, numbers, decisions) a summary "
        "lost. Do not ask again for events you were just given."),
    input_schema=obj({
        "session": S("Session id (default: the current session)."),
        "around": I("Centre seq.", minimum=0),
        "window": I("Events either side of `around` (default 3).", minimum=0, maximum=20),
        "page": I("Page number when browsing without `around`.", minimum=1),
        "cursor": CURSOR_IN,
    }, required=[]),
    output_schema=obj({
        "session": obj({"id": S(), "source": S(), "workspace": S(), "title": S(),
                        "created": S(), "updated": S(), "events": I()}, required=["id", "events"]),
        "around": I(), "page": I(), "pages": I(),
        "events": arr(HISTORY_EVENT), **PAGE_OUT,
    }, required=["session", "events", *PAGE_REQ]),
    service="dsh_recall.services.history",
    list_key="events",
)

# -- objects -------------------------------------------------------------------------------
OBJECT_RECALL = ToolSpec(
    name="object_recall",
    title="Recall an offloaded tool result",
    description=(
        "Get back part of a big tool result that was moved out of the conversation (its "
        "inline head/tail names the object id). With `failures: true`: where did it fail? "
        "The likely failure region of a build, test or CI log (error and exception lines, "
        "stack traces, assertion diffs, exit codes; at most 20 lines in file order, with "
        "line numbers): ask this first when a command failed. With `query`: the best 8 "
        "matching lines (`limit` up to 20) with line numbers and offsets (e.g. "
        "query='FATAL' in a 200 KB log), `more` when others match; a "
        "failure word ('error', 'FAILED') also brings the failure region's other lines, "
        "marked context. With `lines` ('120-160'): those lines, numbered. Otherwise "
        "`count` characters from `start`. Ask for the slice you need, not the whole object."),
    input_schema=obj({
        "id": S("The object id from the offload notice."),
        "failures": {"type": "boolean",
                     "description": "True: the likely failure region (no query needed)."},
        "query": S("Words to find; returns matching lines."),
        "start": I("Character offset to start from (code points).", minimum=0),
        "count": I("Characters to return.", minimum=1, maximum=24000),
        "lines": S("a-b: lines a to b (1-based); count caps their characters."),
        "limit": I("Max lines for a query (default 8) or the failure region (default 20).",
                   minimum=1, maximum=20),
    }, required=["id"]),
    output_schema=obj({
        "id": S(), "total": I("Length of the whole object in characters."),
        "start": I(), "text": S(), "next_start": I("Call again with start=this for more."),
        "line": I("With lines: the line text starts with."),
        "end_line": I("With lines: the last line asked for (at most line_count)."),
        "line_count": I("With lines: the object's number of lines."),
        "failures": {"type": "boolean",
                     "description": "True when the lines are the failure region."},
        "matches": arr(obj({"line": I(), "offset": I(), "text": S(),
                            "context": {"type": "boolean", "description":
                                        "A failure-region line that does not match the "
                                        "query."}},
                           required=["line", "offset", "text"])),
        "note": S("Said when the query was cut or otherwise changed before matching."),
        "more": {"type": "boolean",
                 "description": "More lines match the query: call again with a larger limit."},
        "truncated": BOOL,
    }, required=["id", "truncated"]),
    service="dsh_recall.services.objects",
)

# -- notes ---------------------------------------------------------------------------------
NOTES_SEARCH = ToolSpec(
    name="notes_search",
    title="Search notes",
    description=(
        "Search the user's markdown notes (memory folders): ranked passages with file, "
        "lines, heading and access level. Use it for preferences, conventions, decisions "
        "and facts the user wrote down; cite the file when you rely on a passage."),
    input_schema=obj({
        "query": S("What you want to know."),
        "limit": I("Max passages.", minimum=1, maximum=30),
        "cursor": CURSOR_IN,
    }, required=["query"]),
    output_schema=obj({
        "query": S(),
        "results": arr(obj({"path": S(), "start_line": I(), "end_line": I(), "heading": S(),
                            "level": S(), "score": NUM, "text": S(), "source_path": S(),
                            "stale": BOOL, "match": HIT_MATCH,
                            "author": S("Who saved this entry, when not the reader: guest, group.")},
                           required=["path", "start_line", "end_line", "level", "score",
                                     "text"])),
        "match": MATCH_OUT,
        "layers": STRS, "access": obj({"channel": S(), "reason": S()}, required=["channel"]),
        "pending": I(), "notes": STRS, "rerank": S("The optional rerank stage: applied, partial, "
                                                  "disabled, skipped, failed or timed out."),
        **PAGE_OUT,
    }, required=["query", "results", "layers", "notes", *PAGE_REQ]),
    service="dsh_recall.services.notes",
    list_key="results",
)


# -- every source at once ---------------------------------------------------------------------
SOURCE_NAMES = ["code", "history", "notes", "objects"]
SEARCH_ALL_HIT = obj({
    "source": S("Which source this hit comes from.", enum=SOURCE_NAMES),
    "rank": I("Its rank within its own source."), "score": NUM,
    "title": S("Where it is: path:lines, session + seq, note > heading, or object + line."),
    "excerpt": S("A bounded excerpt; the per-source tool gives the rest."),
    "path": S(), "source_path": S(), "start_line": I(), "end_line": I(), "stale": BOOL,
    "session": S(), "start_seq": I(), "end_seq": I(), "role": S(),
    "heading": S(), "level": S(),
    "object_id": S(), "line": I(), "total_chars": I(),
    "match": HIT_MATCH, "folded": I("Hits with this same text folded into this one."),
}, required=["source", "rank", "score", "title", "excerpt"])

SEARCH_ALL = ToolSpec(
    name="search_all",
    title="Search every source",
    description=(
        "One query over the workspace code, past conversation history, the user's notes and "
        "offloaded tool results at once: ranked, bounded hits, each labelled with its source "
        "and carrying the pointer its own tool takes next (path and lines for your read tool, "
        "session and seq for history_detail, object id and line for object_recall). Use it "
        "when you do not know where the answer lives; when you do, the per-source tool is "
        "sharper. `sources` narrows it (default: all four)."),
    input_schema=obj({
        "query": S("What you are looking for: words, identifiers, an error message."),
        "sources": {"type": "array", "items": S(enum=SOURCE_NAMES),
                    "description": "Only these sources (default: all)."},
        "limit": I("Max hits in all (default 10).", minimum=1, maximum=30),
        "cursor": CURSOR_IN,
    }, required=["query"]),
    output_schema=obj({
        "query": S(), "results": arr(SEARCH_ALL_HIT), "match": MATCH_OUT,
        "sources": free_obj("source -> {status, hits, ms}: which sources answered"),
        "notes": STRS, "rerank": S("The optional rerank stage over the merged hits: applied, "
                                   "partial, disabled, skipped, failed or timed out."),
        **PAGE_OUT,
    }, required=["query", "results", "sources", "notes", *PAGE_REQ]),
    service="dsh_recall.services.federated",
    list_key="results",
)

BASE_TOOLS: list[ToolSpec] = [CODE_SEARCH, CODE_INDEX, STATUS, CONFIGURE]
SOURCE_TOOLS: list[ToolSpec] = [HISTORY_SEARCH, HISTORY_DETAIL, OBJECT_RECALL, NOTES_SEARCH,
                                SEARCH_ALL]
ALL_TOOLS: list[ToolSpec] = [CODE_SEARCH, CODE_INDEX, HISTORY_SEARCH, HISTORY_DETAIL,
                             OBJECT_RECALL, NOTES_SEARCH, SEARCH_ALL, STATUS, CONFIGURE]


def conform(value: Any, schema: dict[str, Any]) -> Any:
    """Project `value` onto `schema`: drop keys a closed object does not declare.

    Services may add fields (timings, debug ranks) that the schema does not promise; the MCP
    answer carries exactly the declared shape so strict clients can validate it.
    """
    t = schema.get("type")
    if t == "object" and isinstance(value, dict):
        props = schema.get("properties")
        if props is None:
            return value
        out = {}
        for k, v in value.items():
            if k in props:
                if v is None and k not in schema.get("required", []):
                    continue  # optional fields are omitted, never null
                out[k] = conform(v, props[k])
            elif schema.get("additionalProperties", True) is not False:
                out[k] = v
        return out
    if t == "array" and isinstance(value, list) and "items" in schema:
        return [conform(v, schema["items"]) for v in value]
    return value


# -- argument validation ------------------------------------------------------------------
_VALIDATORS: dict[str, Any] = {}


def _clean(value: Any, where: str) -> Any:
    """Strings made valid Unicode (lone surrogates -> U+FFFD); NUL refused, naming where."""
    from ...core.clean import INT64_MAX, INT64_MIN, clean_text, refuse_nul
    from ...core.errors import InputError

    if isinstance(value, str):
        return refuse_nul(clean_text(value), f"argument '{where}'")
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"argument '{where}' is out of range")
    if isinstance(value, float) and value != value:  # NaN
        raise InputError(f"argument '{where}' is not a number")
    if isinstance(value, list):
        return [_clean(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v, f"{where}.{k}") for k, v in value.items()}
    return value


def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """The arguments, cleaned and checked against the tool's advertised input schema.

    A violation is an InputError naming the argument, which the server answers as an
    `isError` result the model can read and correct. Queries longer than QUERY_CHARS are
    cut there (core/clean.py says why).
    """
    import jsonschema

    from ...core.clean import QUERY_CHARS, cap_query
    from ...core.errors import InputError

    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InputError(f"arguments of {spec.name} must be an object")
    args = {clean_text_key(k): _clean(v, str(k)) for k, v in args.items()}
    v = _VALIDATORS.get(spec.name)
    if v is None:
        v = _VALIDATORS[spec.name] = jsonschema.Draft202012Validator(spec.input_schema)
    err = jsonschema.exceptions.best_match(v.iter_errors(args))
    if err is not None:
        props = spec.input_schema.get("properties", {})
        if err.validator == "additionalProperties":
            extra = sorted(set(args) - set(props))
            raise InputError(f"unknown argument {', '.join(repr(e) for e in extra)} for "
                             f"{spec.name}; valid arguments: {', '.join(props) or 'none'}")
        if err.validator == "required":
            raise InputError(f"{spec.name}: {err.message}")
        name = ".".join(str(p) for p in err.absolute_path) or "arguments"
        expect = props.get(str(err.absolute_path[0]), {}) if err.absolute_path else {}
        hint = ""
        if "enum" in expect:
            hint = f"; one of: {', '.join(expect['enum'])}"
        elif "minimum" in expect or "maximum" in expect:
            hint = f"; allowed: {expect.get('minimum', '-inf')}..{expect.get('maximum', 'inf')}"
        raise InputError(f"argument '{name}' of {spec.name}: {err.message}{hint}")
    if isinstance(args.get("query"), str):
        args["query"] = cap_query(args["query"], QUERY_CHARS)
    return args


def clean_text_key(key: Any) -> str:
    from ...core.clean import clean_text

    return clean_text(str(key))

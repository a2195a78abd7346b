"""The compact tool profile (`dsh-recall mcp --tools compact`): one `recall` tool.

A harness sends every tool's name, description and input schema with every model request
(dsh also puts the server's instructions in the system prompt), so the full profile's nine
tools cost about 2,500 tokens per request in dsh. This profile keeps one tool whose
arguments pick the mode; each mode is answered by the full profile's own handler
(`Client.run`: the same argument checks, access channel, budget and cursors), only the text
rendering is tighter and points back at `recall` instead of the other tools.

    recall(query, source?, k?)          search: all (search_all), code, history, notes, objects
    recall(id="3f9a1c2e", lines="a-b")  lines of an offloaded object (id alone: from line 1,
                                        up to 8,000 chars)
    recall(id="3f9a1c2e", query=...)    its matching lines; failures=true: where it failed
    recall(id="<session>#<seq>")        the original events around seq (query: search that
                                        session; a bare session id: browse it)

An object id is 8 hex characters (search/offload.make_id); anything else is a history
session, with `#seq` when it points at one event.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.errors import InputError, UnknownSession
from . import render as render_mod
from .tools import BOOL, I, S, ToolSpec, obj, validate_args

RECALL_SOURCES = ["all", "code", "history", "notes", "objects"]

RECALL = ToolSpec(
    name="recall",
    title="Recall",
    description=(
        "Recall context you cannot see: offloaded tool outputs, earlier sessions and "
        "decisions, the user's notes, where something is handled in the code. query: search "
        "(source narrows it). id (from an offload notice or a hit): lines=\"a-b\", query "
        "(matching lines) or failures=true (where a command failed); a history id "
        "(session#seq) gives the original events. Not for a file you can read or a string "
        "grep finds."),
    input_schema=obj({
        "query": S("What to find; with id: lines or events to match in it."),
        "source": S(enum=RECALL_SOURCES),
        "k": I("Max hits.", minimum=1, maximum=30),
        "id": S("Object id (8 hex) or session#seq."),
        "lines": S("a-b: lines of an object."),
        "failures": BOOL,
        "cursor": S("next_cursor of the last answer."),
    }, required=[]),
    # No output schema: the structured answer is the answering handler's own (its schema
    # is in tools.py), and dsh does not show output schemas to the model anyway.
    output_schema={},
)

INSTRUCTIONS = (
    "Use recall after a compaction or when an earlier detail, decision or tool output is "
    "missing, before re-running a command or guessing.")

OBJECT_ID = re.compile(r"[0-9a-fA-F]{8}")
EVENT_ID = re.compile(r"(.+)#(\d+)")
FIRST_LINES = 200  # id alone: up to this many lines from the top,
FIRST_CHARS = 8000  # and at most this many chars (object_recall's default slice)
HISTORY_WINDOW = 3  # events either side of session#seq
SEARCH_K = 8  # hits of a search without k
# History and notes answers without k: the best few, a cursor for more. On LoCoMo dev the
# history ranking finds the answering turn in its top 5 for 0.741 of questions (top 10:
# 0.809), so 5 hits hold most answers in 5/8 of the chars; notes answers likewise.
ANSWER_K = 5
MAX_CHARS = 24000  # object_recall's largest `count`: what lines="a-b" may return


@dataclass(frozen=True)
class Plan:
    """Which full-profile tool answers a recall call, with which arguments."""

    tool: str
    args: dict[str, Any]


def plan(a: dict[str, Any]) -> Plan:
    """The full-profile call that answers recall arguments `a` (already schema-checked).
    Pure; every combination it cannot answer is an InputError saying what to pass."""
    query = str(a.get("query") or "").strip()
    oid = str(a.get("id") or "").strip()
    k, cursor = a.get("k"), a.get("cursor")
    page = {"cursor": cursor} if cursor else {}
    if not oid:
        if a.get("lines") or a.get("failures"):
            raise InputError("lines and failures need id: the object id from the offload "
                             "notice (8 hex chars)")
        if not query:
            raise InputError("recall needs query (to search) or id (to fetch), e.g. "
                             "recall(query=\"where are retries handled\") or "
                             "recall(id=\"3f9a1c2e\", failures=true)")
        source = a.get("source") or "all"
        limit = {"limit": int(k or SEARCH_K)}
        if source == "all":
            return Plan("search_all", {"query": query, **limit, **page})
        if source == "objects":
            return Plan("search_all", {"query": query, "sources": ["objects"], **limit, **page})
        if source == "code":
            return Plan("code_search", {"query": query, **limit, **page})
        few = {"limit": int(k or ANSWER_K)}
        if source == "history":
            return Plan("history_search", {"query": query, "scope": "workspace",
                                           "detail": True, **few, **page})
        return Plan("notes_search", {"query": query, **few, **page})
    if a.get("source"):
        raise InputError("source narrows a search; leave it out when you pass id")
    modes = [m for m in ("lines", "query", "failures") if a.get(m)]
    if OBJECT_ID.fullmatch(oid):
        if len(modes) > 1:
            raise InputError(f"pass one of lines, query, failures with an object id, not "
                             f"{' and '.join(modes)}")
        if a.get("lines"):  # object_recall checks the "a-b" form
            return Plan("object_recall", {"id": oid, "lines": str(a["lines"]),
                                          "count": MAX_CHARS})
        if query:  # the handler's best few lines (sources.QUERY_LINES) unless k says more
            return Plan("object_recall", {"id": oid, "query": query,
                                          **({"limit": min(int(k), 20)} if k else {})})
        if a.get("failures"):
            return Plan("object_recall", {"id": oid, "failures": True, "limit": min(int(k or 20), 20)})
        return Plan("object_recall", {"id": oid, "lines": f"1-{FIRST_LINES}",
                                      "count": FIRST_CHARS})
    if a.get("lines") or a.get("failures"):
        raise InputError(f"lines and failures are for an object id (8 hex chars); "
                         f"{oid[:60]!r} is a history id: pass query to search that session, "
                         "or nothing to read it")
    m = EVENT_ID.fullmatch(oid)
    session = m.group(1) if m else oid
    if query:
        return Plan("history_search", {"query": query, "session": session, "detail": True,
                                       "limit": int(k or ANSWER_K), **page})
    if m:
        return Plan("history_detail", {"session": session, "around": int(m.group(2)),
                                       "window": HISTORY_WINDOW, **page})
    return Plan("history_detail", {"session": session, "page": 1, **page})


# -- renderings --------------------------------------------------------------------------------
def _tail(d: dict[str, Any]) -> list[str]:
    out = []
    if d.get("truncated"):
        out.append("-- cut to fit the token budget")
    if d.get("next_cursor"):
        out.append(f"-- more: cursor=\"{d['next_cursor']}\"")
    return out


def _notes(d: dict[str, Any]) -> list[str]:
    return [f"-- note: {n}" for n in d.get("notes") or []]


def search_all(d: dict[str, Any]) -> str:
    lines: list[str] = render_mod.match_head(d)
    for r in d.get("results", []):
        src = r["source"]
        if src == "history":
            head = f"{r['session']}#{r['start_seq']} ({r.get('role', '')})"
        elif src == "objects":
            head = f"{r['object_id']} line {r.get('line', '?')}"
        else:
            head = r["title"]
        stale = " (changed since indexed)" if r.get("stale") else ""
        lines.append(f"== [{src}] {head}{stale}{render_mod.weak_mark(d, r)}"
                     f"{render_mod.folded_mark(r)}")
        if r.get("excerpt"):
            lines.append(r["excerpt"])
    if not d.get("results"):
        lines.append("no results")
    srcs = d.get("sources") or {}
    off = [f"{k} {v.get('status')}" for k, v in srcs.items()
           if v.get("status") not in ("ok", "no match")]
    if off:  # a degraded answer says which sources did not answer
        lines.append("-- not answered: " + "; ".join(off))
    return "\n".join(lines + _notes(d) + _tail(d))


def code_search(d: dict[str, Any]) -> str:
    lines: list[str] = render_mod.match_head(d)
    for r in d.get("results", []):
        stale = " (changed since indexed)" if r.get("stale") else ""
        lines.append(f"== {r['path']}:{r['start_line']}-{r['end_line']}{stale}"
                     f"{render_mod.weak_mark(d, r)}")
        lines.append(r.get("excerpt", ""))
    if not d.get("results"):
        lines.append("no results")
    if d.get("pending"):
        lines.append(f"-- {d['pending']} chunks still wait for vectors (layers: "
                     f"{', '.join(d.get('layers', []))})")
    return "\n".join(lines + _notes(d) + _tail(d))


def history_search(d: dict[str, Any]) -> str:
    lines: list[str] = render_mod.match_head(d)
    for h in d.get("hits", []):
        lines.append(f"== {h['session']}#{h['start_seq']} {h.get('role', '')}"
                     + (f" ({h['tool']})" if h.get("tool") else "")
                     + render_mod.weak_mark(d, h))
        if h.get("snippet"):
            lines.append(h["snippet"])
    if not d.get("hits"):
        lines.append("no matching events")
    status = d.get("layer_status") or {}
    # A layer the config turns off (rerank by default) did not fail to answer: not listed.
    off = [f"{k} {v}" for k, v in status.items()
           if v not in ("ok", "no match") and not str(v).startswith("disabled")]
    if off:
        lines.append("-- layers: " + "; ".join(off))
    return "\n".join(lines + _tail(d))


def history_detail(d: dict[str, Any]) -> str:
    s = d["session"]
    lines = [f"session {s['id']} ({s['events']} events)"]
    for e in d.get("events", []):
        cut = f" [cut; {e['truncated']} chars]" if e.get("truncated") else ""
        lines.append(f"-- #{e['seq']} {e['role']}{cut}")
        lines.append(e.get("text", ""))
    # No page line: recall takes no page, only the cursor _tail points at.
    return "\n".join(lines + _tail(d))


def notes_search(d: dict[str, Any]) -> str:
    lines: list[str] = render_mod.match_head(d)
    for r in d.get("results", []):
        head = f" > {r['heading']}" if r.get("heading") else ""
        lines.append(f"== {r['path']}:{r['start_line']}-{r['end_line']}{head}"
                     f"{render_mod.weak_mark(d, r)}")
        lines.append(r.get("text", ""))
    if not d.get("results"):
        lines.append("no matching notes")
    return "\n".join(lines + _notes(d) + _tail(d))


def object_matches(d: dict[str, Any]) -> str:
    what = "where it failed" if d.get("failures") else "matching lines"
    lines = [f"object {d['id']}: {what}"]
    for m in d.get("matches", []):
        # `N|` as in the offload notice's region; `N-` marks a context line (as grep does).
        lines.append(f"{m['line']}{'-' if m.get('context') else '|'} {m['text']}")
    if not d.get("matches"):
        lines.append("no matching lines")
    if d.get("note"):
        lines.append(f"-- note: {d['note']}")
    if d.get("more"):
        lines.append("-- more lines match: k=20")
    lines.append("-- more around a line: lines=\"a-b\"")
    return "\n".join(lines + _tail(d))


def object_recall(d: dict[str, Any]) -> str:
    """Matching lines, or numbered lines (render.object_lines) with `-- more: lines=`."""
    return object_matches(d) if "matches" in d else render_mod.object_lines(d)


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "search_all": search_all, "code_search": code_search, "history_search": history_search,
    "history_detail": history_detail, "notes_search": notes_search,
    "object_recall": object_recall,
}


def call(client: Any, args: Any) -> tuple[dict[str, Any], str]:
    """Answer one `recall` call through the full profile's handler that the mode names."""
    a = validate_args(RECALL, args)
    p = plan(a)
    if p.tool not in client.app.available:
        raise InputError(f"{p.tool} is not part of this build; recall cannot answer this mode")
    try:
        if p.tool == "history_search" and "session" in p.args:
            # A search within one session: an id that names no session the channel may see
            # is an error, as reading it is, not "no matching events".
            from ...services.history.detail import require_session
            require_session(p.args["session"], viewer=client.viewer())
        return client.run(client.app.available[p.tool], p.args, render=RENDERERS[p.tool])
    except UnknownSession as e:
        raise InputError(f"no object or session {str(a.get('id'))[:60]!r}: ids come from an "
                         "offload notice (8 hex chars) or a recall hit (session#seq)") from e

"""Validated configuration: TOML file(s), then environment variables, then flags.

Precedence (later wins): built-in defaults, `<recall home>/config.toml`, the workspace's
`.dsh-recall.toml`, an explicit `--config FILE` / `$DSH_RECALL_CONFIG`, environment variables
`DSH_RECALL_<KEY>` (top level) or `DSH_RECALL_<SECTION>__<KEY>`, then command-line flags.
An unknown key anywhere is an error naming the key and the valid ones.

Trust (docs/security.md): everything the user writes (the recall home's file, `--config`,
the environment, flags) is trusted. A workspace's `.dsh-recall.toml` comes with the
repository and is not: from it only the keys in `WORKSPACE_KEYS` apply (ranking and walking
inside that workspace; source roots only inside it). Other keys are refused with a one-line
notice (`Config.notices`) unless the user trusted that exact file (`dsh-recall trust`).
"""

from __future__ import annotations

import copy
import json
import os
import tomllib
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

from .errors import ConfigError
from .paths import recall_home
from .trust import is_trusted


# -- a small validated-settings base -------------------------------------------------------
# Plain classes instead of pydantic: a CLI call reads its config on every run, and importing
# pydantic and building the models cost 0.1-0.3 s of a 2-core machine's time per call. The
# settings are flat (a few sections of scalars, string lists and string maps), which this
# validates fully: types, ranges, choices, unknown keys.
class Field:
    """A setting's default and constraints (inclusive `ge`/`le`, exclusive `gt`)."""

    __slots__ = ("default", "ge", "le", "gt")

    def __init__(self, default: Any, *, ge: float | None = None, le: float | None = None,
                 gt: float | None = None):
        self.default, self.ge, self.le, self.gt = default, ge, le, gt


class _FieldInfo:
    __slots__ = ("name", "annotation", "field")

    def __init__(self, name: str, annotation: Any, field: Field):
        self.name, self.annotation, self.field = name, annotation, field


def _type_error(loc: str, want: str, value: Any) -> ConfigError:
    return ConfigError(f"invalid config value for '{loc}': should be {want}, not {value!r}")


def _check(loc: str, ann: Any, value: Any) -> Any:
    """`value` as the annotation's type, or ConfigError naming `loc`."""
    origin, args = get_origin(ann), get_args(ann)
    if origin is Union or origin is UnionType:
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check(loc, inner[0], value)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"invalid config value for '{loc}': should be one of "
                              f"{', '.join(map(str, args))}, not {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise _type_error(loc, "a list", value)
        return [_check(f"{loc}[{i}]", args[0], v) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(loc, "a table", value)
        return {_check(f"{loc} key", args[0], k): _check(f"{loc}.{k}", args[1], v)
                for k, v in value.items()}
    if ann is bool:
        if not isinstance(value, bool):
            raise _type_error(loc, "true or false", value)
        return value
    if ann is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                return int(value)
            raise _type_error(loc, "an integer", value)
        return value
    if ann is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                return float(value) if isinstance(value, str) else _raise(loc, value)
            except ValueError:
                raise _type_error(loc, "a number", value) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise _type_error(loc, "a finite number", value)
        return float(value)
    if ann is str:
        if not isinstance(value, str):
            raise _type_error(loc, "a string", value)
        return value
    if isinstance(ann, type) and issubclass(ann, _Section):
        if isinstance(value, ann):
            return value
        if not isinstance(value, dict):
            raise _type_error(loc, "a table", value)
        return ann._from_dict(value, loc + ".")
    return value


def _raise(loc: str, value: Any) -> Any:
    raise _type_error(loc, "a number", value)


class _Section:
    """Settings of one section: attributes with defaults, validated on construction."""

    model_fields: dict[str, _FieldInfo] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        hints = get_type_hints(cls)
        fields: dict[str, _FieldInfo] = {}
        for name, ann in hints.items():
            if name.startswith("_") or name == "model_fields" or get_origin(ann) is ClassVar:
                continue
            raw = cls.__dict__.get(name)
            f = raw if isinstance(raw, Field) else Field(raw)
            fields[name] = _FieldInfo(name, ann, f)
        cls.model_fields = fields

    def __init__(self, **values: Any):
        object.__setattr__(self, "model_fields_set", set(values))
        for name, info in self.model_fields.items():
            if name in values:
                v = values[name]
            else:
                d = info.field.default
                v = copy.deepcopy(d) if isinstance(d, (list, dict, _Section)) else d
            object.__setattr__(self, name, v)

    @classmethod
    def _from_dict(cls, data: dict[str, Any], prefix: str = "") -> Any:
        out: dict[str, Any] = {}
        for key, value in data.items():
            info = cls.model_fields.get(key)
            if info is None:
                raise ConfigError(f"unknown config key '{prefix}{key}'; valid keys: "
                                  + ", ".join(sorted(cls.model_fields)))
            v = _check(prefix + key, info.annotation, value)
            f = info.field
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                for bound, ok, word in ((f.ge, lambda a, b: a >= b, ">="),
                                        (f.le, lambda a, b: a <= b, "<="),
                                        (f.gt, lambda a, b: a > b, ">")):
                    if bound is not None and not ok(v, bound):
                        raise ConfigError(f"invalid config value for '{prefix}{key}': should be "
                                          f"{word} {bound}, not {v!r}")
            out[key] = v
        return cls(**out)

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> Any:
        return cls._from_dict(data)

    def model_dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.model_fields:
            v = getattr(self, name)
            out[name] = v.model_dump() if isinstance(v, _Section) else copy.deepcopy(v)
        return out

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump(), ensure_ascii=False, separators=(",", ":"))

    def model_copy(self, update: dict[str, Any] | None = None) -> Any:
        new = copy.copy(self)
        object.__setattr__(new, "model_fields_set", set(self.model_fields_set) | set(update or {}))
        for k, v in (update or {}).items():
            object.__setattr__(new, k, v)
        return new

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.model_dump() == other.model_dump()  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.model_fields)})"


class EmbedderConfig(_Section):
    """Which embedder turns text into vectors; see dsh_recall.embedders.registry."""

    name: str = "minilm"  # minilm (shipped ONNX) | onnx (a local folder) | http | fake
    model_dir: str | None = None  # for name = "onnx": folder with model.onnx + tokenizer.json
    pooling: Literal["mean", "cls"] = "mean"
    query_prefix: str = ""
    doc_prefix: str = ""
    max_tokens: int = Field(256, ge=8, le=8192)
    url: str | None = None  # for name = "http"
    api: Literal["ollama", "openai"] = "ollama"
    model: str | None = None  # model name sent to an http endpoint
    api_key_env: str | None = None  # name of the env var holding a bearer token for `url`
    timeout_s: float = Field(10.0, gt=0)
    batch_size: int = Field(32, ge=1, le=1024)
    concurrency: int = Field(2, ge=1, le=16)
    dim: int = Field(64, ge=2, le=8192)  # for name = "fake"
    threads: int = Field(0, ge=0, le=64)  # cores the local model may use; 0 = all this process may run on


class HistoryConfig(_Section):
    coverage_gate: float = Field(0.9, ge=0, le=1)
    result_block_chars: int = Field(4000, ge=100)
    event_gap: int = Field(5, ge=0)
    events_per_session: int = Field(3, ge=1)
    max_sessions: int = Field(10, ge=1)
    coarse_budget_tokens: int = Field(800, ge=50)
    # "score" (default): each layer's scores over its best, weighted; measured better on
    # locomo-dev than "rank" (reciprocal rank fusion, k = rrf_k): turn R@5 0.627 vs 0.604.
    fusion: Literal["rank", "score"] = "score"
    rrf_k: int = Field(10, ge=1)
    candidate_pool: int = Field(100, ge=1)
    # Turn rules after fusion (rank/history_rules.py; measured in docs/history.md); 0 = off.
    answer_share: float = Field(0.5, ge=0, le=10)  # a question turn -> the next turn
    speaker_boost: float = Field(0.5, ge=0, le=10)  # a named speaker's turns
    time_boost: float = Field(0.5, ge=0, le=10)  # "when" questions: turns with time words
    date_boost: float = Field(1.0, ge=0, le=10)  # turns dated in the dates a query names
    session_boost: float = Field(0.3, ge=0, le=10)  # turns of the best-scoring sessions
    session_turns: int = Field(3, ge=1, le=50)  # a session scores its best N turns
    prf_terms: int = Field(0, ge=0, le=50)  # pseudo-relevance feedback terms (off: no gain)
    prf_docs: int = Field(3, ge=1, le=20)  # ... taken from the first pass's best N turns
    prf_weight: float = Field(0.5, ge=0, le=10)  # ... the expanded ranking's fusion weight


class ObjectsConfig(_Section):
    threshold_chars: int = Field(2500, ge=1)
    # The inline form (docs/objects.md): head + note + failure region + tail, all of it
    # but the note in inline_chars; head_chars and tail_chars are the head's and the tail's
    # shares (whole lines), the region gets the rest when the output shows a failure.
    inline_chars: int = Field(2000, ge=0, le=100_000)
    head_chars: int = Field(600, ge=0)
    tail_chars: int = Field(400, ge=0)
    spill_notice_chars: int = Field(600, ge=0)
    keep: int = Field(2, ge=0)
    budget_tokens: int | None = None
    # A reclaim that rewrites history pays when what it removes, over this many later
    # requests, outweighs the one prompt-cache miss it causes (search/offload.reclaim_pays).
    reclaim_horizon: int = Field(4, ge=1, le=1000)
    max_age_days: float | None = None
    max_bytes: int | None = None
    # A result over this many bytes of UTF-8 is not stored: head and tail stay inline.
    max_object_bytes: int = Field(64 * 1024 * 1024, ge=1, le=2 * 1024 ** 3)
    # Log prior of `object search` and the no-query failure finder (docs/objects.md,
    # rank/logrank.py); each rule is off at 0 / false.
    rank_log_prior: bool = True  # order a query's matches by the prior (false: file order)
    rank_error_shape: float = Field(1.0, ge=0, le=100)  # error-shaped lines weigh by kind
    rank_position: float = Field(1.0, ge=0, le=100)  # later lines weigh more
    rank_after_success: float = Field(1.0, ge=0, le=100)  # first failure after last success
    rank_collapse_repeats: bool = True  # a repeated line (digits ignored) is shown once
    rank_trace_lines: int = Field(3, ge=0, le=20)  # stack frames kept per trace run
    rank_outcome_lines: int = Field(3, ge=0, le=20)  # outcome lines (exit code) kept
    rank_failure_fill: bool = True  # a failure query's answer filled with the region
    rank_fill_reserve: int = Field(5, ge=0, le=20)  # region lines such an answer always holds


class NotesConfig(_Section):
    roots: list[str] = []
    exclude: list[str] = []
    weights: dict[str, float] = {}  # glob -> multiplier
    levels: dict[str, Literal["public", "personal"]] = {"public.md": "public"}
    default_level: Literal["public", "personal"] = "personal"
    session_map: str | None = None  # JSON file: session key -> session id
    owner_ids: list[str] = []
    rrf_k: int = Field(60, ge=1)
    candidate_pool: int = Field(50, ge=1)
    max_entry_chars: int = Field(1200, ge=100)
    # A note file larger than this is skipped and reported (notes are prose; a bigger file
    # is almost always an export or a log that landed in the folder).
    max_note_bytes: int = Field(4_000_000, ge=1, le=1_000_000_000)
    auto_recall_limit: int = Field(4, ge=1)
    auto_recall_budget_chars: int = Field(1600, ge=100)
    limit: int = Field(8, ge=1, le=200)  # default number of search results
    # Auto-recall relevance gate: a passage is injected only when it holds this share of the
    # message's terms (IDF-weighted) or its embedding is at least this close to the message.
    auto_recall_min_coverage: float = Field(0.5, ge=0, le=1)
    auto_recall_min_cosine: float = Field(0.45, ge=-1, le=1)


class McpConfig(_Section):
    token_budget: int = Field(6000, ge=200, le=24000)
    host: str = "127.0.0.1"
    # Bearer token HTTP clients must send; required (generated when unset) off loopback.
    token: str | None = None
    # Extra Host header values (host or host:port) the HTTP server accepts, besides loopback,
    # the bound address and this machine's names.
    allowed_hosts: list[str] = []
    # Directories a client's `configure {"workspace"}` may switch to (and below), besides
    # the server's workspace and its source roots.
    allowed_workspaces: list[str] = []


class ReadsConfig(_Section):
    """A whole-file `read` in dsh (no offset / limit) over `outline_over_chars` is shown as
    its first `head_lines` lines plus an outline of its symbols by line range (at most
    `outline_chars`); a ranged read always passes whole. 0 turns it off."""

    outline_over_chars: int = Field(12000, ge=0)
    head_lines: int = Field(30, ge=0, le=2000)
    outline_chars: int = Field(2400, ge=200, le=50000)


class RerankConfig(_Section):
    """Optional second stage (docs/rerank.md): a reranker endpoint reorders each source's
    best fused candidates under a deadline; on any failure the fused order stands and the
    answer says why. Never settable from a repository's config: the URL decides where the
    candidates' text is sent."""

    url: str | None = None  # base (http://127.0.0.1:8080) or full endpoint; unset = off
    # "rerank": POST /v1/rerank {model, query, documents, top_n} -> {"results": [{index,
    # relevance_score}]} (llama.cpp server, Infinity, vLLM, Jina / Cohere-compatible);
    # "tei": POST /rerank {query, texts} -> [{index, score}] (text-embeddings-inference).
    api: Literal["rerank", "tei"] = "rerank"
    model: str | None = None  # model name sent (servers hosting one model ignore it)
    api_key_env: str | None = None  # name of the env var holding a bearer token for `url`
    # Fused candidates sent, best first. 10: a MiniLM-sized model on 2 busy cores answers
    # LoCoMo turns in p50 0.39 s (20: 0.72 s, 14% over 1 s); the gold is among the first 10
    # for 0.922 of CoSQA dev queries (20: 0.966).
    top_n: int = Field(10, ge=2, le=200)
    deadline_s: float = Field(1.0, gt=0, le=60)  # then the fused order stands
    max_chars: int = Field(2000, ge=100, le=100_000)  # text sent per candidate
    # 1.0: the reranker's order among the candidates it scored; below 1, each scored
    # candidate's place blends reranker rank and fused rank (weight on the reranker). 0.5:
    # a reranker no better than the first stage cannot wreck the order (LoCoMo dev R@5, a
    # bi-encoder stand-in: fused 0.624, weight 1 0.439, 0.5 0.543; docs/rerank.md).
    weight: float = Field(0.5, ge=0, le=1)
    enabled: list[Literal["code", "history", "notes", "all"]] = ["code", "history", "notes", "all"]


class Config(_Section):
    """Top-level settings are those of code recall; other sources have their own section."""

    # Where indexes live: None = embedded SQLite under the recall home; "postgresql://..." =
    # a shared PostgreSQL + pgvector database (also $DSH_RECALL_STORE). Never from a
    # repository's config (it chooses where data goes).
    store: str | None = None
    source_roots: list[str] = []
    focus_markers: list[str] = [
        "pyproject.toml", "setup.py", "package.json", "go.mod", "Cargo.toml",
        "pom.xml", "build.gradle", "build.gradle.kts", "CMakeLists.txt", ".dsh-recall-scope",
    ]
    ignore: list[str] = []  # extra gitignore-style patterns
    max_file_bytes: int = Field(1_000_000, ge=1, le=64_000_000)
    excerpt_lines: int = Field(40, ge=1, le=400)
    limit: int = Field(8, ge=1, le=200)
    candidate_pool: int = Field(200, ge=1)
    # RRF constant: 10 (not the customary 60) trusts each layer's top ranks more; measured
    # better on both SWE-bench dev (Acc@5 0.569 -> 0.667) and CoSQA dev (MRR 0.651 -> 0.680).
    rrf_k: int = Field(10, ge=1)
    lexical_weight: float = Field(1.0, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    embed_budget_s: float = Field(2.0, ge=0, le=600)  # cold start: embed what fits, then answer
    search_deadline_s: float = Field(4.0, gt=0, le=600)
    weak_score: float = Field(0.5, ge=0)  # a best result under this inside a focus scope is "weak"
    # Tests, fixtures and examples rank below implementation unless the query asks for them.
    test_weight: float = Field(0.5, ge=0, le=1)
    doc_weight: float = Field(0.7, ge=0, le=1)  # prose docs (.md, .rst, docs/) likewise
    identifier_boost: bool = True  # identifiers written in the query count twice in BM25
    symbol_boost: float = Field(1.5, ge=1)  # a chunk declaring a name the query writes
    # Ranking rules measured in docs/code-ranking.md. A query of more than long_query_words
    # words (a pasted issue, a log) never lifts the test / doc / config priors by saying
    # "test" or "docs" in passing (0 = any query may).
    long_query_words: int = Field(24, ge=0)
    config_weight: float = Field(0.5, ge=0, le=1)  # build / CI / data files (setup.py, *.toml, .github/)
    file_decay: float = Field(0.2, ge=0, le=1)  # --files: each next chunk of a file adds score x decay^j
    file_chunks: int = Field(3, ge=1, le=50)  # --files: chunks counted per file
    test_transfer: float = Field(0.5, ge=0, le=2)  # --files: a test's evidence passed to the file it tests
    transfer_top: int = Field(10, ge=0, le=100)  # --files: test files among the best N pass it on
    path_boost: float = Field(1.5, ge=1)  # --files: a file whose path the query writes (1 = off)
    # Worker processes that read and cut files for the lexical index: 0 = one per usable
    # core (at most 4) when 200 or more files need it, 1 = none. Not from a repository.
    index_workers: int = Field(0, ge=0, le=64)
    embedder: EmbedderConfig = EmbedderConfig()
    history: HistoryConfig = HistoryConfig()
    objects: ObjectsConfig = ObjectsConfig()
    reads: ReadsConfig = ReadsConfig()
    notes: NotesConfig = NotesConfig()
    mcp: McpConfig = McpConfig()
    rerank: RerankConfig = RerankConfig()
    @property
    def notices(self) -> list[str]:
        """Set by load_config: one line per workspace file whose keys were refused."""
        if "_notices" not in self.__dict__:
            object.__setattr__(self, "_notices", [])
        return self.__dict__["_notices"]


_SECTIONS = {"embedder", "history", "objects", "notes", "mcp", "rerank"}
# Not settings: where data lives, which config file, which session the caller is in, and
# the switches for tracebacks (the CLI's own error message names it), the usage log and
# handing searches to a running daemon (DSH_RECALL_DAEMON=0: never).
_RESERVED_ENV = {"DSH_RECALL_HOME", "DSH_RECALL_CONFIG", "DSH_RECALL_SESSION",
                 "DSH_RECALL_CHANNEL", "DSH_RECALL_DEBUG", "DSH_RECALL_USAGE",
                 "DSH_RECALL_DAEMON"}

# What a repository's own `.dsh-recall.toml` may set without the user trusting the file:
# ranking and walking inside that workspace. Everything else chooses where data goes or
# who may see it (embedder endpoint and credentials, notes roots and access, object
# retention, the MCP bind address), or reaches outside the workspace.
WORKSPACE_KEYS = frozenset({
    "source_roots",  # entries inside the workspace only (checked one by one)
    "focus_markers", "ignore", "max_file_bytes", "excerpt_lines", "limit", "candidate_pool",
    "rrf_k", "lexical_weight", "vector_weight", "embed_budget_s", "search_deadline_s",
    "weak_score", "test_weight", "doc_weight", "identifier_boost", "symbol_boost",
    "long_query_words", "config_weight", "file_decay", "file_chunks", "test_transfer",
    "transfer_top", "path_boost",
    "mcp.token_budget",
})


def _valid_keys(model: type[_Section]) -> list[str]:
    return sorted(model.model_fields)


def _check_keys(data: dict[str, Any], model: type[_Section], where: str, prefix: str = "") -> None:
    for key, value in data.items():
        if key not in model.model_fields:
            raise ConfigError(
                f"unknown config key '{prefix}{key}' in {where}; valid keys: "
                + ", ".join(_valid_keys(model))
            )
        ann = model.model_fields[key].annotation
        if isinstance(ann, type) and issubclass(ann, _Section):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{prefix}{key}' in {where} must be a table")
            _check_keys(value, ann, where, f"{prefix}{key}.")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k in _SECTIONS:
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}") from e
    _check_keys(data, Config, str(path))
    return data


def _env_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("DSH_RECALL_") or name in _RESERVED_ENV:
            continue
        rest = name[len("DSH_RECALL_"):].lower()
        section, _, key = rest.partition("__")
        if key:
            out.setdefault(section, {})[key] = _env_value(raw)
        else:
            out[section] = _env_value(raw)
    _check_keys(out, Config, "environment (DSH_RECALL_*)")
    return out


def _limit_workspace_file(data: dict[str, Any], path: Path, workspace: Path,
                          notices: list[str]) -> dict[str, Any]:
    """Keep only what an untrusted repository file may set; one notice lists what was refused."""
    root = workspace.resolve()
    refused: list[str] = []
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in _SECTIONS:
            kept = {k: v for k, v in value.items() if f"{key}.{k}" in WORKSPACE_KEYS}
            refused += [f"{key}.{k}" for k in value if k not in kept]
            if kept:
                out[key] = kept
        elif key == "source_roots" and isinstance(value, list):
            kept_roots = []
            for entry in value:
                _, sep, raw = str(entry).partition("=")
                raw = raw if sep else str(entry)
                p = Path(os.path.expanduser(raw.strip()))
                p = (p if p.is_absolute() else root / p).resolve()
                if p.is_relative_to(root):
                    kept_roots.append(entry)
                else:
                    refused.append(f"source root '{entry}' (outside the workspace)")
            out[key] = kept_roots
        elif key in WORKSPACE_KEYS:
            out[key] = value
        else:
            refused.append(key)
    if refused:
        notices.append(f"ignored {', '.join(refused)} from {path}: a repository's config may only "
                       f"tune ranking and walking inside it; `dsh-recall trust {path}` allows the rest")
    return out


def load_config(
    workspace: Path | None = None,
    config_file: Path | str | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """Build the effective config; raises ConfigError on unknown keys or bad values."""
    environ = dict(os.environ if environ is None else environ)
    data: dict[str, Any] = {}
    notices: list[str] = []
    user_file = recall_home() / "config.toml"
    if user_file.is_file():
        data = _merge(data, _read_toml(user_file))
    if workspace is not None:
        ws_file = Path(workspace) / ".dsh-recall.toml"
        if ws_file.is_file():
            ws_data = _read_toml(ws_file)
            if not is_trusted(ws_file):
                ws_data = _limit_workspace_file(ws_data, ws_file, Path(workspace), notices)
            data = _merge(data, ws_data)
    explicit = config_file or environ.get("DSH_RECALL_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        data = _merge(data, _read_toml(path))
    data = _merge(data, _from_env(environ))
    if overrides:
        clean = {k: v for k, v in overrides.items() if v is not None}
        _check_keys(clean, Config, "flags")
        data = _merge(data, clean)
    cfg = Config.model_validate(data)
    cfg.notices.extend(notices)
    return cfg

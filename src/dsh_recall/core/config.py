"""Validated configuration: TOML file(s), then environment variables, then flags.

Precedence (later wins): built-in defaults, `<recall home>/config.toml`, the workspace's
`.dsh-recall.toml`, an explicit `--config FILE` / `$DSH_RECALL_CONFIG`, environment variables
`DSH_RECALL_<KEY>` (top level) or `DSH_RECALL_<SECTION>__<KEY>`, then command-line flags.
An unknown key anywhere is an error naming the key and the valid ones.

Trust (docs/security.md): everything the user writes (the recall home's file, `--config`,
the environment, flags) is trusted. A workspace's `.dsh-recall.toml` comes with the
repository and is not: from it only the keys in `config_sources.WORKSPACE_KEYS` apply
(ranking and walking inside that workspace; source roots only inside it). Other keys are
refused with a one-line notice (`Config.notices`) unless the user trusted that exact file
(`dsh-recall trust`).

This module holds the settings themselves (one `Section` per source; the validating base is
`core.settings`) and `load_config`; reading and merging the sources is `core.config_sources`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from .config_sources import check_keys, drop_user_only, from_env, limit_workspace_file, merge, read_toml
from .errors import ConfigError
from .paths import recall_home
from .settings import Field, Section
from .trust import is_trusted


class EmbedderConfig(Section):
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


class HistoryConfig(Section):
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
    # "what did we decide / why": the turn that states it (decision, because, we keep)
    decision_boost: float = Field(0.5, ge=0, le=10)
    session_turns: int = Field(3, ge=1, le=50)  # a session scores its best N turns
    prf_terms: int = Field(0, ge=0, le=50)  # pseudo-relevance feedback terms (off: no gain)
    prf_docs: int = Field(3, ge=1, le=20)  # ... taken from the first pass's best N turns
    prf_weight: float = Field(0.5, ge=0, le=10)  # ... the expanded ranking's fusion weight


class ObjectsConfig(Section):
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
    # requests, outweighs the one prompt-cache miss it causes (policy/offload.reclaim_pays).
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


class NotesConfig(Section):
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
    # Writable memory (docs/notes.md): folders inside the roots that `notes save` and the
    # MCP notes_save tool may write entries into -> the level of an entry saved without one
    # (never wider than the caller's channel). Empty: writes are off. Only from the user's
    # own config: a repository's file never sets it, trusted or not (USER_ONLY_KEYS).
    write_roots: dict[str, Literal["public", "personal"]] = {}
    max_write_chars: int = Field(8000, ge=100, le=200_000)  # a saved entry's body, at most


class McpConfig(Section):
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


class ReadsConfig(Section):
    """A whole-file `read` in dsh (no offset / limit) over `outline_over_chars` is shown as
    its first `head_lines` lines plus an outline of its symbols by line range (at most
    `outline_chars`); a ranged read always passes whole. 0 turns it off."""

    outline_over_chars: int = Field(12000, ge=0)
    # 12: the module docstring and first imports say what the file is; the outline says
    # where the rest is (74 files over 12,000 chars in the dev trees: median short form
    # 1,924 chars at 12 lines, 2,482 at 30).
    head_lines: int = Field(12, ge=0, le=2000)
    outline_chars: int = Field(2400, ge=200, le=50000)


class ScrubConfig(Section):
    """Secrets never stored (docs/security.md): credential-shaped strings in history and
    offloaded objects become `[secret:KIND]` before they are indexed or written. `keep`
    names kinds left as they are (`policy.scrub.kinds()`). Never from a repository's
    config: a clone must not be able to turn it off."""

    enabled: bool = True
    keep: list[str] = []


class RerankConfig(Section):
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


class LineageConfig(Section):
    """Code lineage (docs/lineage.md): which commit last changed a line, and the agent
    session that made it. Never from a repository's config."""

    # Commits indexed first, newest first; older ones on demand (a `why` whose commit is
    # older, or `dsh-recall lineage index --commits N`).
    max_commits: int = Field(1000, ge=1, le=1_000_000)
    index_budget_s: float = Field(5.0, gt=0, le=600)  # a `why` indexes new commits up to this
    git_timeout_s: float = Field(10.0, gt=0, le=600)  # any one git command
    # A session's edit of the file counts when made this long before the commit's author
    # time (or up to an hour after: the commit is made at the end of the work).
    session_window_minutes: int = Field(240, ge=0, le=100_000)
    max_turns: int = Field(4, ge=1, le=20)  # turns of the linked session shown
    turn_chars: int = Field(600, ge=80, le=20_000)  # characters of each turn shown


class DaemonConfig(Section):
    """The warm path (docs/daemon.md): a CLI search or a hook that finds no `dsh-recall
    daemon` running starts one in the background, after answering alone. Never from a
    repository's config (only the user's own config is read for it)."""

    autostart: bool = True
    idle_minutes: float = Field(15.0, ge=0.1, le=24 * 60)  # a started daemon's idle exit


class Config(Section):
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
    # A long query (an issue, a pasted log) keeps at most 48 terms: its title's and its prose's
    # before a pasted log's (rank/query.Query.tiers); off = rarest first wherever written.
    query_focus: bool = True
    # ... lifting (and the title ranking using) only terms in at most this share of chunks:
    # a common word ranks little and its rows are the query's cost
    focus_df_share: float = Field(0.2, gt=0, le=1)
    # A long query's title alone, a second lexical ranking when no vector layer answers (it
    # reads a query's head, the title, itself); 0 = off.
    title_weight: float = Field(1.0, ge=0, le=10)
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
    scrub: ScrubConfig = ScrubConfig()
    lineage: LineageConfig = LineageConfig()
    daemon: DaemonConfig = DaemonConfig()
    @property
    def notices(self) -> list[str]:
        """Set by load_config: one line per workspace file whose keys were refused."""
        if "_notices" not in self.__dict__:
            object.__setattr__(self, "_notices", [])
        return self.__dict__["_notices"]


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
        data = merge(data, read_toml(user_file, Config))
    if workspace is not None:
        ws_file = Path(workspace) / ".dsh-recall.toml"
        if ws_file.is_file():
            ws_data = read_toml(ws_file, Config)
            if not is_trusted(ws_file):
                ws_data = limit_workspace_file(ws_data, ws_file, Path(workspace), notices)
            ws_data = drop_user_only(ws_data, ws_file, notices)
            data = merge(data, ws_data)
    explicit = config_file or environ.get("DSH_RECALL_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        data = merge(data, read_toml(path, Config))  # a FIFO or a device: refused there
    data = merge(data, from_env(environ, Config))
    if overrides:
        clean = {k: v for k, v in overrides.items() if v is not None}
        check_keys(clean, Config, "flags")
        data = merge(data, clean)
    cfg = Config.model_validate(data)
    cfg.notices.extend(notices)
    return cfg

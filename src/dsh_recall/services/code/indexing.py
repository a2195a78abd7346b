"""The code index's sync: a workspace walk in, the store brought up to date (services/filesync),
files read in worker processes when there are many (code/prepare.py), skipped files remembered,
the kept document frequencies and the commonest terms' score lists looked after."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.config import Config
from ...core.errors import StoreError
from ...core.process import release_free_memory
from ...core.types import SourceFile
from ...rank import lexical as lex
from ...readers.workspace import WalkReport, parse_source_roots
from ...stores.contracts import ChunkStore, FileRow
from ..indexing import filesync
from ..vectors import Filled, Progress
from . import prepare as code_prepare

# After a large index run, the commonest terms' score lists are computed for this share of
# the run's time, at most WARM_MAX_S (see warm_common).
WARM_SHARE = 0.1
WARM_MAX_S = 10.0
# A first index of at least this many files is a bulk load (stores/*/bulk.py: indexes and
# counters built once at the end), written BULK_BATCH_CHUNKS chunks per transaction.
BULK_MIN_FILES = 200
BULK_BATCH_CHUNKS = 4000


@dataclass
class IndexReport:
    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    embedded: int = 0  # texts the model embedded
    reused: int = 0  # vectors the embedding cache gave back (a shared store's: anyone's)
    pending: int = 0
    skipped: dict[str, int] | None = None
    problems: list[str] | None = None
    notes: list[str] | None = None
    seconds: float = 0.0
    lists: int = 0  # score lists of common terms brought up to date (stores/sqlite/impacts.py)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}

    def count(self, filled: Filled) -> None:
        """Take an embedding pass's counts: the model's and the cache's apart."""
        self.embedded, self.reused = filled.embedded, filled.reused


class SkipMemory:
    """Files read and then skipped (minified, generated, binary...) keep no row, so without a
    memory they were read again by every index run, and 200 of them made every run a bulk
    one (term_df suspended and refilled: seconds at 100k chunks). Kept per index folder as
    {path: [size, mtime_ns, reason]}, valid for one chunker and one set of size limits."""

    def __init__(self, folder: Path, cfg: Config) -> None:
        self.path = folder / "skipped.json"
        self.cfg = cfg

    def _key(self) -> str:
        from ... import chunkers  # not at import: a search never chunks

        return f"{chunkers.CHUNKER_VERSION}:{self.cfg.max_file_bytes}:{self.cfg.excerpt_lines}"

    def load(self) -> dict[str, list]:
        try:
            data = json.loads(self.path.read_text())
            if data.get("key") != self._key():
                return {}
            return {p: v for p, v in data["files"].items()
                    if isinstance(v, list) and len(v) == 3}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # none yet, or unreadable: read the files again

    def save(self, files: dict[str, list]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps({"key": self._key(), "files": files}))
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)


def _stat_same(sf: SourceFile, old: FileRow) -> bool:
    return old.size == sf.size and old.mtime_ns == sf.mtime_ns


def sync(store: ChunkStore, cfg: Config, walked: WalkReport, skips: SkipMemory,
         notes: list[str], started: float,
         progress: Progress | None = None, workspace: Path | None = None) -> tuple[IndexReport, bool]:
    """Bring files and chunks up to date with `walked` (no embedding); returns the report
    (its seconds counted from `started`, a time.monotonic()) and whether the run was a bulk
    one (many files: see warm_common). Caller holds the lock."""
    rep = IndexReport(files=0, skipped=dict(walked.skipped), problems=list(walked.problems),
                      notes=notes)
    skipped = rep.skipped if rep.skipped is not None else {}
    before = skips.load()

    def remembered(sf: SourceFile) -> str | None:
        sk = before.get(sf.path)
        return sk[2] if sk and sk[0] == sf.size and sk[1] == sf.mtime_ns else None

    if store.bulk_interrupted():  # a first index killed mid-load: its rows are partial
        store.bulk_discard()
        notes.append("the last first index stopped before it ended: indexing from the start")
    todo = filesync.plan(store, walked.files, _stat_same, remembered)
    kept: dict[str, list] = {}
    for sf, reason in todo.remembered:  # skipped before, unchanged
        skipped[reason] = skipped.get(reason, 0) + 1
        kept[sf.path] = before[sf.path]
    jobs = [(sf, old.hash if old else None) for sf, old in todo.jobs]
    workers = code_prepare.worker_count(len(jobs), cfg.index_workers)
    # Kept document frequencies (SQLite): many files are counted once at the end, from
    # FTS5 (cheaper than counting each write); a few are counted as they are written,
    # on a table filled first if the index was made before it.
    bulk = store.keeps_term_df and len(jobs) >= code_prepare.PARALLEL_MIN_FILES
    if bulk:
        store.suspend_term_df()
    else:
        store.ensure_term_df()
    first = len(jobs) >= BULK_MIN_FILES and store.bulk_begin()
    prepared = code_prepare.prepare_many(jobs, cfg.max_file_bytes, cfg.excerpt_lines, workers)
    res = filesync.apply(store, todo, prepared, progress,
                         **({"batch_chunks": BULK_BATCH_CHUNKS} if first else {}))
    if first:  # an exception before this leaves the mark: the next run starts again
        store.bulk_end()
    for sf, reason in res.skipped:
        skipped[reason] = skipped.get(reason, 0) + 1
        kept[sf.path] = [sf.size, sf.mtime_ns, reason]
    if bulk:
        store.ensure_term_df()
    if kept != before:
        skips.save(kept)
    rep.indexed = len(res.indexed)
    rep.unchanged = todo.unchanged + res.same
    rep.deleted = len(res.deleted)
    rep.files = store.file_count()
    rep.chunks = store.chunk_count()
    rep.pending = store.pending_count()
    rep.seconds = round(time.monotonic() - started, 3)
    store.set_meta("last_index", json.dumps({
        "time": time.time(), "skipped": rep.skipped, "problems": rep.problems,
        **({"roots": configured_roots(cfg, workspace)} if workspace is not None else {})}))
    if bulk:
        release_free_memory()  # a load's batches: the searches after need none of them
    return rep, bulk


def configured_roots(cfg: Config, workspace: Path) -> dict[str, str]:
    """The extra source roots the config names now, label -> resolved path (the ones that
    exist; a bad entry is the walk's problem to report)."""
    roots, _problems = parse_source_roots(list(cfg.source_roots), workspace)
    return {r.label: str(r.path) for r in roots}


def roots_changed(store: ChunkStore, cfg: Config, workspace: Path) -> tuple[list[str], list[str]] | None:
    """(added, removed) root labels since the last index, or None when unchanged (or the
    index predates the record: its next run records them)."""
    last = json.loads(store.get_meta("last_index") or "{}")
    if "roots" not in last:
        return None
    now, then = configured_roots(cfg, workspace), dict(last["roots"])
    if now == then:
        return None
    added = sorted(k for k in now if then.get(k) != now[k])
    removed = sorted(k for k in then if now.get(k) != then[k])
    return added, removed


def warm_common(store: ChunkStore, lexical_s: float) -> int:
    """After a large run (a first index, a branch switch), the score lists of the
    commonest terms, for a tenth of the run's time (at most WARM_MAX_S): the run lost or
    outdated them, and a one-shot CLI never computes those itself. A failure costs only
    the lists (a search answers without them)."""
    try:
        return store.warm_common(min(WARM_MAX_S, WARM_SHARE * lexical_s), lex.STOPWORDS)
    except (StoreError, OSError):
        return 0

"""One incremental file sync for the chunk-store indexes (code, notes).

A source walks its files and says how it reads one; this brings the store to match: a file
whose row still matches (the source's `unchanged` test, size and mtime for both) is not read,
the others are prepared (read, hashed, chunked: by the source, possibly in worker processes)
and written several files per transaction, a file the walk no longer finds is forgotten.

What one prepared file can be:
- `index`: its row (with the content hash) and chunks replace what the store held;
- `same`: the content hash is the one indexed, only the stat is brought up to date;
- `skip`: not indexable (binary, minified, ...): it is forgotten, the reason counted;
- `keep`: not readable now (or too big): what was indexed stays, the reason is a problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ...core.types import SourceFile
from ...stores.contracts import ChunkStore, FileRow, IndexedChunk

Progress = Callable[[str, int, int], None]  # (phase, done, total)

# Files written per transaction, counted in chunks: a commit per file made FTS5 write and
# merge a segment per file; a few hundred chunks per commit keep the write lock short (a
# search never waits on it: readers see the last commit) and a kill -9 loses at most the
# batch in flight, never half of a file.
INDEX_BATCH_CHUNKS = 400
PROGRESS_EVERY = 50  # files between two progress reports


@dataclass(frozen=True)
class Prepared:
    """One file's outcome: `index` (row + chunks to write), `same` (content unchanged),
    `skip` (reason: forgotten) or `keep` (reason: left as indexed, reported)."""

    kind: str
    reason: str = ""
    row: FileRow | None = None
    items: tuple[IndexedChunk, ...] = ()


@dataclass
class SyncPlan:
    """What a sync will read: the files to prepare, with the row each had (None: new)."""

    known: dict[str, FileRow]
    jobs: list[tuple[SourceFile, FileRow | None]]
    seen: set[str]
    unchanged: int
    total: int
    remembered: list[tuple[SourceFile, str]] = field(default_factory=list)  # skipped unread


@dataclass
class SyncResult:
    indexed: list[str] = field(default_factory=list)  # paths re-chunked, in walk order
    same: int = 0  # read, content unchanged
    skipped: list[tuple[SourceFile, str]] = field(default_factory=list)  # forgotten, why
    problems: list[str] = field(default_factory=list)  # kept as indexed, why
    deleted: list[str] = field(default_factory=list)  # forgotten, sorted


def plan(store: ChunkStore, files: Sequence[SourceFile],
         unchanged: Callable[[SourceFile, FileRow], bool],
         remembered: Callable[[SourceFile], str | None] | None = None) -> SyncPlan:
    """Which of the walked `files` need reading. `unchanged(file, row)`: the indexed row
    still stands (not read); `remembered(file)`: a reason it was skipped before and has not
    changed since (not read, not kept: a file skipped keeps no row)."""
    known = store.files()
    out = SyncPlan(known, [], set(), 0, len(files))
    for sf in files:
        old = known.get(sf.path)
        if old is not None and unchanged(sf, old):
            out.seen.add(sf.path)
            out.unchanged += 1
            continue
        reason = remembered(sf) if remembered is not None else None
        if reason:
            out.remembered.append((sf, reason))
            continue
        out.jobs.append((sf, old))
    return out


def apply(store: ChunkStore, todo: SyncPlan, prepared: Iterable[tuple[SourceFile, Prepared]],
          progress: Progress | None = None,
          batch_chunks: int = INDEX_BATCH_CHUNKS) -> SyncResult:
    """Write what `prepared` (one outcome per job of `todo`, in order) says, then forget
    every known file the walk did not see."""
    res = SyncResult()
    seen = set(todo.seen)
    batch: list[tuple[FileRow, Sequence[IndexedChunk]]] = []
    in_batch = 0
    done = todo.total - len(todo.jobs)
    for sf, got in prepared:
        done += 1
        if progress and (done % PROGRESS_EVERY == 0 or done == todo.total):
            progress("scan", done, todo.total)
        if got.kind == "skip":
            res.skipped.append((sf, got.reason))
            continue
        seen.add(sf.path)
        if got.kind == "keep":
            res.problems.append(got.reason)
            continue
        if got.kind == "same":
            store.update_stat(sf.path, sf.size, sf.mtime_ns)
            res.same += 1
            continue
        assert got.row is not None
        batch.append((got.row, got.items))
        in_batch += len(got.items)
        if in_batch >= batch_chunks:
            write_batch(store, batch)
            batch, in_batch = [], 0
        res.indexed.append(sf.path)
    write_batch(store, batch)
    res.deleted = sorted(p for p in todo.known if p not in seen)
    if res.deleted:
        store.delete_files(res.deleted)
    return res


def write_batch(store: ChunkStore, batch: list[tuple[FileRow, Sequence[IndexedChunk]]]) -> None:
    """Several files per transaction where the store can (SQLite; PostgreSQL writes one
    file per transaction, see stores.contracts.ChunkStore.replace_files)."""
    if batch:
        store.replace_files(batch)

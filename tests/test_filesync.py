"""The one incremental file sync code and notes share (services/indexing/filesync.py): unchanged
files are not read, changed ones are rewritten, files the walk no longer finds are
forgotten, a file that cannot be read now keeps what was indexed, a skipped one keeps no row."""

from __future__ import annotations

from dsh_recall.core.types import Chunk, SourceFile
from dsh_recall.services.indexing import filesync
from dsh_recall.services.indexing.filesync import Prepared
from dsh_recall.stores.contracts import FileRow, IndexedChunk


class Store:
    """The part of the chunk store contract the sync uses, in memory."""

    def __init__(self) -> None:
        self.rows: dict[str, FileRow] = {}
        self.chunks: dict[str, int] = {}
        self.writes: list[list[str]] = []  # paths per transaction

    def files(self) -> dict[str, FileRow]:
        return dict(self.rows)

    def replace_files(self, batch):
        self.writes.append([row.path for row, _ in batch])
        for row, items in batch:
            self.rows[row.path] = row
            self.chunks[row.path] = len(items)

    def update_stat(self, path, size, mtime_ns):
        r = self.rows[path]
        self.rows[path] = FileRow(r.path, r.abs_path, r.root, r.hash, size, mtime_ns, r.chars)

    def delete_files(self, paths):
        for p in paths:
            self.rows.pop(p, None)
            self.chunks.pop(p, None)


def sf(path: str, size: int = 10, mtime: int = 1) -> SourceFile:
    return SourceFile(path, "/abs/" + path, "", size, mtime)


def chunks(path: str, n: int) -> tuple[IndexedChunk, ...]:
    return tuple(IndexedChunk(Chunk(path, i, i, "x", "text", (), "block"), "x", "", path, "x", f"h{i}")
                 for i in range(n))


def prepared_by(contents: dict[str, str | None], store: Store):
    """Prepare like a source: content None = unreadable now, "SKIP" = not indexable."""
    def prepare(todo):
        for f, old in todo.jobs:
            text = contents[f.path]
            if text is None:
                yield f, Prepared("keep", reason=f"cannot read {f.path}")
            elif text == "SKIP":
                yield f, Prepared("skip", reason="minified")
            elif old is not None and old.hash == text:
                yield f, Prepared("same")
            else:
                row = FileRow(f.path, f.abs_path, "", text, f.size, f.mtime_ns, len(text))
                yield f, Prepared("index", row=row, items=chunks(f.path, 3))
    return prepare


def stat_same(f: SourceFile, old: FileRow) -> bool:
    return old.size == f.size and old.mtime_ns == f.mtime_ns


def run(store: Store, files: list[SourceFile], contents: dict[str, str | None], **kw):
    todo = filesync.plan(store, files, stat_same)
    return todo, filesync.apply(store, todo, prepared_by(contents, store)(todo), **kw)


def test_only_changed_files_are_read_and_deleted_ones_are_forgotten():
    store = Store()
    todo, res = run(store, [sf("a"), sf("b"), sf("c")], {"a": "1", "b": "2", "c": "3"})
    assert len(todo.jobs) == 3 and res.indexed == ["a", "b", "c"] and res.deleted == []
    # b touched with the same content, c edited, a gone, d new
    todo, res = run(store, [sf("b", mtime=2), sf("c", mtime=2), sf("d")],
                    {"b": "2", "c": "3b", "d": "4"})
    assert [f.path for f, _ in todo.jobs] == ["b", "c", "d"] and todo.unchanged == 0
    assert res.same == 1 and res.indexed == ["c", "d"] and res.deleted == ["a"]
    assert set(store.rows) == {"b", "c", "d"} and store.rows["b"].mtime_ns == 2
    todo, res = run(store, [sf("b", mtime=2), sf("c", mtime=2), sf("d")], {})
    assert todo.jobs == [] and todo.unchanged == 3 and res.indexed == [] and res.deleted == []


def test_an_unreadable_file_keeps_its_rows_and_a_skipped_one_keeps_none():
    store = Store()
    run(store, [sf("a"), sf("b")], {"a": "1", "b": "2"})
    _, res = run(store, [sf("a", mtime=2), sf("b", mtime=2)], {"a": None, "b": "SKIP"})
    assert res.problems == ["cannot read a"] and [(f.path, r) for f, r in res.skipped] == [("b", "minified")]
    assert set(store.rows) == {"a"} and res.deleted == ["b"]


def test_files_are_written_several_per_transaction_and_progress_counts_every_file():
    store = Store()
    seen: list[tuple[str, int, int]] = []
    files = [sf(f"f{i:03d}") for i in range(120)]
    run(store, files, {f.path: "x" for f in files},
        progress=lambda *a: seen.append(a), batch_chunks=30)
    assert all(len(w) == 10 for w in store.writes) and sum(map(len, store.writes)) == 120
    assert seen == [("scan", 50, 120), ("scan", 100, 120), ("scan", 120, 120)]


def test_remembered_skips_are_not_read_and_keep_no_row():
    store = Store()
    files = [sf("gen.js"), sf("a")]
    todo = filesync.plan(store, files, stat_same,
                         lambda f: "generated" if f.path == "gen.js" else None)
    assert [(f.path, r) for f, r in todo.remembered] == [("gen.js", "generated")]
    assert [f.path for f, _ in todo.jobs] == ["a"]

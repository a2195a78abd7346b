"""The notes index's sync: the note roots' markdown files in, the store brought up to date
through services/indexing/filesync, under the chunk-spec gate (a new chunk spec re-chunks unchanged
notes only once the user accepts it: `--accept-spec-change`)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ...chunkers import notes as note_chunker
from ...core.config import NotesConfig
from ...core.text import index_text, safe_decode
from ...core.types import Chunk, SourceFile
from ...readers.notes import walk_notes
from ...readers.workspace import read_regular
from ...stores.contracts import ChunkStore, FileRow, IndexedChunk
from ..indexing import filesync
from ..indexing.filesync import Prepared, Progress
from . import entries
from .roots import NO_ROOTS


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def embed_text(path: str, heading: Sequence[str], text: str) -> str:
    """What the embedder sees: the note's name and heading path, then the entry."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].replace("-", " ").replace("_", " ")
    head = stem + (" > " + " > ".join(heading) if heading else "")
    return head + "\n" + text


def spec_of(hash_field: str) -> str:
    # The files table's hash column holds "<chunker spec>:<sha256>", so the spec a note was
    # chunked with travels atomically with its chunks.
    return hash_field.split(":", 1)[0] if ":" in hash_field else ""


def spec_state(store: ChunkStore) -> dict[str, Any]:
    """The chunk-spec gate: which spec the index holds, the current one, notes pending."""
    current = note_chunker.NOTES_CHUNKER_VERSION
    indexed = store.get_meta("chunker") or current
    # The files table's hash is "<spec>:<sha256>" (spec_of): notes of another spec
    # are those whose hash does not start with the current one.
    return {"index": indexed, "current": current, "pending": indexed != current,
            "pending_notes": store.count_files_outside(current + ":")}


def chunk_note(path: str, text: str, max_entry_chars: int) -> list[IndexedChunk]:
    items: list[IndexedChunk] = []
    stem = path.rsplit(".", 1)[0].replace("/", " ").replace("-", " ").replace("_", " ")
    path_lex = index_text(stem)
    entry = entries.is_entry(path)
    if entry and entries.is_forgotten_text(text):
        return []  # forgotten with its file kept (services/notes/write.py): never indexed
    for c in note_chunker.chunk_markdown(path, text, max_entry_chars):
        if entry and c.kind == "frontmatter":
            continue  # a written entry's bookkeeping, not memory
        et = embed_text(path, c.heading, c.text)
        chunk = Chunk(path, c.start_line, c.end_line, c.text, "markdown", c.heading, c.kind)
        items.append(IndexedChunk(chunk, index_text(c.text), index_text(" ".join(c.heading)),
                                  path_lex, et, sha256(et.encode("utf-8", "surrogatepass"))[:32]))
    return items


def prepare(sf: SourceFile, ncfg: NotesConfig, spec: str) -> Prepared:
    """One note read and chunked under `spec`. A note too big or unreadable keeps what was
    indexed before (reported, never forgotten nor read whole)."""
    if sf.size > ncfg.max_note_bytes:
        return Prepared("keep", reason=f"{sf.abs_path} is {sf.size:,} bytes, over "
                                       f"notes.max_note_bytes ({ncfg.max_note_bytes:,}); skipped")
    try:
        data = read_regular(sf.abs_path, ncfg.max_note_bytes)
    except OSError as e:
        return Prepared("keep", reason=f"cannot read {sf.abs_path}: {e.strerror or e}")
    text = safe_decode(data)
    row = FileRow(sf.path, sf.abs_path, sf.root, f"{spec}:{sha256(data)}", sf.size,
                  sf.mtime_ns, len(text))
    return Prepared("index", row=row, items=tuple(chunk_note(sf.path, text, ncfg.max_entry_chars)))


def gate_spec(store: ChunkStore, accept_spec_change: bool, notes: list[str]) -> str:
    """The chunk spec the index is under after this run: the current one for a new index or
    when the user accepts a change, else the one recorded (notes of an older spec wait)."""
    current = note_chunker.NOTES_CHUNKER_VERSION
    recorded = store.get_meta("chunker")
    if recorded is None or accept_spec_change:
        if recorded is not None and recorded != current:
            notes.append(f"chunk spec changed ({recorded} -> {current}): re-chunking every note")
        store.set_meta("chunker", current)
        recorded = current
    return recorded


def sync(store: ChunkStore, ncfg: NotesConfig, roots: Sequence[Path], recorded: str,
         notes: list[str], started: float, progress: Progress | None = None) -> dict[str, Any]:
    """Bring files and chunks up to date (no embedding); returns the index report (its
    seconds from `started`, a time.monotonic()). Caller holds the lock, has gated the spec
    (`recorded`: gate_spec) and checked the embedder's fingerprint.

    A note is re-chunked when its size, mtime or place changed, or (only when the spec
    change was accepted) when it was chunked under an older chunk spec."""
    current = note_chunker.NOTES_CHUNKER_VERSION
    store.ensure_term_df()  # an index made before the kept document frequencies: fill them once
    walk = walk_notes(list(roots), ncfg.exclude)

    def unchanged(sf: SourceFile, old: FileRow) -> bool:
        behind = spec_of(old.hash) != current
        return (sf.size <= ncfg.max_note_bytes and old.size == sf.size
                and old.mtime_ns == sf.mtime_ns and old.abs_path == sf.abs_path
                and not (behind and recorded == current))

    todo = filesync.plan(store, walk.files, unchanged)

    def prepared() -> Iterator[tuple[SourceFile, Prepared]]:
        for sf, _ in todo.jobs:
            yield sf, prepare(sf, ncfg, current)

    res = filesync.apply(store, todo, prepared(), progress)
    walk.problems.extend(res.problems)
    if not roots:
        notes.append(NO_ROOTS)
    spec = spec_state(store)
    if spec["pending"]:
        notes.append(f"chunk spec changed ({spec['index']} -> {spec['current']}): re-chunking "
                     f"{spec['pending_notes']} notes is pending; run `dsh-recall notes index "
                     "--accept-spec-change`")
    store.set_meta("last_index", json.dumps({"time": time.time(), "problems": walk.problems}))
    return {
        "roots": walk.roots, "files": store.file_count(), "indexed": len(res.indexed),
        "reindexed": res.indexed, "unchanged": todo.unchanged + res.same,
        "deleted": len(res.deleted), "deleted_paths": res.deleted,
        "chunks": store.chunk_count(), "embedded": 0, "pending": store.pending_count(),
        "spec": spec, "problems": walk.problems, "notes": notes,
        "seconds": round(time.monotonic() - started, 3),
    }

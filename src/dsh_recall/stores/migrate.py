"""Copy SQLite indexes into PostgreSQL without re-embedding (`dsh-recall store migrate`).

Chunk stores (code workspaces, notes indexes) and the history store are read straight from
their SQLite files: files, chunks with the token strings their FTS5 rows index (stores/sqlite/lexical.py), vectors by
text hash, and the meta that fingerprints them (embedder, chunker), so the PostgreSQL index
is the same index and nothing is embedded again. The memory-mapped vector files are a
cache of the SQLite rows and are not needed. Objects stay local and are not copied.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from ..core.errors import StoreError
from ..core.types import Chunk
from . import vec_codec
from .contracts import BlockIn, EmbedCacheStore, FileRow, IndexedChunk
from .sqlite import lexical

# Meta that describes the SQLite file itself (its vector file, write counters), not the index.
LOCAL_META = {"vec_seq", "vec_epoch", "vector_file", "generation", "schema"}

Progress = Callable[[str, int, int], None]


def _ro(path: Path) -> sqlite3.Connection:
    if not Path(path).is_file():
        raise StoreError(f"{path} does not exist")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def copy_chunk_store(src: Path, dst, replace: bool = False, progress: Progress | None = None,
                     cache: EmbedCacheStore | None = None) -> dict:
    """Copy one SQLite chunk store into the (PostgreSQL) store `dst`; returns counts. Its
    vectors also go into `cache` (the store's shared embedding cache) under the index's
    embedder fingerprint, so a teammate's index of the same code embeds none of them."""
    t0 = time.monotonic()
    conn = _ro(src)
    lexical.register(conn)  # chunks_fts's strings come from a view over the chunk rows
    cached = 0
    try:
        fp_row = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        fp = fp_row[0] if fp_row else None
        if dst.file_count() and not replace:
            raise StoreError(f"{dst.path} already holds {dst.file_count()} files; "
                             "pass --replace to overwrite it")
        if dst.file_count():
            dst.clear()
            dst.clear_vectors()
        for key, value in conn.execute("SELECT key, value FROM meta"):
            if key not in LOCAL_META:
                dst.set_meta(key, value)
        dst.auto_ann = False  # one index build at the end, not row by row
        nvec = 0
        rows = conn.execute("SELECT hash, vec FROM vectors")
        while batch := rows.fetchmany(2000):
            vecs = [(h, vec_codec.decode(v)) for h, v in batch]
            dst.put_vectors(vecs)
            if cache is not None and fp:
                cache.put(fp, vecs)
                cached += len(vecs)
            nvec += len(batch)
        files = conn.execute("SELECT id, path, abs_path, root, hash, size, mtime_ns, chars "
                             "FROM files ORDER BY path").fetchall()
        nchunks = 0
        for n, (fid, *frow) in enumerate(files, 1):
            items = []
            for r in conn.execute(
                    "SELECT c.start_line, c.end_line, c.language, c.symbols, c.text, c.embed_hash, "
                    "t.body, t.symbols, t.path FROM chunks c JOIN chunks_fts t ON t.rowid = c.id "
                    "WHERE c.file_id = ? ORDER BY c.id", (fid,)):
                c = Chunk(frow[0], r[0], r[1], lexical.unpack_text(r[4]), r[2], tuple(json.loads(r[3])))
                items.append(IndexedChunk(c, r[6], r[7], r[8], "", r[5]))
            dst.replace_file(FileRow(*frow), items)
            nchunks += len(items)
            if progress and (n % 100 == 0 or n == len(files)):
                progress("files", n, len(files))
        dst.auto_ann = True
        if dst.vector_count():
            dst.maybe_build_ann()
        return {"source": str(src), "target": dst.path, "files": len(files), "chunks": nchunks,
                "vectors": nvec, "cached": cached, "pending": dst.pending_count(),
                "seconds": round(time.monotonic() - t0, 2)}
    finally:
        conn.close()


def copy_history(src: Path, dst, replace: bool = False, progress: Progress | None = None) -> dict:
    """Copy the SQLite history store into the (PostgreSQL) history store `dst`."""
    t0 = time.monotonic()
    conn = _ro(src)
    conn.row_factory = sqlite3.Row
    try:
        have = dst.stats()
        if have["sessions"] and not replace:
            raise StoreError(f"{dst.path} already holds {have['sessions']} sessions; "
                             "pass --replace to overwrite it")
        if have["sessions"]:
            dst.clear()
        for r in conn.execute("SELECT key, value FROM meta"):
            if r["key"] not in LOCAL_META:
                dst.set_meta(r["key"], r["value"])
        sessions = [dict(r) for r in conn.execute("SELECT * FROM sessions ORDER BY id")]
        nblocks = 0
        for n, s in enumerate(sessions, 1):
            events = [dict(r) for r in conn.execute(
                "SELECT session, seq, role, time_ms, time, message_id, call_id, flags, text "
                "FROM events WHERE session = ? ORDER BY seq", (s["id"],))]
            blocks = []
            for b in conn.execute(
                    "SELECT b.session, b.seq, b.part, b.role, b.kind, b.tool, b.text, b.hash, "
                    "l.body AS literal, t.body AS trigram, c.body AS cjk FROM blocks b "
                    "LEFT JOIN fts_literal l ON l.rowid = b.id LEFT JOIN fts_trigram t ON "
                    "t.rowid = b.id LEFT JOIN fts_cjk c ON c.rowid = b.id WHERE b.session = ? "
                    "ORDER BY b.ord", (s["id"],)):
                blocks.append(BlockIn(b["session"], b["seq"], b["part"], b["role"], b["kind"],
                                      b["tool"], b["text"], b["hash"], b["literal"] or "",
                                      b["trigram"] if b["trigram"] is not None else b["text"],
                                      b["cjk"] or ""))
            nblocks += dst.write_batch([s], events, blocks, [], None)
            if progress and (n % 20 == 0 or n == len(sessions)):
                progress("sessions", n, len(sessions))
        for f in conn.execute("SELECT * FROM files"):
            dst.write_batch([], [], [], [], dict(f))
        keyed = [(r[0], r[1], r[2], r[3]) for r in conn.execute(
            "SELECT session, seq, part, embed_hash FROM blocks WHERE embed_hash IS NOT NULL")]
        dst.set_embed_hashes_by_key(keyed)
        dst.auto_ann = False
        nvec = 0
        rows = conn.execute("SELECT hash, vec FROM vectors")
        while batch := rows.fetchmany(2000):
            dst.put_vectors([(h, vec_codec.decode(v)) for h, v in batch])
            nvec += len(batch)
        dst.auto_ann = True
        dst.maybe_build_ann()
        return {"source": str(src), "target": dst.path, "sessions": len(sessions),
                "blocks": nblocks, "vectors": nvec, "seconds": round(time.monotonic() - t0, 2)}
    finally:
        conn.close()

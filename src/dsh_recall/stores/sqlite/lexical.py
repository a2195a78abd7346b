"""The lexical strings of a chunk store, kept once.

FTS5 indexes three strings per chunk: its text's tokens (`body`), its symbols' (`symbols`)
and its path's (`path`). An FTS5 table with its own content kept a copy of all three
beside the chunk rows they come from (1.4 KB a code chunk, a fifth of an index). Here
`chunks_fts` is an external-content table over the view `chunks_lex`, whose columns are
computed from the chunk rows by SQL functions registered on the store's connection
(`register`): body = core.text.index_text(chunks.text), symbols = index_text of the
symbols joined by spaces, path = files.lex_path (the path's string, kept once per file).
A chunk whose caller-given strings differ from those keeps them in chunks.lex_body /
lex_symbols / lex_path (NULL otherwise, as for every chunk the code and notes indexers
write), so the view gives back exactly what was indexed: FTS5 reads it to delete a row
and the term counts (term_df) read it for the same, and `dsh-recall store migrate` to copy it.

If index_text itself changed, the view would no longer give what was indexed: meta
`lexical` holds a fingerprint of index_text's output over a probe, checked before the
first delete of a process (`check`); a different one rebuilds the FTS5 index from the view.

A chunk's text is kept deflated (`pack_text`: a zlib blob where that is shorter, about
half of a code chunk; a short text stays TEXT, as every row of an earlier release does):
its readers (`unpack_text`: the store's chunk rows, the view, `store migrate`) tell the two
by the value's type.

An index of an earlier release keeps its FTS5 table with its own content (migration 7 adds
the columns only; converting would tokenize every chunk again inside the first open) until
it is emptied (`clear`, a new chunker or embedder), when it is made anew this way.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from collections.abc import Sequence

from ...core.text import index_text
from ..contracts import IndexedChunk

TOKENIZE = "tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\""
FTS_OWN = f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, symbols, path, {TOKENIZE})"
FTS_EXTERNAL = (f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, symbols, path, "
                f"content = 'chunks_lex', content_rowid = 'id', {TOKENIZE})")
VOCAB = "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, row)"
VIEW = """CREATE VIEW IF NOT EXISTS chunks_lex(id, body, symbols, path) AS
SELECT c.id, coalesce(c.lex_body, recall_lex(c.text)),
  coalesce(c.lex_symbols, recall_lex_symbols(c.symbols)), coalesce(c.lex_path, f.lex_path, '')
FROM chunks c JOIN files f ON f.id = c.file_id"""

# Every kind of word index_text splits or keeps: camelCase, snake_case, digits, dotted and
# slashed paths, apostrophes, diacritics, CJK, punctuation runs.
PROBE = ("parseHTTPResponse2 get_user_id __init__ XMLHttpRequest v1.2.3 a/b/c.py foo-bar "
         "don't naïve café Straße 数据库连接 $var @decorator #id 0x1F 1e-3 ΑΒΓ ÆØ _ __ ___ "
         "snake_Case_MIX CamelCASEWord i18n k8s user@example.com http://x.y/z?q=1 “quoted” …")


PACK_MIN = 96  # shorter texts gain nothing worth a blob


def pack_text(text: str) -> str | bytes:
    """The value kept in chunks.text: a zlib blob where that is shorter, else the text."""
    if len(text) < PACK_MIN:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    packed = zlib.compress(raw, 6)
    return packed if len(packed) < len(raw) else text


def unpack_text(value: str | bytes | None) -> str:
    """The text of a chunks.text value (a zlib blob or plain text)."""
    if isinstance(value, bytes):
        return zlib.decompress(value).decode("utf-8", "surrogatepass")
    return value or ""


def _lex_symbols(raw: str | None) -> str:
    try:
        syms = json.loads(raw) if raw else []
    except ValueError:
        syms = []
    return index_text(" ".join(str(s) for s in syms)) if isinstance(syms, list) else ""


def register(conn: sqlite3.Connection) -> None:
    """The view's functions, on a connection that reads or writes a chunk store."""
    conn.create_function("recall_lex", 1, lambda t: index_text(unpack_text(t)), deterministic=True)
    conn.create_function("recall_lex_symbols", 1, _lex_symbols, deterministic=True)


def fingerprint() -> str:
    return hashlib.sha256(index_text(PROBE).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def external(conn: sqlite3.Connection) -> bool:
    """chunks_fts keeps no content of its own (no _content shadow table)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_fts_content'").fetchone() is None


def file_path_lex(chunks: Sequence[IndexedChunk]) -> str:
    """The path string kept once for a file: its first chunk's."""
    return chunks[0].path_lexical if chunks else ""


def overrides(ic: IndexedChunk, path_lex: str) -> tuple[str | None, str | None, str | None]:
    """The strings of a chunk the view would not derive (None: it derives them)."""
    body = None if index_text(ic.chunk.text) == ic.lexical else ic.lexical
    syms = None if index_text(" ".join(ic.chunk.symbols)) == ic.symbols_lexical else ic.symbols_lexical
    return body, syms, (None if ic.path_lexical == path_lex else ic.path_lexical)


def remake_external(conn: sqlite3.Connection) -> None:
    """chunks_fts (and its vocabulary) anew as an external-content table over the view,
    filled from it: an emptied store (cheap), or a converted one."""
    conn.execute("DROP TABLE IF EXISTS chunks_vocab")
    conn.execute("DROP TABLE IF EXISTS chunks_fts")
    conn.execute(VIEW)
    conn.execute(FTS_EXTERNAL)
    conn.execute(VOCAB)
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('rebuild')")
    set_fingerprint(conn)


def set_fingerprint(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES('lexical', ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (fingerprint(),))


def stale(conn: sqlite3.Connection) -> bool:
    """The view no longer derives what the external-content index holds (index_text
    changed since it was written)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'lexical'").fetchone()
    return external(conn) and (row is None or row[0] != fingerprint())


def rebuild(conn: sqlite3.Connection) -> None:
    """Index every chunk again from the view (inside the caller's write transaction)."""
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('rebuild')")
    set_fingerprint(conn)

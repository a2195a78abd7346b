"""The schema migrations of the SQLite stores, one numbered list per store.

Each list is ordered: `(version, step)` takes a database from the version before to
`version`; a step is SQL (statements separated by ";") or a function of the connection.
The version a database is at is recorded in its meta table (`schema`). Opening runs the
steps after the recorded version, in one write transaction with the record, so a second
process opening the same file at the same time finds it migrated and does nothing. A new
file is created at the latest shape at once (`create`) and recorded at the latest version.
A database at the latest version is only read, never written, by opening it.

Steps that add a column check for it first: files of early releases recorded a version
before the columns added under it existed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from ...core.errors import StoreError
from . import lexical

Step = str | Callable[[sqlite3.Connection], None]
Migrations = Sequence[tuple[int, Step]]


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def run_sql(conn: sqlite3.Connection, script: str) -> None:
    """Statement by statement: executescript would commit the transaction first."""
    for stmt in script.split(";"):
        if stmt.strip():
            conn.execute(stmt)


def latest(steps: Migrations) -> int:
    return steps[-1][0]


def recorded(conn: sqlite3.Connection) -> int | None:
    """The recorded version; None for a new file (no meta table yet), 0 when unrecorded
    or unreadable."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.OperationalError:
        return None
    try:
        return int(row[0]) if row else 0
    except ValueError:
        return 0


def apply(conn: sqlite3.Connection, steps: Migrations, create: Step) -> bool:
    """Bring the database to the latest version inside the caller's write transaction;
    returns True when anything ran (False: another process got there first)."""
    version = recorded(conn)
    last = latest(steps)
    if version == last:
        return False
    if version is not None and version > last:
        # A later release's layout (deflated texts, columns read through its own functions):
        # reading on would give wrong answers, and recording our number would lose its.
        raise StoreError(f"this index was written by a later dsh-recall (schema {version}; this "
                         f"one knows up to {last}): upgrade dsh-recall, or remove the index "
                         f"(`dsh-recall index --drop PATH`) and index again")
    todo = [create] if version is None else [step for number, step in steps if number > version]
    for step in todo:
        if isinstance(step, str):
            run_sql(conn, step)
        else:
            step(conn)
    conn.execute("INSERT INTO meta(key, value) VALUES('schema', ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(last),))
    return True


# -- the chunk store (code workspaces, notes indexes) ----------------------------------------

CHUNKS_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, abs_path TEXT NOT NULL,
  root TEXT NOT NULL, hash TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  chars INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
  start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, language TEXT NOT NULL,
  symbols TEXT NOT NULL, text TEXT NOT NULL, embed_hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_embed ON chunks(embed_hash);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
  body, symbols, path, tokenize = "unicode61 remove_diacritics 2 tokenchars '_'");
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, row);
CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, vec BLOB NOT NULL)
"""


def _chunks_vec_seq(conn: sqlite3.Connection) -> None:
    """2: chunks.vec_seq, the number of the write that gave a chunk its vector (NULL: none
    yet); vectors already there count as write 1."""
    if "vec_seq" not in columns(conn, "chunks"):
        run_sql(conn, """
ALTER TABLE chunks ADD COLUMN vec_seq INTEGER;
UPDATE chunks SET vec_seq = 1 WHERE embed_hash IN (SELECT hash FROM vectors);
INSERT INTO meta(key, value) VALUES('vec_seq', '1')
  ON CONFLICT(key) DO UPDATE SET value = '1'
""")
    conn.execute("CREATE INDEX IF NOT EXISTS chunks_vec_seq ON chunks(vec_seq)")


def _term_df_gen(conn: sqlite3.Connection) -> None:
    """4: term_df.gen, the generation of the last write that touched each term."""
    if "gen" not in columns(conn, "term_df"):
        conn.execute("ALTER TABLE term_df ADD COLUMN gen INTEGER NOT NULL DEFAULT 0")


# Chunks of prose and configuration (rst, markdown, text, yaml, ...): embedded after code in
# background work (stores/sqlite/chunks.pending). Kept here, beside the partial index that
# serves it: its WHERE must match the query's exactly for SQLite to use it.
PROSE_LANGUAGES = ("rst", "markdown", "text", "yaml", "ini", "json", "toml", "make", "xml", "csv")
PENDING_CODE_WHERE = ("vec_seq IS NULL AND language NOT IN ("
                      + ", ".join(f"'{x}'" for x in PROSE_LANGUAGES) + ")")
PENDING_CODE_INDEX = f"CREATE INDEX IF NOT EXISTS chunks_pending_code ON chunks(id) WHERE {PENDING_CODE_WHERE}"

def _chunks_lexical(conn: sqlite3.Connection) -> None:
    """7: the columns the external-content FTS5 table's view reads (stores/sqlite/lexical.py):
    files.lex_path, chunks.lex_body / lex_symbols / lex_path, and the view. An index with
    rows keeps its FTS5 table with its own content (converting would tokenize every chunk
    again inside this open) until it is emptied; an empty one is converted now."""
    if "lex_path" not in columns(conn, "files"):
        conn.execute("ALTER TABLE files ADD COLUMN lex_path TEXT")
    have = columns(conn, "chunks")
    for col in ("lex_body", "lex_symbols", "lex_path"):
        if col not in have:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {col} TEXT")
    conn.execute(lexical.VIEW)
    if not lexical.external(conn):
        if conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is None:
            lexical.remake_external(conn)
    elif conn.execute("SELECT 1 FROM files WHERE lex_path IS NULL LIMIT 1").fetchone() is not None:
        # An earlier release wrote here after this one (it recorded its own version): its
        # files have no path string, so FTS5 is made to index what the view gives them.
        lexical.rebuild(conn)


CHUNKS: Migrations = [
    (1, CHUNKS_V1),
    (2, _chunks_vec_seq),
    (3, "CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL, "
        "gen INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID"),
    (4, _term_df_gen),
    (5, "CREATE TABLE IF NOT EXISTS chunk_log (gen INTEGER NOT NULL, id INTEGER NOT NULL, "
        "inserted INTEGER NOT NULL);\nCREATE INDEX IF NOT EXISTS chunk_log_gen ON chunk_log(gen)"),
    (6, PENDING_CODE_INDEX),
    (7, _chunks_lexical),
]

CHUNKS_CREATE_SQL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, abs_path TEXT NOT NULL,
  root TEXT NOT NULL, hash TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  chars INTEGER NOT NULL, lex_path TEXT);
CREATE TABLE IF NOT EXISTS chunks (
  id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
  start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, language TEXT NOT NULL,
  symbols TEXT NOT NULL, text TEXT NOT NULL, embed_hash TEXT NOT NULL, vec_seq INTEGER,
  lex_body TEXT, lex_symbols TEXT, lex_path TEXT);
CREATE INDEX IF NOT EXISTS chunks_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_embed ON chunks(embed_hash);
CREATE INDEX IF NOT EXISTS chunks_vec_seq ON chunks(vec_seq);
""" + lexical.VIEW + ";\n" + lexical.FTS_EXTERNAL + ";\n" + lexical.VOCAB + """;
CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL,
  gen INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunk_log (gen INTEGER NOT NULL, id INTEGER NOT NULL,
  inserted INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS chunk_log_gen ON chunk_log(gen);
""" + PENDING_CODE_INDEX + "\n"


def chunks_create(conn: sqlite3.Connection) -> None:
    """A new chunk store at the latest shape (lexical strings kept once: stores/sqlite/lexical.py)."""
    run_sql(conn, CHUNKS_CREATE_SQL)
    lexical.set_fingerprint(conn)

# -- the history store -----------------------------------------------------------------------

HISTORY_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY, source TEXT NOT NULL, workspace TEXT, title TEXT,
  created_ms INTEGER, updated_ms INTEGER, path TEXT, channel TEXT);
CREATE INDEX IF NOT EXISTS sessions_ws ON sessions(workspace);
CREATE TABLE IF NOT EXISTS files (
  path TEXT PRIMARY KEY, format TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
  offset INTEGER NOT NULL, line_no INTEGER NOT NULL, head_hash TEXT NOT NULL, session TEXT);
CREATE TABLE IF NOT EXISTS events (
  session TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, time_ms INTEGER, time TEXT,
  message_id TEXT, call_id TEXT, flags TEXT NOT NULL DEFAULT '', text TEXT NOT NULL,
  PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS blocks (
  id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL, part INTEGER NOT NULL,
  ord INTEGER NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, tool TEXT, text TEXT NOT NULL,
  hash TEXT NOT NULL, embed_hash TEXT, UNIQUE (session, seq, part));
CREATE INDEX IF NOT EXISTS blocks_ord ON blocks(session, ord);
CREATE INDEX IF NOT EXISTS blocks_hash ON blocks(hash);
CREATE VIRTUAL TABLE IF NOT EXISTS fts_literal USING fts5(
  body, tokenize = "porter unicode61 remove_diacritics 2");
CREATE VIRTUAL TABLE IF NOT EXISTS fts_trigram USING fts5(body, tokenize = "trigram");
CREATE VIRTUAL TABLE IF NOT EXISTS fts_cjk USING fts5(body, tokenize = "unicode61");
CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, vec BLOB NOT NULL)
"""


def _history_v2(conn: sqlite3.Connection) -> None:
    """2: a version-1 file of any release brought to today's shape. blocks.embed_hash (NULL:
    not hashed yet), blocks.vec_seq (the number of the write that gave a block its vector,
    for the memory-mapped vector file), the index of the blocks waiting for a vector, and
    sessions.channel (NULL: produced by the owner). Version 1 was recorded before these."""
    run_sql(conn, HISTORY_V1)  # tables of the first release are all there; this is cheap
    cols = columns(conn, "blocks")
    if "embed_hash" not in cols:  # no hash, no vector by key: vec_seq says none
        conn.execute("ALTER TABLE blocks ADD COLUMN embed_hash TEXT")
        if "vec_seq" in cols:
            conn.execute("UPDATE blocks SET vec_seq = NULL")
    conn.execute("CREATE INDEX IF NOT EXISTS blocks_embed ON blocks(embed_hash)")
    if "vec_seq" not in cols:
        conn.execute("ALTER TABLE blocks ADD COLUMN vec_seq INTEGER")
        conn.execute("UPDATE blocks SET vec_seq = 1 WHERE embed_hash IN (SELECT hash FROM vectors)")
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('vec_seq', '1')")
    conn.execute("CREATE INDEX IF NOT EXISTS blocks_vec_seq ON blocks(vec_seq)")
    # Exactly the blocks waiting for a vector (hashed, vec_seq NULL), in hash order:
    # `pending` reads as many as it needs and nothing when none wait.
    conn.execute("CREATE INDEX IF NOT EXISTS blocks_pending ON blocks(embed_hash) "
                 "WHERE vec_seq IS NULL AND embed_hash IS NOT NULL")
    if "channel" not in columns(conn, "sessions"):
        conn.execute("ALTER TABLE sessions ADD COLUMN channel TEXT")


HISTORY: Migrations = [
    (1, HISTORY_V1),
    (2, _history_v2),
]


def history_create(conn: sqlite3.Connection) -> None:
    """A new history file: version 1's tables, then step 2 (as every release made it)."""
    run_sql(conn, HISTORY_V1)
    _history_v2(conn)

# -- the lineage store (commits of one git repository) ---------------------------------------

LINEAGE_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits (
  id INTEGER PRIMARY KEY, hash TEXT NOT NULL UNIQUE, parents TEXT NOT NULL, author TEXT NOT NULL,
  author_mail TEXT NOT NULL, author_time INTEGER NOT NULL, committer_time INTEGER NOT NULL,
  message TEXT NOT NULL, files TEXT NOT NULL, truncated INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS commits_time ON commits(committer_time);
CREATE TABLE IF NOT EXISTS hunks (
  id INTEGER PRIMARY KEY, commit_id INTEGER NOT NULL REFERENCES commits(id) ON DELETE CASCADE,
  path TEXT NOT NULL, old_path TEXT NOT NULL, old_start INTEGER NOT NULL,
  old_lines INTEGER NOT NULL, new_start INTEGER NOT NULL, new_lines INTEGER NOT NULL,
  added TEXT NOT NULL, removed TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS hunks_commit ON hunks(commit_id, path);
CREATE INDEX IF NOT EXISTS hunks_path ON hunks(path, commit_id);
CREATE VIRTUAL TABLE IF NOT EXISTS commits_fts USING fts5(
  message, tokenize = "porter unicode61 remove_diacritics 2")
"""

LINEAGE: Migrations = [
    (1, LINEAGE_V1),
]

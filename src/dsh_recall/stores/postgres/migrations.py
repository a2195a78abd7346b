"""Namespaces of the PostgreSQL stores and their schema migrations, one numbered list per
kind of store.

One database holds many indexes: each code workspace, each notes index and the history
store is a namespace with its own PostgreSQL schema (`dshr_<hash>`), listed in
`dsh_recall.namespaces` with the schema version it was migrated to (util.connect creates
that catalog). A list is ordered: (version, step) takes a namespace from the version before
to `version`. Version 1 is each kind's first schema.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from ...core.errors import StoreError
from .util import CATALOG

Step = Callable[[Any, str], None] | str
Migrations = Sequence[tuple[int, Step]]

def schema_name(namespace: str) -> str:
    return "dshr_" + hashlib.sha256(namespace.encode()).hexdigest()[:20]


def latest(steps: Migrations) -> int:
    return steps[-1][0] if steps else 0


def ensure_namespace(conn: Any, name: str, kind: str, steps: Migrations) -> str:
    """The schema of namespace `name`, created and migrated to the latest version.

    `steps` is the kind's numbered list: (version, step) takes a namespace from the version
    before to `version`; a step is SQL with `{s}` for the schema, or a function (conn,
    schema). Applied in one transaction each, under an advisory lock, so concurrent openers
    see either the old version or the new one. A namespace written by a newer version of
    dsh-recall is refused."""
    schema = schema_name(name)
    last = latest(steps)
    row = conn.execute(f"SELECT kind, version FROM {CATALOG}.namespaces WHERE name = %s",
                       (name,)).fetchone()
    if row and row[0] != kind:
        raise StoreError(f"namespace {name} holds a {row[0]} index, not {kind}")
    if row and row[1] == last:
        return schema
    if row and row[1] > last:
        raise StoreError(f"namespace {name} has schema version {row[1]}, newer than this "
                         f"dsh-recall knows ({last}); upgrade dsh-recall")
    while True:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("dsh_recall:ns:" + name,))
            conn.execute(f"INSERT INTO {CATALOG}.namespaces(name, kind, schema) VALUES (%s, %s, %s) "
                         "ON CONFLICT (name) DO NOTHING", (name, kind, schema))
            version = conn.execute(f"SELECT version FROM {CATALOG}.namespaces WHERE name = %s",
                                   (name,)).fetchone()[0]
            if version >= last:
                return schema
            if version == 0:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            number, step = next((n, st) for n, st in steps if n > version)
            if isinstance(step, str):
                for stmt in split_sql(step.replace("{s}", schema)):
                    conn.execute(stmt)
            else:
                step(conn, schema)
            conn.execute(f"UPDATE {CATALOG}.namespaces SET version = %s WHERE name = %s",
                         (number, name))


def split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";\n") if s.strip()]


def namespace_version(conn: Any, name: str) -> int | None:
    row = conn.execute(f"SELECT version FROM {CATALOG}.namespaces WHERE name = %s",
                       (name,)).fetchone()
    return row[0] if row else None


def drop_namespace(conn: Any, name: str) -> None:
    """Delete a namespace and everything in it."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("dsh_recall:ns:" + name,))
        conn.execute(f"DROP SCHEMA IF EXISTS {schema_name(name)} CASCADE")
        conn.execute(f"DELETE FROM {CATALOG}.namespaces WHERE name = %s", (name,))


# -- the chunk store (code workspaces, notes indexes) ----------------------------------------

CHUNKS: Migrations = [
    (1, """
CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.files (
  id BIGSERIAL PRIMARY KEY, path TEXT NOT NULL UNIQUE, abs_path TEXT NOT NULL,
  root TEXT NOT NULL, hash TEXT NOT NULL, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL,
  chars BIGINT NOT NULL);
CREATE TABLE {s}.chunks (
  id BIGSERIAL PRIMARY KEY, file_id BIGINT NOT NULL REFERENCES {s}.files(id) ON DELETE CASCADE,
  path TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
  language TEXT NOT NULL, symbols TEXT NOT NULL, text TEXT NOT NULL, embed_hash TEXT NOT NULL,
  has_vec BOOLEAN NOT NULL DEFAULT false, terms HSTORE NOT NULL, dl INTEGER NOT NULL);
CREATE INDEX chunks_file ON {s}.chunks(file_id);
CREATE INDEX chunks_path ON {s}.chunks((path COLLATE "C"));
CREATE INDEX chunks_embed ON {s}.chunks(embed_hash);
CREATE INDEX chunks_pending ON {s}.chunks(id) WHERE NOT has_vec;
CREATE INDEX chunks_terms ON {s}.chunks USING gin(terms);
CREATE TABLE {s}.terms (lexeme TEXT PRIMARY KEY, df BIGINT NOT NULL);
CREATE TABLE {s}.stats (layer TEXT PRIMARY KEY, n BIGINT NOT NULL, total BIGINT NOT NULL);
INSERT INTO {s}.stats VALUES ('chunks', 0, 0);
CREATE TABLE {s}.vectors (hash TEXT PRIMARY KEY, vec vector NOT NULL);
CREATE SEQUENCE {s}.vec_seq
"""),
]

# -- the history store -----------------------------------------------------------------------

HISTORY: Migrations = [
    (1, """
CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.sessions (
  id TEXT PRIMARY KEY, source TEXT NOT NULL, workspace TEXT, title TEXT, created_ms BIGINT,
  updated_ms BIGINT, path TEXT, channel TEXT, user_name TEXT);
CREATE INDEX sessions_ws ON {s}.sessions(workspace);
CREATE TABLE {s}.files (
  path TEXT PRIMARY KEY, format TEXT NOT NULL, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL,
  "offset" BIGINT NOT NULL, line_no BIGINT NOT NULL, head_hash TEXT NOT NULL, session TEXT);
CREATE TABLE {s}.events (
  session TEXT NOT NULL, seq BIGINT NOT NULL, role TEXT NOT NULL, time_ms BIGINT, time TEXT,
  message_id TEXT, call_id TEXT, flags TEXT NOT NULL DEFAULT '', text TEXT NOT NULL,
  PRIMARY KEY (session, seq));
CREATE TABLE {s}.blocks (
  id BIGSERIAL PRIMARY KEY, session TEXT NOT NULL, seq BIGINT NOT NULL, part INTEGER NOT NULL,
  ord INTEGER NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, tool TEXT, text TEXT NOT NULL,
  hash TEXT NOT NULL, embed_hash TEXT, has_vec BOOLEAN NOT NULL DEFAULT false,
  tf_literal HSTORE NOT NULL, dl_literal INTEGER NOT NULL,
  tf_trigram HSTORE NOT NULL, dl_trigram INTEGER NOT NULL,
  tf_cjk HSTORE, dl_cjk INTEGER NOT NULL DEFAULT 0,
  UNIQUE (session, seq, part));
CREATE INDEX blocks_ord ON {s}.blocks(session, ord);
CREATE INDEX blocks_hash ON {s}.blocks(hash);
CREATE INDEX blocks_embed ON {s}.blocks(embed_hash);
CREATE INDEX blocks_unhashed ON {s}.blocks(id) WHERE embed_hash IS NULL;
CREATE INDEX blocks_pending ON {s}.blocks(id) WHERE embed_hash IS NOT NULL AND NOT has_vec;
CREATE INDEX blocks_literal ON {s}.blocks USING gin(tf_literal);
CREATE INDEX blocks_trigram ON {s}.blocks USING gin(tf_trigram);
CREATE INDEX blocks_cjk ON {s}.blocks USING gin(tf_cjk);
CREATE TABLE {s}.terms_literal (lexeme TEXT PRIMARY KEY, df BIGINT NOT NULL);
CREATE TABLE {s}.terms_trigram (lexeme TEXT PRIMARY KEY, df BIGINT NOT NULL);
CREATE TABLE {s}.terms_cjk (lexeme TEXT PRIMARY KEY, df BIGINT NOT NULL);
CREATE TABLE {s}.stats (layer TEXT PRIMARY KEY, n BIGINT NOT NULL, total BIGINT NOT NULL);
INSERT INTO {s}.stats VALUES ('literal', 0, 0), ('trigram', 0, 0), ('cjk', 0, 0);
CREATE TABLE {s}.vectors (hash TEXT PRIMARY KEY, vec vector NOT NULL)
"""),
]

# -- the lineage store (commits of one git repository) ---------------------------------------

LINEAGE: Migrations = [
    (1, """
CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.commits (
  id BIGSERIAL PRIMARY KEY, hash TEXT NOT NULL UNIQUE, parents TEXT NOT NULL, author TEXT NOT NULL,
  author_mail TEXT NOT NULL, author_time BIGINT NOT NULL, committer_time BIGINT NOT NULL,
  message TEXT NOT NULL, files TEXT NOT NULL, truncated BOOLEAN NOT NULL DEFAULT false,
  tsv TSVECTOR NOT NULL);
CREATE INDEX commits_time ON {s}.commits(committer_time);
CREATE INDEX commits_tsv ON {s}.commits USING gin(tsv);
CREATE TABLE {s}.hunks (
  id BIGSERIAL PRIMARY KEY, commit_id BIGINT NOT NULL REFERENCES {s}.commits(id) ON DELETE CASCADE,
  path TEXT NOT NULL, old_path TEXT NOT NULL, old_start INTEGER NOT NULL,
  old_lines INTEGER NOT NULL, new_start INTEGER NOT NULL, new_lines INTEGER NOT NULL,
  added TEXT NOT NULL, removed TEXT NOT NULL);
CREATE INDEX hunks_commit ON {s}.hunks(commit_id, path);
CREATE INDEX hunks_path ON {s}.hunks(path, commit_id)
"""),
]

# -- the shared embedding cache (one per database: stores/postgres/embed_cache.py) -----------

EMBED_CACHE: Migrations = [
    (1, """
CREATE TABLE {s}.cache (
  fp TEXT NOT NULL, hash TEXT NOT NULL, vec BYTEA NOT NULL, PRIMARY KEY (fp, hash))
"""),
]

"""Which store backs an index: the config's `store` (also $DSH_RECALL_STORE) names it.

None (the default) is the embedded SQLite store under the recall home; a `postgresql://`
URL is a shared PostgreSQL + pgvector database, where each index is a namespace (see
docs/postgres.md). Objects always stay in the local SQLite store. The PostgreSQL modules
(and psycopg) are imported only when a URL asks for them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import StoreError

SCHEMES = {"sqlite": "embedded SQLite under the recall home (store unset)",
           "postgresql": "postgresql://user@host:port/db (also postgres://)"}


def backend(store: str | None) -> str:
    """'sqlite' or 'postgresql' for a config `store` value; anything else is an error that
    lists the valid ones."""
    if store is None or store == "" or store == "sqlite":
        return "sqlite"
    if store.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    raise StoreError(f"unknown store '{store[:40]}': valid stores are "
                     + "; ".join(f"{k}: {v}" for k, v in SCHEMES.items()))


def _pg_chunks(url: str, namespace: str, path: Path):
    from .postgres.chunks import PgChunkStore

    return PgChunkStore(url, namespace)


def _sqlite_chunks(url: str | None, namespace: str, path: Path):
    from .sqlite.chunks import SqliteChunkStore

    return SqliteChunkStore(path)


def _pg_history(url: str, namespace: str, path: Path):
    from .postgres.history import PgHistoryStore

    return PgHistoryStore(url, namespace)


def _sqlite_history(url: str | None, namespace: str, path: Path):
    from .sqlite.history import HistoryStore

    return HistoryStore(path)


CHUNK_STORES: dict[str, Callable[[Any, str, Path], Any]] = {
    "sqlite": _sqlite_chunks, "postgresql": _pg_chunks}
HISTORY_STORES: dict[str, Callable[[Any, str, Path], Any]] = {
    "sqlite": _sqlite_history, "postgresql": _pg_history}


def chunk_store(store: str | None, namespace: str, sqlite_path: Path):
    """The chunk store of one index: SQLite at `sqlite_path`, or namespace `namespace` of
    the PostgreSQL database `store`."""
    return CHUNK_STORES[backend(store)](store, namespace, Path(sqlite_path))


def history_store(store: str | None, sqlite_path: Path, namespace: str = "history"):
    """The history store: SQLite at `sqlite_path`, or one namespace of PostgreSQL."""
    return HISTORY_STORES[backend(store)](store, namespace, Path(sqlite_path))


def reopen(store):
    """The same store on a connection of its own (for a worker thread)."""
    again = getattr(store, "reopen", None)
    if again is not None:
        return again()
    return type(store)(store.path)


def code_namespace(workspace_key: str) -> str:
    return f"code/{workspace_key}"


def notes_namespace(key: str) -> str:
    return f"notes/{key}"


def lineage_namespace(repo_key: str) -> str:
    return f"lineage/{repo_key}"


def _pg_lineage(url: str, namespace: str, path: Path):
    from .postgres.lineage import PgLineageStore

    return PgLineageStore(url, namespace)


def _sqlite_lineage(url: str | None, namespace: str, path: Path):
    from .sqlite.lineage import SqliteLineageStore

    return SqliteLineageStore(path)


LINEAGE_STORES: dict[str, Callable[[Any, str, Path], Any]] = {
    "sqlite": _sqlite_lineage, "postgresql": _pg_lineage}


def lineage_store(store: str | None, namespace: str, sqlite_path: Path):
    """The commits of one repository: SQLite at `sqlite_path`, or namespace `namespace` of
    the PostgreSQL database `store`."""
    return LINEAGE_STORES[backend(store)](store, namespace, Path(sqlite_path))


def _pg_embed_cache(url: str, home: Path):
    from .postgres.embed_cache import PgEmbedCache

    return PgEmbedCache(url)


def _sqlite_embed_cache(url: str | None, home: Path):
    from .sqlite.embed_cache import EmbedCache

    return EmbedCache(home / "embed-cache.sqlite")


EMBED_CACHES: dict[str, Callable[[Any, Path], Any]] = {
    "sqlite": _sqlite_embed_cache, "postgresql": _pg_embed_cache}


def embed_cache(store: str | None, home: Path):
    """The embedding cache an index's embed step reuses vectors from
    (stores.contracts.EmbedCacheStore): the recall home's `embed-cache.sqlite` (one user), or
    the one table of the PostgreSQL database `store` (every user of it)."""
    return EMBED_CACHES[backend(store)](store, Path(home))

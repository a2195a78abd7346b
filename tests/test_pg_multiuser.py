"""Many users on one PostgreSQL store at once: four real MCP servers of different users and
channels (`dsh-recall mcp --channel KEY`, each its own recall home) search shared code and
history while their CLIs import new sessions; every call succeeds and every search shows
only what its channel may see (bench/pg_multiuser.py is the harness; there it runs 8 x 500
with timings)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import pg_multiuser as harness  # noqa: E402

from pg_fixture import pg_server, pg_url  # noqa: E402, F401  (fixtures)

CLIENTS, OPS = 4, 50


def test_four_users_on_one_store_see_only_their_channels(tmp_path, pg_url):
    world = harness.make_world(pg_url, tmp_path, CLIENTS)
    assert world.channels == ["group:alpha", "group:beta", "group:alpha", "owner-key"]
    results = harness.run(world, CLIENTS, OPS)
    errors = [e for r in results for e in r.errors]
    assert errors == []
    assert [x for r in results for x in r.leaks] == []
    for r in results:  # every kind of operation ran, as often as asked
        assert sum(len(v) for v in r.times.values()) == OPS
        assert {"code", "history", "write"} <= set(r.times)
    # Each saw sessions (its own channel's at least), and the owner saw both groups' (and
    # may see other tests' sessions in a shared server: leaks are checked against the
    # channel the store recorded).
    prod = [{harness.producer_of(s, world.tag) for s in r.seen} - {None} for r in results]
    assert prod[0] == prod[2] == {"group:alpha"} and prod[1] == {"group:beta"}
    assert {"group:alpha", "group:beta"} <= prod[3]
    # A client's CLI writes reach its MCP server's next searches (another process, one store).
    assert all(any(f"-u{i}-w" in s for s in r.seen) for i, r in enumerate(results))

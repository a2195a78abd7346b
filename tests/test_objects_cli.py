"""The `dsh-recall object ...` machine interface (documented in docs/objects.md)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dsh_recall.frontends.cli import cli

TEXT = "".join(f"[INFO] building module {i}\n" for i in range(300)) + "[ERROR] BUILD FAILURE\n"
TEXT += "".join(f"[INFO] cleanup {i}\n" for i in range(40))


def _cli(*args, input=None):
    res = CliRunner().invoke(cli, list(args), input=input)
    return res


def test_put_get_search_stats_gc_json(tmp_path):
    f = tmp_path / "log.txt"
    f.write_text(TEXT)
    put = json.loads(_cli("object", "put", str(f), "--session", "s1", "--seq", "4",
                          "--tool", "Bash", "--json").stdout)
    assert set(put) == {"id", "inline", "chars", "offloaded", "dropped"}
    assert put["offloaded"] is True and put["chars"] == len(TEXT)
    assert put["id"] in put["inline"] and len(put["inline"]) < len(TEXT)
    # stdin, same (session, seq): same object
    again = json.loads(_cli("object", "put", "-", "--session", "s1", "--seq", "4", "--json",
                            input=TEXT).stdout)
    assert again["id"] == put["id"]

    got = json.loads(_cli("object", "get", put["id"], "--json").stdout)
    assert got == {"id": put["id"], "start": 0, "text": TEXT[:8000], "total": len(TEXT)}

    found = json.loads(_cli("object", "search", put["id"], "build failure", "--limit", "3",
                            "--json").stdout)
    assert found["id"] == put["id"]
    m = found["matches"][0]
    assert set(m) == {"line", "offset", "text"} and m["line"] == 301
    assert len(found["matches"]) <= 3
    rng = json.loads(_cli("object", "get", put["id"], "--start", str(m["offset"]),
                          "--count", str(len(m["text"])), "--json").stdout)
    assert rng["start"] == m["offset"] and rng["text"] == "[ERROR] BUILD FAILURE"

    st = json.loads(_cli("object", "stats", "--json").stdout)
    assert st["offloaded"] == 1 and st["recalls"] == 3
    # Its token figure is the ledger's (every dsh model request, against plain dsh): no dsh
    # request here, so nothing is claimed for a hook's offload.
    assert st["chars_offloaded"] == len(TEXT) and st["tokens_kept_out"] == 0 and st["requests_counted"] == 0
    assert st["recent"][0]["tool"] == "Bash"
    human = _cli("object", "stats").stdout
    assert "offloaded 1 results" in human and "Bash" in human

    gc = json.loads(_cli("object", "gc", "--json").stdout)
    assert gc["evicted"] == 0
    gc = json.loads(_cli("object", "gc", "--max-age-days", "0", "--json").stdout)
    assert gc["evicted"] == 1
    gone = _cli("object", "get", put["id"])
    assert gone.exit_code == 1 and "evicted" in gone.stderr


def test_small_put_and_unknown_id():
    small = json.loads(_cli("object", "put", "-", "--json", input="hello").stdout)
    assert small == {"id": None, "inline": "hello", "chars": 5, "offloaded": False,
                     "dropped": False}
    res = _cli("object", "search", "deadbeef", "x")
    assert res.exit_code == 1 and "no object 'deadbeef'" in res.stderr

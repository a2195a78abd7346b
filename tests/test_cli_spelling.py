"""One spelling across the CLI: `-n` on every search, `object get --lines A-B` as every
offload notice names a range."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.services.objects import ObjectService


def _run(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def test_every_search_takes_dash_n():
    for cmd in (["search"], ["notes", "search"], ["history", "search"]):
        assert "-n, --limit" in _run(*cmd, "--help"), cmd


def test_object_get_takes_the_line_range_an_offload_notice_names():
    text = "".join(f"line {i} of the log\n" for i in range(1, 3001))
    svc = ObjectService(load_config().objects)
    try:
        put = svc.put(text, session="s", seq=1, tool="bash")
    finally:
        svc.close()
    assert put.id and "lines=" in put.inline  # the notice names ranges this way
    got = json.loads(_run("object", "get", put.id, "--lines", "1200-1202", "--json"))
    assert got["text"] == "line 1200 of the log\nline 1201 of the log\nline 1202 of the log\n"
    assert got["line"] == 1200 and got["line_count"] == 3000
    shown = _run("object", "get", put.id, "--lines", "2999-4000")
    assert shown.startswith("line 2999 of the log\nline 3000 of the log\n")
    r = CliRunner().invoke(cli, ["object", "get", put.id, "--lines", "9-3"])
    assert r.exit_code != 0 and "lines must be 'a-b' with 1 <= a <= b" in r.output
    r = CliRunner().invoke(cli, ["object", "get", put.id, "--lines", "1-2", "--start", "5"])
    assert r.exit_code != 0 and "not both" in r.output

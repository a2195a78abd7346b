"""Every path a user or a repository names is read bounded and regular-file-only; hostile
input gets a clear error, never "internal error"; the dsh worker survives any line.

Regressions from the adversarial pass: `eval /dev/zero` grew memory without bound, `eval
FIFO` hung, six hostile cases files gave "internal error", `history show --around 2**63`
too; a line of 1,000 `[` ended the dsh worker (RecursionError from json) and every later
request was lost; a spill marker with an empty kept tail verified against any spill-named
file.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.core.config_sources import read_toml
from dsh_recall.core.errors import ConfigError, InputError
from dsh_recall.core.files import read_bounded
from dsh_recall.core.settings import Section
from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.dsh import loop
from dsh_recall.frontends.dsh.spill import read_spill, restore_spilled
from dsh_recall.frontends.dsh.worker import Worker
from dsh_recall.services import evaluate


def _cli_in_child(args: list[str]) -> subprocess.CompletedProcess:
    """The CLI in a child with 1 GB of address space (a read of /dev/zero that is not
    bounded fails there, not on the machine) and a hang guard (a FIFO open)."""
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from dsh_recall.frontends.cli import cli
        sys.exit(cli.main({args!r}, standalone_mode=True))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "missing"])
def test_eval_refuses_what_is_not_a_regular_file_with_a_clear_error(tmp_path, kind):
    target = {"dev-zero": "/dev/zero", "directory": str(tmp_path),
              "missing": str(tmp_path / "nope.jsonl")}.get(kind, str(tmp_path / "cases.fifo"))
    if kind == "fifo":
        os.mkfifo(target)
    r = _cli_in_child(["eval", target])
    assert r.returncode in (1, 2), r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip()  # it says why
    if kind in ("dev-zero", "fifo"):
        assert "not a regular file" in r.stderr, r.stderr  # refused before any read


HOSTILE = {
    "deep-list": "[" * 100_000,
    "deep-line": '{"query": "x", "paths": ' + "[" * 5000 + "\n",
    "huge-float-seq": '{"query": "x", "source": "history", "seq": 1e400}',
    "seq-past-int64": '{"query": "x", "source": "history", "session": "s", "seq": 9223372036854775808}',
    "infinite-line": '{"query": "x", "source": "objects", "object": "abc", "lines": [Infinity]}',
    "nested-seq-overflow": '{"query": "x", "source": "history", "seqs": [{"session": "s", "seq": 1e400}]}',
    "nul-query": '{"query": "a\\u0000b", "paths": ["a.py"]}',
    "not-utf8": b'{"query": "\xff\xfe", "paths": ["a.py"]}',
    "bom": "\ufeff" + '{"query": "deploy key", "paths": ["a.py"]}',
    "lone-surrogate": '{"query": "\\ud800 deploy", "paths": ["a.py"]}',
    "negative-line": '{"query": "x", "source": "objects", "object": "abc", "lines": [-1]}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_cases_file_gets_a_clear_answer(tmp_path, name):
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "a.py").write_text("def deploy_key():\n    return 1\n")
    cases = tmp_path / "cases.jsonl"
    raw = HOSTILE[name]
    cases.write_bytes(raw if isinstance(raw, bytes) else raw.encode("utf-8"))
    r = CliRunner().invoke(cli, ["eval", str(cases), "--workspace", str(ws)])
    assert "internal error" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1), r.output


def test_a_seq_that_sqlite_cannot_hold_is_refused_as_a_bad_case(tmp_path):
    cases = tmp_path / "c.jsonl"
    cases.write_text(HOSTILE["seq-past-int64"])
    with pytest.raises(InputError, match="bad expectation"):
        evaluate.load_cases(cases)
    cases.write_text('{"query": "x", "source": "history", "session": "s", "seq": 3.0}')
    assert evaluate.load_cases(cases)[0]["expect"] == [("s", 3)]  # a whole float still counts


def test_history_show_refuses_a_seq_past_int64_clearly():
    r = CliRunner().invoke(cli, ["history", "show", "s1", "--around", str(2**63)])
    assert r.exit_code == 2 and "internal error" not in r.output
    assert "--around" in r.output


def test_read_bounded_refuses_too_big_and_special_files(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="limit"):
        read_bounded(big, 100)
    assert read_bounded(big, 101) == b"x" * 101
    with pytest.raises(InputError, match="not a regular file"):
        read_bounded("/dev/zero", 100)
    with pytest.raises(InputError, match="does not exist"):
        read_bounded(tmp_path / "none", 100)


def test_a_config_file_that_is_a_device_or_nests_too_deeply_is_a_config_error(tmp_path):
    r = _cli_in_child(["--config", "/dev/zero", "status"])  # in a child: memory is capped
    assert r.returncode == 1 and "not a regular file" in r.stderr, r.stderr
    assert "internal error" not in r.stderr
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "\n")
    with pytest.raises(ConfigError):
        read_toml(deep, Section)
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):  # refused, never opened
        load_config(config_file=fifo)


# -- the dsh worker ------------------------------------------------------------------------------

def test_a_deeply_nested_line_is_answered_and_the_worker_goes_on(tmp_path):
    lines = [b"[" * 1000, b"{" * 100_000, b'{"id": 1, "op": "ping"}', b'{"id": 2, "op": "status"}']
    out = io.BytesIO()
    loop.serve(io.BytesIO(b"\n".join(lines) + b"\n"), out, Worker(dsh_home=str(tmp_path)), idle_s=0.05)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [a["id"] for a in answers[1:]] == [None, None, 1, 2]
    assert [a["ok"] for a in answers[1:]] == [False, False, True, True]
    assert "nested too deeply" in answers[1]["error"]


def test_an_over_long_line_is_one_refused_request(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "MAX_LINE_BYTES", 1000)
    lines = [b'{"id": 9, "pad": "' + b"x" * 5000 + b'"}', b'{"id": 1, "op": "ping"}']
    out = io.BytesIO()
    loop.serve(io.BytesIO(b"\n".join(lines) + b"\n"), out, Worker(dsh_home=str(tmp_path)), idle_s=0.05)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(a["id"], a["ok"]) for a in answers[1:]] == [(None, False), (1, True)]


def test_a_spill_marker_with_an_empty_kept_tail_swaps_in_nothing(tmp_path):
    d = tmp_path / "dsh-subprocess-AbC123"
    d.mkdir()
    other = d / "dsh-subprocess-1-stdout.log"
    other.write_text("another command's whole output\n")
    empty = d / "dsh-subprocess-2-stdout.log"
    empty.write_text("")
    for p in (other, empty):
        for text in (f"\n[output truncated; full output: {p}]",
                     f"ok\n[stderr]\n\n[output truncated; full output: {p}]"):
            r = restore_spilled(text, lambda path: read_spill(path, 1 << 20))
            assert r.text == text and r.paths == ()

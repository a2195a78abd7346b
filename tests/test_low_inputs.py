"""Small bad inputs that used to be accepted or to hang: a retention age of NaN, a FIFO
given to `object put`, and a dsh patch file (it can hold the embedding key) written
readable by everyone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.errors import InputError
from dsh_recall.frontends.cli import cli
from dsh_recall.services.objects import ObjectService


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_object_gc_refuses_an_age_that_is_not_a_finite_number(tmp_path: Path, value: float) -> None:
    with ObjectService(path=tmp_path / "objects.sqlite") as svc:
        with pytest.raises(InputError, match="finite number"):
            svc.gc(max_age_days=value)
    res = CliRunner().invoke(cli, ["object", "gc", "--max-age-days", "nan"])
    assert res.exit_code == 1 and "finite number" in res.output


def test_object_put_on_a_fifo_says_so_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # A child process: on the old code the read waited for a writer forever.
    got = subprocess.run([sys.executable, "-m", "dsh_recall", "object", "put", str(fifo)],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "DSH_RECALL_DAEMON": "0"})
    assert got.returncode == 1 and "not a regular file" in got.stderr


def test_the_dsh_patch_file_is_written_for_the_user_alone(tmp_path: Path) -> None:
    out = tmp_path / "cordis.patch.yml"
    out.write_text("# the user's own lines\nother: 1\n")
    out.chmod(0o644)
    res = CliRunner().invoke(cli, ["integrate", "dsh", "patch", "--write", str(out)])
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text()
    assert text.startswith("# the user's own lines\nother: 1\n")  # every line it did not write


def test_an_mcp_error_text_is_one_bounded_line(tmp_path: Path) -> None:
    import asyncio

    from mcp import Client

    from dsh_recall.core.config import load_config
    from dsh_recall.frontends.mcp.handlers import RecallApp
    from dsh_recall.frontends.mcp.server import build_server

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text("def main():\n    return 0\n")
    app = RecallApp(workspace=repo, cfg=load_config(workspace=repo, overrides={"embedder": {"name": "fake"}}))

    async def body():
        async with Client(build_server(app, one_client=True)) as client:
            return await client.call_tool("object_recall", {"id": "no\nsuch\r\nid" + "x" * 2000})
    try:
        res = asyncio.run(body())
    finally:
        app.close()
    text = res.content[0].text
    assert res.is_error and "\n" not in text and "\r" not in text and len(text) <= 520


def test_one_line_pure():
    from dsh_recall.frontends.mcp.render import ERROR_CHARS, one_line

    assert one_line(ValueError("a\nb\r\n\x1bc\td")) == "a b c d"
    assert len(one_line(ValueError("x" * 5000))) == ERROR_CHARS

"""Only regular files are read, with a size bound; `/` and pseudo-filesystems are refused.

Regression cases from the adversarial pass: an indexed file replaced by a FIFO (search
hung in the stale check) or a symlink to /dev/zero (read whole: MemoryError), `index
/proc` and `search --workspace /` (walked forever), and hooks given `transcript_path:
"/proc/kmsg"` (hung). /proc/kmsg itself is never opened here: reading it blocks and
consumes the kernel log, so the tests check that nothing tries to open it.
"""

from __future__ import annotations

import builtins
import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.readers import workspace as ws_mod
from dsh_recall.readers.transcripts import base as tbase
from dsh_recall.readers.workspace import check_workspace_root, is_pseudo_fs, read_regular, stat_regular, walk
from dsh_recall.services import history as svc
from dsh_recall.services.code import CodeService


class Blocked(BaseException):
    """Raised by `deadline`; a BaseException so no `except OSError` or `except Exception`
    in the code under test can swallow it (TimeoutError is an OSError)."""


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) when the body blocks, e.g. opening a FIFO."""
    def boom(*_):
        raise Blocked(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "auth.py").write_text("def hash_password(password, salt):\n    return salt + password\n")
    (root / "pkg" / "util.py").write_text("def parse_http_response(body):\n    return body\n")
    return root


def _cfg(ws: Path):
    return load_config(workspace=ws, overrides={"embedder": {"name": "fake"}})


def _result(out: dict, path: str) -> dict:
    return next(r for r in out["results"] if r["path"] == path)


# -- readers ---------------------------------------------------------------------------

def test_read_regular_refuses_fifo_device_symlink_and_proc(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    with deadline(10):
        for path in (fifo, link, Path("/dev/zero"), Path("/proc/self/status"), tmp_path):
            with pytest.raises(OSError):
                read_regular(path, 1 << 20)
        with pytest.raises(OSError):
            read_regular(link, 1 << 20, follow_symlinks=True)  # a device, even when followed
        with pytest.raises(OSError):
            stat_regular(fifo)
    f = tmp_path / "f.txt"
    f.write_bytes(b"x" * 5000)
    assert read_regular(f, 100) == b"x" * 100
    assert read_regular(f, 10_000, offset=4990) == b"x" * 10
    assert stat_regular(f).st_size == 5000


def test_workspace_root_and_pseudo_filesystems_are_refused(tmp_path):
    for bad in ("/", "/proc", "/proc/self", "/sys", "/dev"):
        with pytest.raises(InputError):
            check_workspace_root(bad)
    assert check_workspace_root(tmp_path) == tmp_path.resolve()
    assert is_pseudo_fs("/proc/kmsg") and not is_pseudo_fs(tmp_path)


def test_walk_refuses_root_and_proc_before_listing_anything(monkeypatch):
    def no_scan(path):
        raise AssertionError(f"walked {path}")

    monkeypatch.setattr(ws_mod.os, "scandir", no_scan)
    for bad in ("/", "/proc"):
        with pytest.raises(InputError, match="filesystem root|pseudo-filesystem"):
            walk(Path(bad), [], max_file_bytes=1 << 20)


def test_cli_index_proc_and_search_root_answer_one_line(tmp_path):
    for args in (["index", "/proc", "--wait"], ["index", "/proc"], ["search", "x", "--workspace", "/"]):
        with deadline(60):
            res = CliRunner().invoke(__import__("dsh_recall.frontends.cli", fromlist=["cli"]).cli, args)
        assert res.exit_code != 0, args
        assert "Traceback" not in res.output
        msg = (res.output + (res.stderr if hasattr(res, "stderr") else "")).strip()
        assert "pseudo-filesystem" in msg or "filesystem root" in msg, msg


def test_source_root_on_proc_is_reported_and_skipped(repo):
    rep = walk(repo, ["kernel=/proc"], max_file_bytes=1 << 20)
    assert any("pseudo-filesystem" in p for p in rep.problems)
    assert all(not f.abs_path.startswith("/proc") for f in rep.files)


def test_notes_root_on_proc_is_reported_and_skipped():
    from dsh_recall.readers.notes import walk_notes

    rep = walk_notes([Path("/proc/self")])
    assert rep.files == [] and any("pseudo-filesystem" in p for p in rep.problems)


# -- the code index's stale check and reads ----------------------------------------------

def test_stale_check_on_a_file_replaced_by_a_fifo_does_not_hang(repo):
    svc_ = CodeService(repo, _cfg(repo))
    svc_.index()
    target = repo / "pkg" / "auth.py"
    target.unlink()
    os.mkfifo(target)
    with deadline(20):
        out = svc_.search("hash_password", layers=("lexical",))
    assert _result(out, "pkg/auth.py")["stale"] is True


def test_stale_check_on_a_symlink_to_dev_zero_reads_nothing(repo):
    svc_ = CodeService(repo, _cfg(repo))
    svc_.index()
    target = repo / "pkg" / "auth.py"
    target.unlink()
    target.symlink_to("/dev/zero")
    with deadline(20):
        out = svc_.search("hash_password", layers=("lexical",))
    assert _result(out, "pkg/auth.py")["stale"] is True


def test_stale_check_reads_at_most_the_indexed_size(repo, monkeypatch):
    svc_ = CodeService(repo, _cfg(repo))
    svc_.index()
    target = repo / "pkg" / "auth.py"
    size = target.stat().st_size
    with open(target, "ab") as f:
        f.write(b"# grown\n" * 100_000)
    asked: list[int] = []
    real = ws_mod.read_regular

    def spy(path, max_bytes, **kw):
        asked.append(max_bytes)
        return real(path, max_bytes, **kw)

    monkeypatch.setattr("dsh_recall.services.code.service.read_regular", spy)
    out = svc_.search("hash_password", layers=("lexical",))
    assert _result(out, "pkg/auth.py")["stale"] is True
    assert asked and max(asked) <= size + 1


def test_index_skips_a_file_that_turned_into_a_fifo_after_the_walk(repo, monkeypatch):
    svc_ = CodeService(repo, _cfg(repo))
    real_walk = svc_._walk

    def walk_then_swap():
        rep = real_walk()
        target = repo / "pkg" / "auth.py"
        target.unlink()
        os.mkfifo(target)
        return rep

    monkeypatch.setattr(svc_, "_walk", walk_then_swap)
    with deadline(20):
        rep = svc_.index_lexical()
    assert rep.skipped.get("unreadable") == 1 and rep.indexed == 1


# -- transcripts: bounded reads -----------------------------------------------------------

def test_transcript_reads_are_bounded_and_a_huge_line_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(tbase, "MAX_READ_BYTES", 400)
    lines = [json.dumps({"session": "g-big", "seq": i, "role": "user", "text": f"message number {i}"})
             for i in range(40)]
    lines.insert(20, json.dumps({"session": "g-big", "seq": 99, "role": "user", "text": "y" * 5000}))
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    seen: list[int] = []
    real = tbase.read_fd

    def spy(fd, max_bytes, offset=0):
        seen.append(max_bytes)
        return real(fd, max_bytes, offset)

    monkeypatch.setattr(tbase, "read_fd", spy)
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    rep = svc.import_paths([str(path)], fmt="generic", cfg=cfg)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["events"] == 40 and f["skipped"] == 1
    assert any("longer than 400 bytes" in n for n in f["notes"])
    assert max(seen) <= 400
    assert [e["seq"] for e in svc.show("g-big", around=39, window=0)["events"]] == [39]
    again = svc.import_paths([str(path)], fmt="generic", cfg=cfg)
    assert again["files"][0]["status"] == "unchanged"


def test_bounded_zstd_reads_give_the_same_events(tmp_path, monkeypatch):
    from fixtures import DSH_SESSIONS

    src = DSH_SESSIONS / "sess-002-default.session.v4.jsonl.zstd"
    whole = tbase.read_lines(src, 0, 0)
    got: list[bytes] = []
    offset = line_no = 0
    while True:
        raw = tbase.read_lines(src, offset, line_no, max_bytes=300)
        got.extend(line for _, line in raw.lines)
        assert raw.offset > offset or not raw.more
        offset, line_no = raw.offset, raw.line_no
        if not raw.more:
            break
    assert offset == src.stat().st_size
    assert got == [line for _, line in whole.lines]


# -- hooks --------------------------------------------------------------------------------

@pytest.fixture
def no_kmsg(monkeypatch):
    """Record (and refuse) any attempt to open /proc/kmsg."""
    tried: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def guard(path):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path) == "/proc/kmsg":
            tried.append(os.fspath(path))
            raise PermissionError(13, "the test refuses to open", "/proc/kmsg")

    def fake_open(file, *a, **kw):
        guard(file)
        return real_open(file, *a, **kw)

    def fake_os_open(path, *a, **kw):
        guard(path)
        return real_os_open(path, *a, **kw)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    return tried


def _hook(event: str, payload: dict | bytes) -> tuple[int, str]:
    from dsh_recall.frontends.cli import cli

    data = payload if isinstance(payload, bytes) else json.dumps(payload)
    res = CliRunner().invoke(cli, ["hook", "claude-code", event], input=data)
    return res.exit_code, res.output


@pytest.mark.parametrize("event,payload", [
    ("user-prompt-submit", {"session_id": "s1", "prompt": "what did we decide about retries?",
                            "transcript_path": "/proc/kmsg"}),
    ("session-start", {"session_id": "s1", "source": "compact", "transcript_path": "/proc/kmsg"}),
])
def test_hooks_never_open_a_kernel_file_as_transcript(monkeypatch, no_kmsg, event, payload):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    with deadline(30):
        code, _ = _hook(event, payload)
    assert code == 0
    assert no_kmsg == []


def test_hook_ignores_fifo_transcript(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    from dsh_recall.frontends.hooks.claude_code_recall import transcript_path

    assert transcript_path({"transcript_path": str(fifo)}) is None
    assert transcript_path({"transcript_path": "/proc/kmsg"}) is None
    assert transcript_path({"transcript_path": "a\x00b"}) is None
    assert transcript_path({"transcript_path": ["x"]}) is None
    real = tmp_path / "real.jsonl"
    real.write_text("")
    assert transcript_path({"transcript_path": str(real)}) == str(real)
    with deadline(30):
        code, _ = _hook("session-start", {"session_id": "s1", "source": "compact", "transcript_path": str(fifo)})
    assert code == 0


def test_hook_payload_with_lone_surrogates_imports_clean_text(tmp_path, monkeypatch):
    # A cut emoji in the transcript and an invalid byte in the prompt: the hook imports the
    # transcript with U+FFFD and answers (or stays silent) without failing.
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    t = tmp_path / "s-emoji.jsonl"
    rec = {"type": "user", "sessionId": "s-emoji", "uuid": "u1", "timestamp": "2026-01-01T10:00:00Z",
           "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x",
                                                    "content": "build ok \ud83d"}]}}
    t.write_text(json.dumps(rec) + "\n")
    payload = json.dumps({"session_id": "s-emoji", "prompt": "what did the build say earlier? \udcff",
                          "transcript_path": str(t)}).encode().replace(b"earlier?", b"earlier?\xff")
    code, out = _hook("user-prompt-submit", payload)
    assert code == 0
    if out.strip():
        json.loads(out)
    events = svc.show("s-emoji")["events"]
    assert events and "build ok \ufffd" in events[0]["text"]


def test_read_payload_cleans_and_bounds():
    import io

    from dsh_recall.frontends.cli.hooks import read_payload

    p = read_payload(io.BytesIO(b'{"prompt": "a\\ud800 b\xff", "x": ["\\udfff"]}'))
    assert p == {"prompt": "a\ufffd b\ufffd", "x": ["\ufffd"]}
    assert read_payload(io.BytesIO(b'{"a": "' + b"x" * 100 + b'"}'), limit=50) is None
    assert read_payload(io.BytesIO(b"[1]")) is None

"""The warm path starts itself: a CLI search or a hook that finds no daemon answers alone,
then leaves one running (detached, user-only socket) that answers the next call; the off
switches leave none; calls racing to start one end with one; a started one exits when idle.

Every daemon here runs in the test's own recall home and is stopped before the test ends
(tests/warm_sweep.py, also run by the conftest after every test)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_recall.frontends import warm
from warm_sweep import started_daemons, stop_daemons

PY = '''\
def retry_request(session, url, attempts=3):
    """Retry an HTTP request with exponential backoff."""
    for n in range(attempts):
        return session.get(url)
'''


@pytest.fixture()
def world(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "net.py").write_text(PY)
    home = tmp_path / "h"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake")
    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    monkeypatch.delenv("DSH_RECALL_DAEMON", raising=False)
    assert run(env, repo, "index", "--wait").returncode == 0
    assert not started_daemons(tmp_path)  # `index` is not a call a daemon answers
    yield {"repo": repo, "home": home, "env": env, "tmp": tmp_path}
    stop_daemons(tmp_path)
    assert not started_daemons(tmp_path)


def run(env, cwd, *args, extra=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "dsh_recall", *args], cwd=cwd, env=dict(env, **(extra or {})),
                          capture_output=True, text=True, timeout=120, input=stdin)


def log_of(w) -> str:
    path = Path(str(warm.socket_path(w["home"])) + ".log")
    return path.read_text() if path.exists() else ""


def ready(w, timeout_s: float = 90.0) -> None:
    """Wait until the started daemon listens (its start-up is not the test's subject)."""
    end = time.monotonic() + timeout_s
    while "listening on" not in log_of(w):
        assert time.monotonic() < end, log_of(w)
        assert started_daemons(w["tmp"]), "the daemon died: " + log_of(w)
        time.sleep(0.1)


def soon(check, timeout_s: float = 10.0) -> bool:
    """`check()` within timeout_s: a process started in this one shows its command line only
    once its exec is done (vfork), a moment after Popen returns."""
    end = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def test_a_cold_search_leaves_a_daemon_that_answers_the_next_call(world):
    w = world
    alone = run(w["env"], w["repo"], "search", "retry", "backoff", "--json", extra={"DSH_RECALL_DAEMON": "0"})
    assert not started_daemons(w["tmp"])
    first = run(w["env"], w["repo"], "search", "retry", "backoff", "--json")
    assert first.returncode == 0 and json.loads(first.stdout)["results"]
    # The first call answered alone; it left one daemon behind, detached from it.
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    pids = started_daemons(w["tmp"])
    with open(f"/proc/{pids[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    assert int(fields[3]) == pids[0] and fields[4] == "0"  # its own session, no terminal
    ready(w)
    sock = warm.socket_path(w["home"])
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(str(sock) + ".log").stat().st_mode) == 0o600
    second = run(w["env"], w["repo"], "search", "retry", "backoff", "--json")
    assert second.returncode == 0
    drop = lambda out: {k: v for k, v in json.loads(out).items() if k != "elapsed_ms"}  # noqa: E731
    assert drop(second.stdout) == drop(first.stdout) == drop(alone.stdout)
    assert "served search" in log_of(w)
    # History searches hand over too, and find the same daemon (none started beside it).
    hist = run(w["env"], w["repo"], "history", "search", "retry", "--all")
    assert hist.returncode == run(w["env"], w["repo"], "history", "search", "retry", "--all",
                                  extra={"DSH_RECALL_DAEMON": "0"}).returncode
    assert "served history search" in log_of(w)
    assert started_daemons(w["tmp"]) == pids
    assert stop_daemons(w["tmp"]) == pids
    assert not sock.exists()


def test_hooks_start_it_and_are_answered_by_it_as_alone(world):
    w = world
    payload = json.dumps({"session_id": "s1", "tool_name": "Bash", "tool_use_id": "t1",
                          "hook_event_name": "PostToolUse", "cwd": str(w["repo"]),
                          "tool_response": {"stdout": "build step ok\n" * 4000, "stderr": "",
                                            "interrupted": False, "isImage": False}})
    hook = ("hook", "claude-code", "post-tool-use")
    first = run(w["env"], w["repo"], *hook, stdin=payload)
    assert first.returncode == 0 and "updatedToolOutput" in first.stdout
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    ready(w)
    via = run(w["env"], w["repo"], *hook, stdin=payload)
    assert "served hook claude-code post-tool-use" in log_of(w)
    assert via.returncode == 0 and via.stdout == first.stdout  # the same object: a retried call
    prompt = json.dumps({"session_id": "s1", "prompt": "what did we decide about retries",
                         "hook_event_name": "UserPromptSubmit", "cwd": str(w["repo"])})
    up = ("hook", "claude-code", "user-prompt-submit")
    got = run(w["env"], w["repo"], *up, stdin=prompt)
    alone = run(w["env"], w["repo"], *up, stdin=prompt, extra={"DSH_RECALL_DAEMON": "0"})
    assert "served hook claude-code user-prompt-submit" in log_of(w)
    assert (got.returncode, got.stdout, got.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    # A call the daemon declines (another setting in its environment) reads the same payload
    # in its own process: what the client read for the daemon is replayed as its stdin.
    served = log_of(w).count("served")
    other = run(w["env"], w["repo"], *hook, stdin=payload, extra={"DSH_RECALL_LIMIT": "3"})
    assert other.returncode == 0 and other.stdout == first.stdout
    assert log_of(w).count("served") == served
    # An object read named in the offload notice is handed over as well.
    note = json.loads(first.stdout)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    oid = note.split("recall id=")[1][:8]
    got = run(w["env"], w["repo"], "object", "get", oid, "--lines", "1-2")
    assert got.returncode == 0 and "build step ok" in got.stdout
    assert "served object get" in log_of(w)


@pytest.mark.parametrize("switch", ["env", "manual", "config"])
def test_the_off_switch_leaves_no_daemon(world, switch):
    w = world
    extra = {}
    if switch == "env":
        extra = {"DSH_RECALL_DAEMON": "0"}
    elif switch == "manual":
        extra = {"DSH_RECALL_DAEMON": "manual"}
    else:
        (w["home"] / "config.toml").write_text("[daemon]\nautostart = false\n")
    for _ in range(2):
        got = run(w["env"], w["repo"], "search", "retry", "--json", extra=extra)
        assert got.returncode == 0 and json.loads(got.stdout)["results"]
        # A start happens before the call exits: none now means none at all.
        assert not started_daemons(w["tmp"])
    assert not warm.socket_path(w["home"]).exists()
    # A repository cannot turn it on or off: the [daemon] table is the user's own.
    (w["repo"] / ".dsh-recall.toml").write_text("[daemon]\nautostart = true\n")
    run(w["env"], w["repo"], "search", "retry", extra=extra)
    assert not started_daemons(w["tmp"])


def test_calls_racing_to_start_it_end_with_one_daemon(world):
    w = world
    with cf.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: run(w["env"], w["repo"], "search", "retry", "--json"), range(4)))
    assert all(o.returncode == 0 and json.loads(o.stdout)["results"] for o in outs)
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    ready(w)
    # In one process too: the first start holds the lock and passes it on; the others
    # find it held and start nothing, before and after the daemon listens.
    with cf.ThreadPoolExecutor(4) as pool:
        pids = list(pool.map(lambda _: warm.start(), range(4)))
    assert pids == [None] * 4
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    assert "already listens" not in log_of(w)


def test_racing_starts_in_one_process_start_exactly_one(world):
    w = world
    with cf.ThreadPoolExecutor(6) as pool:
        pids = list(pool.map(lambda _: warm.start(), range(6)))
    started = [p for p in pids if p is not None]
    assert len(started) == 1
    assert soon(lambda: started_daemons(w["tmp"]) == started)
    ready(w)
    assert started_daemons(w["tmp"]) == started


def test_a_started_daemon_exits_when_idle(world):
    w = world
    (w["home"] / "config.toml").write_text("[daemon]\nidle_minutes = 0.1\n")
    assert run(w["env"], w["repo"], "search", "retry").returncode == 0
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    ready(w)
    end = time.monotonic() + 120
    while started_daemons(w["tmp"]):
        assert time.monotonic() < end, log_of(w)
        time.sleep(0.2)
    assert "stopped (idle)" in log_of(w)
    assert not warm.socket_path(w["home"]).exists()
    # The next call starts a new one.
    assert run(w["env"], w["repo"], "search", "retry").returncode == 0
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)


def test_a_handed_over_call_loads_only_the_client(world):
    """What a warm call costs is the interpreter and the client: not click, numpy, the
    services, the daemon's server half, OpenSSL (hashlib) or typing."""
    w = world
    assert run(w["env"], w["repo"], "search", "retry").returncode == 0
    ready(w)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "dsh_recall", "search", "retry", "--json"],
                          cwd=w["repo"], env=w["env"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["results"]
    assert log_of(w).count("served search") == 1
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    assert "dsh_recall.frontends.warm" in names
    heavy = {"click", "numpy", "sqlite3", "dsh_recall.frontends.cli", "dsh_recall.frontends.daemon",
             "dsh_recall.services", "dsh_recall.core.config", "_hashlib", "typing", "base64", "subprocess",
             "pathlib", "threading", "dsh_recall.core.paths"}
    assert not heavy & names, sorted(heavy & names)


@pytest.mark.parametrize("env", [{"DSH_RECALL_HOME": "~/r/./h/"}, {"DSH_RECALL_HOME": "rel/h"},
                                 {"DSH_HOME": "~/.dsh2"}, {}])
def test_the_client_finds_the_recall_home_the_package_uses(monkeypatch, env):
    from dsh_recall.core.paths import recall_home

    for var in ("DSH_RECALL_HOME", "DSH_HOME"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert os.path.normpath(warm._home()) == str(recall_home())
    assert warm.socket_path() == recall_home() / "run" / Path(warm.socket_file()).name


def test_daemon_stop_stops_the_started_one(world):
    w = world
    got = run(w["env"], w["repo"], "daemon", "--stop")
    assert got.returncode == 0 and "none running" in got.stderr
    assert run(w["env"], w["repo"], "search", "retry").returncode == 0
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    pids = started_daemons(w["tmp"])
    ready(w)
    got = run(w["env"], w["repo"], "daemon", "--stop")
    assert got.returncode == 0 and f"stopped pid {pids[0]}" in got.stderr
    assert not started_daemons(w["tmp"]) and not warm.socket_path(w["home"]).exists()
    assert "stopped (terminated)" in log_of(w)
    # --stop starts nothing itself.
    assert not started_daemons(w["tmp"])


def test_a_daemon_that_died_is_not_restarted_by_every_call(world):
    w = world
    log = Path(str(warm.socket_path(w["home"])) + ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("Traceback (most recent call last):\nImportError: a broken install\n")
    for _ in range(2):
        assert run(w["env"], w["repo"], "search", "retry").returncode == 0
        assert not started_daemons(w["tmp"])
    # A minute later it is tried again.
    old = time.time() - warm.RETRY_AFTER_DEATH_S - 5
    os.utime(log, (old, old))
    assert run(w["env"], w["repo"], "search", "retry").returncode == 0
    assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)


def test_the_dsh_worker_starts_one_in_its_idle_time(world, monkeypatch):
    from dsh_recall.frontends.dsh.worker import Worker

    w = world
    monkeypatch.setenv("DSH_RECALL_DAEMON", "0")
    worker = Worker(dsh_home=str(w["tmp"] / "dsh"))
    try:
        worker.hand_off(lambda job: True)
        assert not started_daemons(w["tmp"])  # switched off
        monkeypatch.delenv("DSH_RECALL_DAEMON")
        worker.hand_off(lambda job: True)
        assert soon(lambda: len(started_daemons(w["tmp"])) == 1)
        ready(w)
        worker.hand_off(lambda job: True)  # one runs: none more
        assert soon(lambda: len(started_daemons(w["tmp"])) == 1), log_of(w)
    finally:
        worker.close()

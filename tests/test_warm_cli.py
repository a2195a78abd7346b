"""`dsh-recall daemon`: a CLI search handed to a warm process answers exactly as the CLI
would alone, and the CLI runs alone whenever the daemon cannot stand in for it exactly."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_recall.frontends import daemon as warm

PY = '''\
def retry_request(session, url, attempts=3):
    """Retry an HTTP request with exponential backoff."""
    for n in range(attempts):
        try:
            return session.get(url)
        except OSError:
            sleep(2 ** n)


class TokenBucket:
    """Rate limiting for outgoing calls."""

    def take(self, n=1):
        self.tokens -= n
'''


@pytest.fixture()
def setup(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "net.py").write_text(PY)
    (repo / "pkg" / "other.py").write_text("def unrelated():\n    return 42\n")
    home = tmp_path / "h"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    # Only the daemons these tests start by hand (tests/test_warm_start.py: the ones a call
    # starts by itself).
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake", DSH_RECALL_DAEMON="manual")
    run(env, repo, "index", "--wait", "--json")
    procs: list[subprocess.Popen] = []
    yield repo, home, env, procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def run(env, cwd, *args, extra=None):
    e = dict(env, **(extra or {}))
    return subprocess.run([sys.executable, "-m", "dsh_recall", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=120)


def _ctrl_c_as_a_terminal_gives_it() -> None:
    # A runner started in the background by a script ignores SIGINT, and so would the
    # daemon (it keeps an ignored SIGINT ignored, by design): a person's Ctrl-C is what
    # these tests stand for.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(env, procs, *args) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "dsh_recall", "daemon", *args], env=env,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_as_a_terminal_gives_it)
    procs.append(p)
    line = p.stderr.readline()  # "listening on ..." once bound
    assert "listening on" in line, line
    return p


def sock_of(env) -> Path:
    old = os.environ.get("DSH_RECALL_HOME")
    os.environ["DSH_RECALL_HOME"] = env["DSH_RECALL_HOME"]
    try:
        return warm.socket_path()
    finally:
        if old is None:
            del os.environ["DSH_RECALL_HOME"]
        else:
            os.environ["DSH_RECALL_HOME"] = old


def stop(p: subprocess.Popen) -> str:
    p.send_signal(signal.SIGINT)
    return p.communicate(timeout=30)[1]


def answer(out: str) -> dict:
    data = json.loads(out)
    data.pop("elapsed_ms", None)
    return data


def test_a_handed_over_search_answers_as_the_cli_alone(setup):
    repo, home, env, procs = setup
    d = start(env, procs, "--idle-minutes", "5")
    path = sock_of(env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    queries = [["retry", "with", "backoff", "--json"], ["--json", "--files", "rate", "limiting"],
               ["TokenBucket", "take", "--json", "-n", "1"], ["--json", "--lexical-only", "nothing_here_at_all"]]
    for q in queries:
        via = run(env, repo / "pkg", "search", *q)
        alone = run(env, repo / "pkg", "search", *q, extra={"DSH_RECALL_DAEMON": "0"})
        assert via.returncode == alone.returncode == 0, (via.stderr, alone.stderr)
        assert answer(via.stdout) == answer(alone.stdout)
        assert via.stderr == alone.stderr
    # Human output and a usage error are the same too.
    for q in [["retry", "backoff"], ["--limit", "0", "x"]]:
        via = run(env, repo, "search", *q)
        alone = run(env, repo, "search", *q, extra={"DSH_RECALL_DAEMON": "0"})
        assert via.returncode == alone.returncode
        assert via.stdout == alone.stdout and via.stderr == alone.stderr
    # Calls at once: each gets its own answer (they take turns inside the daemon).
    import concurrent.futures as cf

    q = ["retry", "with", "backoff", "--json"]
    alone = answer(run(env, repo, "search", *q, extra={"DSH_RECALL_DAEMON": "0"}).stdout)
    with cf.ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda _: run(env, repo, "search", *q), range(4)))
    assert all(o.returncode == 0 and answer(o.stdout) == alone for o in outs)
    log = stop(d)
    assert len(queries) + 2 < log.count("served search") <= len(queries) + 6


def test_history_and_notes_searches_are_handed_over_too(setup):
    repo, home, env, procs = setup
    rows = [{"session": "s1", "seq": i, "role": "user" if i % 2 == 0 else "assistant", "id": f"m{i}",
             "workspace": str(repo), "text": t} for i, t in enumerate(
        ["we chose exponential backoff for the retry loop", "agreed: three attempts at most",
         "the token bucket refills every second", "ledger writes go to postgres"])]
    (repo / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run(env, repo, "history", "import", str(repo / "h.jsonl"), "--format", "generic").returncode == 0
    notes = repo / "notes"
    notes.mkdir()
    (notes / "ops.md").write_text("# Deploy\n\nThe deploy key lives in the vault.\n\n"
                                  "# Retry\n\nBack off twice, then page someone.\n")
    assert run(env, repo, "notes", "index", str(notes), "--wait").returncode == 0
    d = start(env, procs, "--idle-minutes", "5")
    calls = [["history", "search", "retry backoff", "--all", "--json"],
             ["history", "search", "tokn bucket", "--all", "--detail"],
             ["history", "search", "retry"],  # no session in scope: the same error either way
             ["notes", "search", "deploy", "key", "--root", str(notes), "--json"],
             ["notes", "search", "page", "someone", "--root", str(notes)]]
    for args in calls:
        via = run(env, repo, *args)
        alone = run(env, repo, *args, extra={"DSH_RECALL_DAEMON": "0"})
        assert via.returncode == alone.returncode, (args, via.stderr, alone.stderr)
        if "--json" in args:
            assert answer(via.stdout) == answer(alone.stdout)
        else:
            assert via.stdout == alone.stdout
        assert via.stderr == alone.stderr
    assert run(env, repo, "history", "show", "s1", "--json").returncode == 0  # not handed over
    log = stop(d)
    assert log.count("served history search") == 3 and log.count("served notes search") == 2
    assert "served history show" not in log and "served history" in log


def test_the_cli_runs_alone_when_the_daemon_cannot_stand_in(setup):
    repo, home, env, procs = setup
    d = start(env, procs, "--idle-minutes", "5")
    # Another setting in the caller's environment: the daemon declines, the answer obeys it.
    got = run(env, repo, "search", "--json", "retry", extra={"DSH_RECALL_LIMIT": "1"})
    assert got.returncode == 0 and len(json.loads(got.stdout)["results"]) == 1
    # A credential an http embedder could read (`api_key_env` names any variable) differs.
    got = run(env, repo, "search", "--json", "retry", extra={"MY_EMBED_API_KEY": "other"})
    assert got.returncode == 0
    # Commands other than search are never handed over.
    assert run(env, repo, "status", "--json").returncode == 0
    log = stop(d)
    assert "served" not in log
    # A daemon killed with -9 leaves its socket behind: the CLI answers alone, and a new
    # daemon takes the socket over.
    d = start(env, procs, "--idle-minutes", "5")
    d.kill()
    d.wait()
    assert sock_of(env).exists()
    got = run(env, repo, "search", "--json", "retry")
    assert got.returncode == 0 and json.loads(got.stdout)["results"]
    d = start(env, procs, "--idle-minutes", "5")
    assert run(env, repo, "search", "--json", "retry").returncode == 0
    assert "served search" in stop(d)
    assert not sock_of(env).exists()


def test_a_second_daemon_refuses_and_an_idle_one_exits(setup):
    repo, home, env, procs = setup
    d = start(env, procs, "--idle-minutes", "5")
    second = run(env, repo, "daemon")
    assert second.returncode == 1 and "already listens" in second.stderr
    # SIGTERM (a service manager, `kill`) stops it as Ctrl-C does: socket gone, exit 0.
    assert sock_of(env).exists()
    d.send_signal(signal.SIGTERM)
    assert "stopped (terminated)" in d.communicate(timeout=30)[1] and d.returncode == 0
    assert not sock_of(env).exists()
    d = start(env, procs, "--idle-minutes", "0.02")
    assert d.wait(timeout=30) == 0  # idle for 1.2 s: gone by itself
    assert "stopped (idle)" in d.stderr.read()
    assert not sock_of(env).exists()


def test_a_daemon_declines_once_its_code_changed_and_checks_the_caller(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "h"))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(warm, "_PACKAGE", pkg)
    d = warm.Daemon(60.0)
    before = warm.code_stamp()
    (pkg / "a.py").write_text("x = 22\n")
    assert warm.code_stamp() != before

    def ask(request: dict) -> tuple[dict, str | None]:
        a, b = socket.socketpair()
        with a, b:
            a.sendall((json.dumps(request) + "\n").encode())
            d.pending.admit(b, os.getpid(), b)  # as serve() does on accept
            stop = d._handle(b)
            return json.loads(a.recv(65536)), stop

    good = {"v": warm.PROTOCOL, "argv": ["search", "x"], "cwd": str(tmp_path), "env": warm.env_key()}
    assert ask({**good, "env": "other"})[0] == {"ok": False, "why": "environment differs"}
    assert ask({**good, "argv": "search x"})[0]["why"] == "malformed"
    assert ask({**good, "v": 99})[0]["why"] == "protocol"
    reply, why = ask(good)
    assert reply == {"ok": False, "why": "code changed"} and why == "code changed"
    d.stamp = warm.code_stamp()
    assert ask({**good, "argv": ["index", "."]})[0]["why"] == "not forwarded"
    # A search still running holds the turn: the next call is declined after a short wait.
    monkeypatch.setattr(warm, "BUSY_WAIT_S", 0.05)
    with d._turn:
        assert ask(good)[0] == {"ok": False, "why": "busy"}


def test_a_stopped_daemon_or_a_call_it_cannot_serve_exactly_leaves_the_cli_alone(setup):
    repo, home, env, procs = setup
    d = start(env, procs, "--idle-minutes", "5")
    q = ["retry", "backoff", "--json"]
    alone = answer(run(env, repo, "search", *q, extra={"DSH_RECALL_DAEMON": "0"}).stdout)
    # Setting DSH_RECALL_DAEMON to anything but 0 does not stop a hand-over.
    assert answer(run(env, repo, "search", *q, extra={"DSH_RECALL_DAEMON": "1"}).stdout) == alone
    assert "served search" in d.stderr.readline()
    # Output that is not UTF-8, and help (wrapped to the caller's terminal), stay local.
    asc = run(env, repo, "search", "retry", "backoff", extra={"PYTHONIOENCODING": "ascii"})
    assert asc.returncode == 0 and "retry_request" in asc.stdout
    assert "Usage:" in run(env, repo, "search", "--help", extra={"COLUMNS": "50"}).stdout
    # A stopped daemon (Ctrl-Z in its terminal) still accepts connections; it answers no
    # heartbeat, so the CLI gives up on it within seconds and answers alone.
    d.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        got = run(env, repo, "search", *q)
        assert got.returncode == 0 and answer(got.stdout) == alone
        assert time.monotonic() - t0 < warm.SILENCE_S + 60
    finally:
        d.send_signal(signal.SIGCONT)
    # Served after the first: at most the abandoned call (after SIGCONT), never the ascii or
    # help calls.
    assert stop(d).count("served search") <= 1


def test_a_caller_confined_otherwise_than_the_daemon_is_refused():
    import shutil

    plain = subprocess.Popen(["sleep", "30"])
    try:
        assert warm.same_confinement(plain.pid)
    finally:
        plain.kill()
        plain.wait()
    assert not warm.same_confinement(2 ** 22 + 12345)  # no such process: refused
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is not installed (apt-get install -y util-linux)")
    boxed = subprocess.Popen(["setpriv", "--no-new-privs", "sleep", "30"])
    try:
        time.sleep(0.5)  # setpriv has exec'd sleep with the flag set
        assert not warm.same_confinement(boxed.pid)
    finally:
        boxed.kill()
        boxed.wait()


def test_both_streams_on_one_file_interleave_as_the_cli_alone_writes_them(setup):
    repo, home, env, procs = setup
    # A setting the repository may not make: the CLI notes it on stderr before its answer.
    (repo / ".dsh-recall.toml").write_text('[mcp]\nhost = "0.0.0.0"\n')
    d = start(env, procs, "--idle-minutes", "5")

    def merged(extra):
        return subprocess.run([sys.executable, "-m", "dsh_recall", "search", "retry", "backoff"],
                              cwd=repo, env=dict(env, **extra), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120).stdout

    alone = merged({"DSH_RECALL_DAEMON": "0"})
    via = merged({})
    assert "mcp.host" in alone and alone.index("mcp.host") < alone.index("retry_request")
    assert via == alone
    assert "served search" in stop(d)


def test_the_socket_path_is_held_by_one_daemon_for_its_life(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "h"))
    first = warm.Daemon(60.0)
    sock = first.bind()
    try:
        # Even with no socket file to probe (removed by hand, or not bound yet), a second
        # daemon cannot take the path while the first lives.
        first.path.unlink()
        with pytest.raises(OSError, match="already listens"):
            warm.Daemon(60.0).bind()
    finally:
        sock.close()
        os.close(first._lock_fd)
    second = warm.Daemon(60.0)
    second.bind().close()  # the first is gone: the path is free
    os.close(second._lock_fd)


def test_a_handed_over_call_imports_no_more_than_the_client(setup):
    # The client speaks JSON through CPython's C codec and connects through `_socket`:
    # `json`, `re`, `socket` (with `enum` and `selectors`) would cost a handed-over call
    # about 20 ms, more than the daemon's own search.
    repo, home, env, procs = setup
    d = start(env, procs, "--idle-minutes", "5")
    # As the installed `dsh-recall` script runs it (`-m` would add runpy's own imports).
    script = "import sys; from dsh_recall.frontends.entry import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", script, "search", "retry", "--json"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert answer(proc.stdout)
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    heavy = sorted(names & {"json", "re", "socket", "selectors", "enum", "typing", "warnings",
                            "importlib", "pathlib", "click", "numpy", "hashlib"})
    assert not heavy, heavy
    own = sorted(n for n in names if n.startswith("dsh_recall"))
    assert own and set(own) <= {"dsh_recall", "dsh_recall.frontends",
                                "dsh_recall.frontends.entry", "dsh_recall.frontends.warm",
                                "dsh_recall.frontends.argv", "dsh_recall.frontends.hooks"}, own
    assert "served search" in stop(d)


@pytest.mark.parametrize("value", [
    {"v": 1, "argv": ["search", "caf\u00e9 \"q\"", "\udcff lone", "\\ back"], "env": "ab", "cwd": "/x",
     "stdin": None, "flag": True, "off": False, "n": -3},
    [[1, "line\n\t"], [2, ""]], "plain", 0, None,
])
def test_the_clients_json_is_the_json_modules(value):
    from dsh_recall.frontends import warm as client

    assert client.dumps(value) == json.dumps(value)
    text = json.dumps(value)
    assert client.loads(text) == json.loads(text)
    assert client.loads("  " + text + "\n") == json.loads(text)


@pytest.mark.parametrize("bad", ["", "{", "{}x", "[1,]", "NaN", "Infinity", '{"a" 1}', "tru"])
def test_the_client_refuses_what_is_not_one_json_value(bad):
    from dsh_recall.frontends import warm as client

    with pytest.raises(ValueError):
        client.loads(bad)

"""Code recall end to end on small real trees: index, search, incremental, bad input."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.services import hybrid
from dsh_recall.services.code import CodeService

PY_AUTH = '''\
"""Authentication helpers."""
import hashlib


def hash_password(password: str, salt: str) -> str:
    """Hash a password with a salt."""
    return hashlib.sha256((salt + password).encode()).hexdigest()


class SessionManager:
    """Keeps login sessions alive."""

    def refresh_token(self, token):
        return token + "-refreshed"
'''

PY_OCC = '''\
class OccupancyStateMachine:
    """Decides whether a room is occupied from motion events."""

    def on_motion(self, event):
        self.state = "occupied"

    def on_timeout(self):
        self.state = "vacant"
'''

JS_UTIL = '''\
export function parseHttpResponse(body) {
  return JSON.parse(body);
}
'''


def make_repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "auth.py").write_text(PY_AUTH)
    (root / "pkg" / "occupancy.py").write_text(PY_OCC)
    (root / "web").mkdir()
    (root / "web" / "util.js").write_text(JS_UTIL)
    (root / "README.md").write_text("# Demo\n\nA demo project about rooms.\n")
    return root


def fake_cfg(ws: Path, **over):
    return load_config(workspace=ws, overrides={"embedder": {"name": "fake"}, **over})


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo")


def test_search_finds_declaration_with_bounded_excerpt(repo):
    svc = CodeService(repo, fake_cfg(repo))
    svc.index()
    out = svc.search("occupancy state machine", limit=3)
    assert out["results"], out
    top = out["results"][0]
    assert top["path"] == "pkg/occupancy.py"
    assert "OccupancyStateMachine" in top["symbols"] or any("Occupancy" in s for s in top["symbols"])
    assert top["end_line"] - top["start_line"] + 1 <= 40
    assert top["stale"] is False
    assert set(out["layers"]) == {"lexical", "vector"}
    assert out["pending"] == 0
    assert out["source_chars"] >= out["returned_chars"] > 0


def test_camel_and_snake_parts_match(repo):
    svc = CodeService(repo, fake_cfg(repo))
    svc.index()
    out = svc.search("http response", limit=2, layers=("lexical",))
    assert out["results"][0]["path"] == "web/util.js"
    out = svc.search("refresh token", limit=2, layers=("lexical",))
    assert out["results"][0]["path"] == "pkg/auth.py"


@pytest.mark.parametrize("query", ['"foo AND (bar OR', "", "   ", "NEAR(a b)", "*", "x" * 100_000,
                                   "col:val ^start", "')); DROP TABLE files; --"])
def test_any_query_text_is_valid(repo, query):
    svc = CodeService(repo, fake_cfg(repo))
    svc.index()
    out = svc.search(query)
    assert isinstance(out["results"], list)


def test_excerpt_capped_and_configurable(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    body = "\n".join(f"    x{i} = compute_value({i})" for i in range(300))
    (ws / "big.py").write_text(f"def giant():\n{body}\n    return special_marker_value\n")
    svc = CodeService(ws, fake_cfg(ws, excerpt_lines=12))
    svc.index()
    out = svc.search("special_marker_value", layers=("lexical",))
    top = out["results"][0]
    assert top["end_line"] - top["start_line"] + 1 <= 12
    assert "special_marker_value" in top["excerpt"]
    lines = (ws / "big.py").read_text().split("\n")
    assert "\n".join(lines[top["start_line"] - 1: top["end_line"]]) == top["excerpt"]


def test_incremental_and_deletion(repo):
    cfg = fake_cfg(repo)
    svc = CodeService(repo, cfg)
    first = svc.index()
    assert first.indexed == 4
    emb = svc.embedder()
    calls = emb.calls
    again = svc.index()
    assert again.indexed == 0 and again.unchanged == 4 and emb.calls == calls
    (repo / "pkg" / "auth.py").write_text(PY_AUTH + "\ndef rotate_keys():\n    pass\n")
    os.utime(repo / "web" / "util.js")  # touched, same content: not re-read into the index
    third = svc.index()
    assert third.indexed == 1 and third.unchanged == 3
    assert 0 < emb.calls - calls <= 3
    (repo / "web" / "util.js").unlink()
    fourth = svc.index()
    assert fourth.deleted == 1
    assert not svc.search("parseHttpResponse", layers=("lexical",))["results"]


def test_stale_flag(repo):
    svc = CodeService(repo, fake_cfg(repo))
    svc.index()
    (repo / "pkg" / "occupancy.py").write_text(PY_OCC + "\n# edited\n")
    out = svc.search("OccupancyStateMachine", layers=("lexical",))
    assert out["results"][0]["stale"] is True


def test_bad_files_are_skipped_not_fatal(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "blob.dat").write_bytes(b"\x00\x01\x02binary" * 100)
    (ws / "huge.txt").write_bytes(b"needle line\n" * (50 * 1024 * 1024 // 12))
    (ws / "bad.py").write_bytes(b"def broken_utf8():\n    return '\xff\xfe caf\xe9'\n")
    (ws / "bundle.js").write_text("var a=1;" * 10000)
    (ws / "gen.py").write_text("# Code generated by protoc. DO NOT EDIT.\nx = 1\n")
    (ws / "long.js").write_text("x" * 30000 + "\n")
    os.symlink(ws, ws / "loop")
    (ws / "ok.py").write_text("def fine():\n    return 1\n")
    svc = CodeService(ws, fake_cfg(ws))
    rep = svc.index()
    paths = set(svc.store.files())
    assert paths == {"bad.py", "ok.py"}
    assert rep.skipped["binary"] >= 1 and rep.skipped["too-large"] >= 1
    assert rep.skipped["generated"] >= 1 and rep.skipped["symlink"] >= 1
    assert rep.skipped.get("minified", 0) + rep.skipped.get("skip-list", 0) >= 2
    out = svc.search("broken_utf8", layers=("lexical",))
    assert out["results"][0]["path"] == "bad.py"


def test_gitignore_and_skip_list(tmp_path):
    ws = tmp_path / "ws"
    (ws / "node_modules" / "lib").mkdir(parents=True)
    (ws / "node_modules" / "lib" / "index.js").write_text("function hidden() {}\n")
    (ws / "logs").mkdir()
    (ws / "logs" / "a.py").write_text("x = 1\n")
    (ws / ".gitignore").write_text("logs/\n")
    (ws / "main.py").write_text("print('hi')\n")
    svc = CodeService(ws, fake_cfg(ws))
    svc.index()
    assert set(svc.store.files()) == {".gitignore", "main.py"}


def test_source_roots_labels_and_bad_entries(tmp_path):
    ws = make_repo(tmp_path / "ws")
    sdk = tmp_path / "ws" / "node_modules" / "sdk"
    sdk.mkdir(parents=True)
    (sdk / "client.js").write_text("export function connectToBroker() { return 1 }\n")
    (sdk / "node_modules" / "dep").mkdir(parents=True)
    (sdk / "node_modules" / "dep" / "x.js").write_text("function nested() {}\n")
    (tmp_path / "afile").write_text("x")
    cfg = fake_cfg(ws, source_roots=["sdk=node_modules/sdk", str(tmp_path / "missing"),
                                     str(tmp_path / "afile"), "sdk=node_modules/sdk"])
    svc = CodeService(ws, cfg)
    svc.index()
    out = svc.search("connectToBroker", layers=("lexical",))
    top = out["results"][0]
    assert top["path"] == "sdk/client.js"
    assert top["source_path"] == str((sdk / "client.js").resolve())
    assert not any(p.startswith("sdk/node_modules") for p in svc.store.files())
    st = svc.status(probe=False)
    assert len(st["problems"]) == 3
    assert any("does not exist" in p for p in out["notes"])


def test_focus_scopes(tmp_path):
    ws = tmp_path / "mono"
    for name, fn in (("alpha", "alpha_handler"), ("beta", "beta_handler")):
        (ws / name).mkdir(parents=True)
        (ws / name / "pyproject.toml").write_text("[project]\n")
        (ws / name / "main.py").write_text(f"def {fn}():\n    return 'handled'\n")
    svc = CodeService(ws, fake_cfg(ws))
    svc.index()
    assert svc.status(probe=False)["scopes"] == ["alpha", "beta"]
    out = svc.search("handler handled", cwd=ws / "beta", layers=("lexical",))
    assert {r["path"] for r in out["results"]} == {"beta/main.py"}
    assert out["scope"] == "beta"
    out = svc.search("alpha_handler", focus=str(ws / "beta"), layers=("lexical",))
    assert any("weak match" in n for n in out["notes"])
    out = svc.search("handled", layers=("lexical",))
    assert len({r["path"] for r in out["results"]}) == 2


def test_files_mode_distinct(repo):
    svc = CodeService(repo, fake_cfg(repo))
    svc.index()
    out = svc.search("password session token state", files=True, limit=10)
    paths = [r["path"] for r in out["results"]]
    assert len(paths) == len(set(paths))


def test_cold_start_first_search_builds_index(repo):
    svc = CodeService(repo, fake_cfg(repo))
    out = svc.search("hash_password")
    assert out["results"][0]["path"] == "pkg/auth.py"
    assert out["pending"] == 0  # the fake embedder fits the budget easily


def test_cold_start_reports_pending_when_budget_is_zero(repo):
    svc = CodeService(repo, fake_cfg(repo, embed_budget_s=0))
    out = svc.search("hash_password")
    assert out["results"] and out["pending"] == svc.store.chunk_count() > 0


def test_fingerprint_change_discards_vectors(repo):
    svc = CodeService(repo, fake_cfg(repo))
    svc.index()
    assert svc.store.vector_count() > 0
    svc2 = CodeService(repo, load_config(workspace=repo, overrides={"embedder": {"name": "fake", "dim": 32}}))
    rep = svc2.index(embed=False)
    assert any("embedder changed" in n for n in rep.notes)
    assert svc2.store.vector_count() == 0
    svc2.index()
    ids, mat = svc2.store.vector_matrix()
    assert mat.shape[1] == 32


class _Wedged:
    """A socket that accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.conns = []
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                pass


def test_wedged_endpoint_lexical_answers_within_deadline(repo):
    w = _Wedged()
    try:
        cfg = load_config(workspace=repo, overrides={
            "embedder": {"name": "http", "url": w.url, "model": "nomic", "timeout_s": 3},
            "search_deadline_s": 1.0})
        svc = CodeService(repo, cfg)
        svc.index_lexical()
        out = svc.search("hash_password")
        assert out["layers"] == ["lexical"]
        assert out["results"][0]["path"] == "pkg/auth.py"
        assert any("deadline" in n or "failed" in n for n in out["notes"])
        st = svc.status()
        assert st["embedder"]["endpoint_ok"] is False
    finally:
        w.stop = True


def test_cli_search_json_contract(repo, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    runner = CliRunner()
    res = runner.invoke(cli, ["index", str(repo), "--wait", "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["search", "occupancy", "--workspace", str(repo), "--json", "--explain"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert {"results", "pending", "layers", "returned_chars", "source_chars"} <= set(data)
    r = data["results"][0]
    assert {"path", "source_path", "start_line", "end_line", "score", "symbols", "excerpt", "stale"} <= set(r)
    assert "lexical" in r["ranks"]
    res = runner.invoke(cli, ["search", "nothing-matches-zzqx", "--workspace", str(repo), "--json",
                              "--lexical-only"])
    assert res.exit_code == 0 and json.loads(res.output)["results"] == []
    res = runner.invoke(cli, ["status", "--workspace", str(repo), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["files"] == 4


def test_unknown_config_key_is_a_clear_error(repo, monkeypatch):
    (repo / ".dsh-recall.toml").write_text("excerpt_lines = 20\nbogus_key = 1\n")
    res = CliRunner().invoke(cli, ["search", "x", "--workspace", str(repo)])
    assert res.exit_code == 1
    assert "bogus_key" in res.output and "excerpt_lines" in res.output


def test_layer_weights_follow_query_shape():
    from dsh_recall.rank.fuse import layer_weights
    from dsh_recall.rank.query import Query

    plain = layer_weights(Query.parse("python check if a variable is iterable"), 1.0, 1.0)
    assert plain["lexical"] < plain["vector"]
    for q in ("gitignore handling", "parse_http_response fails", "Session.resolve_redirects copies",
              " ".join(["word"] * 40)):
        assert layer_weights(Query.parse(q), 1.0, 1.0) == {"lexical": 1.0, "vector": 1.0}


def test_implementation_ranks_above_docs_and_tests_unless_asked(tmp_path):
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "app").mkdir()
    (ws / "docs" / "blueprints.rst").write_text(
        "Blueprints\n==========\n\nHow blueprints are registered on the app: register_blueprint.\n")
    (ws / "tests" / "test_blueprints.py").write_text(
        "def test_register_blueprint():\n    app.register_blueprint(bp)  # blueprints registered\n")
    (ws / "app" / "blueprints.py").write_text(
        "def register_blueprint(app, bp):\n    \"\"\"Blueprints are registered on the app here.\"\"\"\n"
        "    app.blueprints[bp.name] = bp\n")
    svc = CodeService(ws, fake_cfg(ws))
    svc.index()
    top = svc.search("how are blueprints registered on the app", files=True)["results"]
    assert top[0]["path"] == "app/blueprints.py"
    asked = svc.search("docs: how are blueprints registered", files=True, layers=("lexical",))["results"]
    assert asked[0]["path"] == "docs/blueprints.rst"
    tests = svc.search("tests for register_blueprint", files=True, layers=("lexical",))["results"]
    assert tests[0]["path"] == "tests/test_blueprints.py"


def test_search_from_a_subdirectory_uses_the_enclosing_workspace(tmp_path, monkeypatch):
    ws = tmp_path / "mono"
    (ws / ".git").mkdir(parents=True)
    for name in ("alpha", "beta"):
        (ws / name).mkdir()
        (ws / name / "package.json").write_text("{}")
        (ws / name / "main.js").write_text(f"function {name}Handler() {{ return 'handled' }}\n")
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    monkeypatch.chdir(ws / "beta")
    res = CliRunner().invoke(cli, ["search", "handled", "--json", "--lexical-only"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["scope"] == "beta"
    assert [r["path"] for r in data["results"]] == ["beta/main.js"]
    res = CliRunner().invoke(cli, ["status", "--json"])
    assert json.loads(res.output)["workspace"] == str(ws.resolve())


def test_public_python_api(repo):
    import dsh_recall

    svc = dsh_recall.CodeService(repo, dsh_recall.load_config(
        workspace=repo, overrides={"embedder": {"name": "fake"}}))
    assert svc.search("OccupancyStateMachine")["results"][0]["path"] == "pkg/occupancy.py"
    assert callable(dsh_recall.history.search)


def test_a_chunk_declaring_the_named_symbol_ranks_first(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    body = "\n".join(f"        value_{i} = compute(value_{i - 1}, other_{i})" for i in range(1, 30))
    (ws / "session.py").write_text(
        f"class SessionManager:\n    def refresh_token(self, token):\n{body}\n        return token\n")
    calls = "\n".join(f"    manager.refresh_token(token_{i})  # SessionManager refresh_token" for i in range(12))
    (ws / "client.py").write_text(f"def rotate_all(manager):\n{calls}\n")
    for boost, first in ((1.0, "client.py"), (1.5, "session.py")):
        svc = CodeService(ws, fake_cfg(ws, symbol_boost=boost))
        svc.index()
        out = svc.search("SessionManager.refresh_token", layers=("lexical",))
        assert out["results"][0]["path"] == first, boost


def test_files_skipped_after_reading_are_not_read_again_until_they_change(repo, monkeypatch):
    """A generated or minified file keeps no row; the index remembers its size and mtime,
    so the next run neither reads it again nor counts it as a change."""
    from dsh_recall.services.code import prepare as code_prepare

    (repo / "gen.py").write_text("# @generated by a tool\nx = 1\n")
    (repo / "bundle.js").write_text("var a=1;" * 5000)
    read: list[str] = []
    real = code_prepare.prepare_many

    def spy(jobs, *a, **k):
        jobs = list(jobs)
        read.extend(sf.path for sf, _ in jobs)
        return real(jobs, *a, **k)

    monkeypatch.setattr(code_prepare, "prepare_many", spy)
    svc = CodeService(repo, fake_cfg(repo))
    first = svc.index_lexical()
    assert {"gen.py", "bundle.js"} <= set(read)
    assert first.skipped.get("generated") == 1 and first.skipped.get("minified") == 1
    read.clear()
    again = svc.index_lexical()
    assert read == [] and again.skipped == first.skipped and again.indexed == 0
    (repo / "gen.py").write_text("x = 2\n")  # no longer generated: read and indexed
    os.utime(repo / "gen.py", ns=(1, 1))
    third = svc.index_lexical()
    assert read == ["gen.py"] and third.indexed == 1 and "generated" not in third.skipped
    # Another size cap is another decision: everything is read again.
    read.clear()
    svc2 = CodeService(repo, fake_cfg(repo, max_file_bytes=2_000_000))
    svc2.index_lexical()
    assert "bundle.js" in read
    svc.close()
    svc2.close()


def test_a_large_index_run_warms_common_term_lists_and_a_small_one_does_not(tmp_path, monkeypatch):
    from dsh_recall.services.code import indexing
    from dsh_recall.services.code import prepare as code_prepare
    from dsh_recall.stores.sqlite import chunks as sq

    monkeypatch.setattr(indexing, "WARM_SHARE", 100.0)  # a tiny run's tenth is a few ms
    monkeypatch.setattr(code_prepare, "PARALLEL_MIN_FILES", 10)
    monkeypatch.setattr(sq, "IMPACT_SYNC_ROWS", 5)
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    for i in range(30):
        (repo / "pkg" / f"m{i:02d}.py").write_text(
            f"def handler_{i}(request):\n    return dispatch(request, {i})\n")
    cfg = load_config(workspace=repo, overrides={"embedder": {"name": "fake"}, "index_workers": 1})
    svc = CodeService(repo, cfg, tmp_path / "home")
    rep = svc.index(embed=False)
    assert rep.indexed == 30 and rep.lists > 0
    stats = svc.store._term_stats(["dispatch", "request"])
    found, _, _ = svc.store.impacts.lookup(stats, svc.store._averages()[1])
    assert set(found) == {"dispatch", "request"}
    (repo / "pkg" / "m00.py").write_text("def handler_0(request):\n    return dispatch(request)\n")
    assert svc.index(embed=False).lists == 0  # one file: queries patch what they need
    assert svc.search("dispatch request")["results"]


def _backlog_repo(tmp_path: Path, n: int = 60) -> tuple[Path, object]:
    repo = tmp_path / "backlog"
    (repo / "pkg").mkdir(parents=True)
    for i in range(n):
        (repo / "pkg" / f"m{i:03d}.py").write_text(
            f"def handler_{i}(request):\n    \"\"\"Retry request {i} with backoff.\"\"\"\n    return {i}\n")
    cfg = load_config(workspace=repo, overrides={"embedder": {"name": "fake"}})
    return repo, cfg


def _slow_backlog(repo: Path, cfg) -> None:
    """Index without vectors, with a remembered rate (10 a second) the 60 chunks exceed."""
    svc = CodeService(repo, cfg)
    svc.index(embed=False)
    svc.store.set_meta("embed_rate", f"{svc.embedder().fingerprint}|10.0")
    svc.close()


def test_a_search_leaves_a_vector_backlog_it_cannot_embed_in_its_budget(tmp_path):
    # At the rate this embedder last reached here, 60 chunks take 6 s: more than a search's
    # budget. The search answers by words at once and says how to catch up; it used to
    # spend its whole budget on every call while the backlog stayed.
    repo, cfg = _backlog_repo(tmp_path)
    svc = CodeService(repo, cfg, tmp_path / "home")
    svc.index(embed=False)
    fp = svc.embedder().fingerprint
    svc.store.set_meta("embed_rate", f"{fp}|10.0")
    out = svc.search("retry request with backoff")
    # It embeds only the lexical layer's best candidates, so its vector layer votes on what
    # it compared (services/hybrid.Head), not on the backlog.
    left = 60 - hybrid.HEAD
    assert out["results"] and out["pending"] == left and svc.store.chunk_count() == 60
    assert any(f"{left} chunks wait for vectors" in n and "dsh-recall index" in n
               for n in out["notes"])
    assert any(n.startswith("vectors pending: the vector layer compared") for n in out["notes"])
    # ...and says it in structured form, for a front end that fills it.
    assert out["backlog"] == [{"source": "code", "what": "vectors", "pending": left,
                               "command": "dsh-recall index", "job": "code.embed",
                               "hint": "`dsh-recall index` embeds them"}]
    assert any(n.endswith(out["backlog"][0]["hint"]) for n in out["notes"])
    # A lexical-only search asked nothing of the vectors: no note, no backlog.
    lexical = svc.search("retry request with backoff", layers=("lexical",))
    assert "backlog" not in lexical and not any("wait for vectors" in n for n in lexical["notes"])
    # A backlog that fits the budget at the known rate: the search embeds it.
    svc.store.set_meta("embed_rate", f"{fp}|1000.0")
    out = svc.search("retry request with backoff")
    assert out["pending"] == 0 and not any("wait for vectors" in n for n in out["notes"])
    assert "backlog" not in out
    svc.close()


def test_the_mcp_server_indexes_a_vector_backlog_in_the_background(tmp_path):
    from dsh_recall.frontends.mcp.handlers import RecallApp

    repo, cfg = _backlog_repo(tmp_path)
    _slow_backlog(repo, cfg)
    app = RecallApp(repo, cfg)
    try:
        out, _ = app.call("code_search", {"query": "retry request with backoff"})
        assert any("this server is indexing them in the background" in n for n in out["notes"])
        app.background.wait("code.embed", repo.resolve(), 60)
        assert app.background.snapshot("code.embed", repo.resolve())["state"] == "done"
        out, _ = app.call("code_search", {"query": "retry request with backoff"})
        assert out["pending"] == 0 and not any("wait for vectors" in n for n in out["notes"])
    finally:
        app.close()


def test_the_mcp_server_does_not_rerun_a_failed_index_job_on_every_search(tmp_path):
    from dsh_recall.frontends.mcp.handlers import RecallApp

    repo, cfg = _backlog_repo(tmp_path)
    _slow_backlog(repo, cfg)
    app = RecallApp(repo, cfg)
    try:
        jobs, ws = app.background, repo.resolve()
        jobs._slot("code.embed", ws).info = {"state": "failed", "finished": 0,
                                             "error": "the embedder went away"}
        out, _ = app.call("code_search", {"query": "retry request with backoff"})
        assert not jobs.running("code.embed", ws) and jobs.snapshot("code.embed", ws)["state"] == "failed"
        assert any("dsh-recall index" in n for n in out["notes"])  # the way to catch up
    finally:
        app.close()


def test_a_cold_search_while_another_indexer_runs_says_which_files_wait(tmp_path):
    repo, _ = _backlog_repo(tmp_path, 5)
    cfg = load_config(workspace=repo, overrides={"embedder": {"name": "fake"},
                                                 "search_deadline_s": 0.3})
    svc = CodeService(repo, cfg, tmp_path / "home")
    svc.record_job({"state": "running", "pid": os.getpid(), "phase": "scan", "total": 5, "done": 2})
    with svc._index_lock(None):  # another open file: to flock, another indexer
        out = svc.search("retry request with backoff")
    assert out["results"] == []
    assert any("another process is indexing" in n for n in out["notes"])
    assert out["backlog"] == [{"source": "code", "what": "files", "pending": 3,
                               "command": "dsh-recall index", "job": "code.embed"}]
    svc.close()

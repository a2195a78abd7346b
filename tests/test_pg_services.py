"""Code, notes and history recall with `store` set to PostgreSQL: the same answers as on
the embedded SQLite store, and access channels kept (tests/pg_fixture.py starts the server)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.services import history as hsvc
from dsh_recall.services.code import CodeService
from dsh_recall.services.notes import NotesService
from dsh_recall.stores.sqlite.history import HistoryStore
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)

FILES = {
    "pkg/auth.py": 'import hashlib\n\n\ndef hash_password(password, salt):\n    """Hash a password."""\n'
                   "    return hashlib.sha256((salt + password).encode()).hexdigest()\n\n\n"
                   "class SessionManager:\n    def refresh_token(self, token):\n        return token\n",
    "pkg/occupancy.py": "class OccupancyStateMachine:\n    def on_motion(self, event):\n"
                        "        self.state = 'occupied'\n\n    def on_timeout(self):\n"
                        "        self.state = 'vacant'\n",
    "web/util.js": "export function parseHttpResponse(body) {\n  return JSON.parse(body);\n}\n",
    "README.md": "# Demo\n\nA demo project about rooms and motion sensors.\n",
    "tests/test_auth.py": "from pkg.auth import hash_password\n\n\ndef test_hash():\n"
                          "    assert hash_password('a', 'b')\n",
}
QUERIES = ["occupancy state machine", "hash password", "parseHttpResponse", "refresh token",
           "rooms motion", "where is the state set to vacant"]


def make_repo(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def cfg_for(ws: Path | None, store: str | None):
    over = {"embedder": {"name": "fake"}}
    if store:
        over["store"] = store
    return load_config(workspace=ws, overrides=over)


def answers(svc, **kw):
    return [[(r["path"], r["start_line"], r["end_line"], r["score"]) for r in svc.search(q, **kw)["results"]]
            for q in QUERIES]


def test_code_recall_on_postgres_answers_as_on_sqlite(tmp_path, pg_url):
    repo = make_repo(tmp_path / "repo")
    lite = CodeService(repo, cfg_for(repo, None), home=tmp_path / "home-lite")
    pg = CodeService(repo, cfg_for(repo, pg_url), home=tmp_path / "home-pg")
    try:
        assert pg.store.path.startswith("postgresql://") and not (pg.dir / "index.sqlite").exists()
        for svc in (lite, pg):
            rep = svc.index()
            assert rep.files == len(FILES) and rep.pending == 0
        assert answers(pg, layers=("lexical",)) == answers(lite, layers=("lexical",))
        assert answers(pg) == answers(lite)
        assert answers(pg, path="pkg") == answers(lite, path="pkg")
        st = pg.status(probe=False)
        assert st["files"] == len(FILES) and st["vectors"] == st["chunks"] and st["index_bytes"] > 0
        # Incremental: an edited file is re-chunked, a deleted one forgotten.
        (repo / "pkg" / "occupancy.py").write_text("class Thermostat:\n    def heat(self):\n        pass\n")
        (repo / "web" / "util.js").unlink()
        for svc in (lite, pg):
            rep = svc.index()
            assert (rep.indexed, rep.deleted) == (1, 1)
        assert pg.search("thermostat heat")["results"][0]["path"] == "pkg/occupancy.py"
        assert pg.search("parseHttpResponse", layers=("lexical",))["results"] == []
        assert answers(pg) == answers(lite)
    finally:
        lite.close()
        pg.close()


def test_code_index_reopens_on_postgres(tmp_path, pg_url):
    repo = make_repo(tmp_path / "repo")
    svc = CodeService(repo, cfg_for(repo, pg_url), home=tmp_path / "home")
    svc.index()
    first = answers(svc)
    svc.close()
    again = CodeService(repo, cfg_for(repo, pg_url), home=tmp_path / "home")
    try:
        assert again.index().indexed == 0
        assert answers(again) == first
    finally:
        again.close()


NOTES = {"deploy.md": "# Deploy\n\nThe deploy key lives in the vault under ops/deploy.\n",
         "people.md": "# People\n\n- Ana runs the release train on Thursdays.\n",
         "secret.private.md": "# Secret\n\nThe staging password rotates monthly.\n"}


def test_notes_on_postgres_answer_as_on_sqlite_and_keep_levels(tmp_path, pg_url):
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text)
    res = {}
    for name, store in (("lite", None), ("pg", pg_url)):
        svc = NotesService(cfg_for(None, store), roots=[root], home=tmp_path / f"home-{name}")
        try:
            svc.index()
            res[name] = [[(r["path"], r["start_line"], r["score"], r["level"]) for r in
                          svc.search(q)["results"]] for q in ("deploy key", "release train", "password")]
            levels = svc.levels()
        finally:
            svc.close()
        assert levels["secret.private.md"] != "public"
    assert res["pg"] == res["lite"]


def _rows():
    return [
        {"session": "a", "seq": 0, "role": "user", "text": "We decided to use PostgreSQL for the ledger service",
         "id": "m0", "workspace": "/p1", "title": "db choice"},
        {"session": "a", "seq": 1, "role": "assistant", "text": "Agreed, the connection pool size stays at 20", "id": "m1"},
        {"session": "a", "seq": 2, "role": "user", "text": "数据库迁移要在周五完成", "id": "m2"},
        {"session": "b", "seq": 0, "role": "user", "text": "Kubernetes ingress needs a longer timeout for running jobs",
         "id": "n0", "workspace": "/p2"},
        {"session": "b", "seq": 1, "role": "assistant", "text": "The ledger migration runs after the ingress change",
         "id": "n1"},
    ]


def _import(tmp_path, store, cfg, rows, name="h.jsonl", channel=None):
    f = tmp_path / name
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return hsvc.import_paths([str(f)], fmt="generic", cfg=cfg, store=store, embed=True, channel=channel)


def _hits(ans):
    return [(h["session"], h["start_seq"], h["end_seq"], h["score"]) for h in ans["hits"]]


def test_history_on_postgres_answers_as_on_sqlite(tmp_path, pg_url, pg_namespace):
    from dsh_recall.stores.postgres.history import PgHistoryStore

    cfg = cfg_for(None, None)
    lite = HistoryStore(tmp_path / "h.sqlite")
    pg = PgHistoryStore(pg_url, pg_namespace)
    try:
        for store in (lite, pg):
            rep = _import(tmp_path, store, cfg, _rows())
            assert rep["blocks"] == 5
            assert _import(tmp_path, store, cfg, _rows())["blocks"] == 0  # nothing twice
        assert pg.stats() == lite.stats()
        for q, layers in (("ledger", ["literal"]), ("ledgers decided", ["literal"]),
                          ("Postgrsql ledgr", ["fuzzy"]), ("迁移", ["fuzzy"]),
                          ("database timeout", ["semantic"]), ("ledger migration timeout", None)):
            a = hsvc.search(q, all_sessions=True, detail=True, layers=layers, cfg=cfg, store=lite)
            b = hsvc.search(q, all_sessions=True, detail=True, layers=layers, cfg=cfg, store=pg)
            assert [h[:3] for h in _hits(b)] == [h[:3] for h in _hits(a)], q
            assert [h[3] for h in _hits(b)] == pytest.approx([h[3] for h in _hits(a)], rel=1e-4, abs=2e-3)  # SQLite: int8 mean
            assert b["layer_status"] == a["layer_status"]
        a = hsvc.search("ledger", workspace="/p2", cfg=cfg, store=lite)
        b = hsvc.search("ledger", workspace="/p2", cfg=cfg, store=pg)
        assert _hits(b) == _hits(a) and {h[0] for h in _hits(b)} == {"b"}
        shown = hsvc.show("a", store=pg)
        assert [e["seq"] for e in shown["events"]] == [0, 1, 2]
    finally:
        lite.close()
        pg.close()


def test_history_channels_hold_on_postgres(tmp_path, pg_url, pg_namespace):
    from dsh_recall.stores.postgres.history import PgHistoryStore

    cfg = cfg_for(None, None)
    store = PgHistoryStore(pg_url, pg_namespace)
    try:
        rows = _rows()
        _import(tmp_path, store, cfg, [r for r in rows if r["session"] == "a"], "a.jsonl", channel="group:team")
        _import(tmp_path, store, cfg, [r for r in rows if r["session"] == "b"], "b.jsonl", channel="owner-key")
        chans = {s["id"]: s["channel"] for s in store.sessions()}
        assert chans == {"a": "group:team", "b": "owner-key"}
        team = SimpleNamespace(unfiltered=False, can_see=lambda producer: producer == "group:team",
                               channel=SimpleNamespace(kind="group", reason="test"))
        got = hsvc.search("ledger", all_sessions=True, detail=True, cfg=cfg, store=store, viewer=team)
        assert {h["session"] for h in got["hits"]} == {"a"}
        # A second channel claiming a session makes it the owner's alone.
        _import(tmp_path, store, cfg, [r for r in rows if r["session"] == "a"], "a2.jsonl", channel="guest")
        assert {s["id"]: s["channel"] for s in store.sessions()}["a"] is None
        got = hsvc.search("ledger", all_sessions=True, detail=True, cfg=cfg, store=store, viewer=team)
        assert got["hits"] == []
    finally:
        store.close()


def test_history_store_follows_config(tmp_path, pg_url, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_STORE", pg_url)
    store = hsvc.open_store()
    try:
        assert store.path.startswith("postgresql://") and store.path.endswith("#history")
    finally:
        store.close()
    monkeypatch.delenv("DSH_RECALL_STORE")
    store = hsvc.open_store()
    try:
        assert str(store.path).endswith("history.sqlite")
    finally:
        store.close()


def test_a_postgres_index_is_found_from_a_subdirectory(tmp_path, pg_url):
    from dsh_recall.services.code import find_workspace

    repo = make_repo(tmp_path / "repo")  # no VCS marker: only the index says where it is
    home = tmp_path / "home"
    svc = CodeService(repo, cfg_for(repo, pg_url), home=home)
    try:
        svc.index()
    finally:
        svc.close()
    assert find_workspace(repo / "pkg", home) == repo.resolve()

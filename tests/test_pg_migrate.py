"""`dsh-recall store migrate`: SQLite indexes copied into PostgreSQL without re-embedding,
answering as before; and the namespaces' versioned schema."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import StoreError
from dsh_recall.frontends.cli import cli
from dsh_recall.services import history as hsvc
from dsh_recall.services.code import CodeService
from dsh_recall.services.notes import NotesService
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)
from test_pg_services import NOTES, QUERIES, _rows, make_repo


def _cfg(ws, store=None):
    over = {"embedder": {"name": "fake"}}
    if store:
        over["store"] = store
    return load_config(workspace=ws, overrides=over)


def test_migrate_copies_code_notes_and_history(tmp_path, pg_url, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    notes_root = tmp_path / "notes"
    notes_root.mkdir()
    for name, text in NOTES.items():
        (notes_root / name).write_text(text)
    lite = CodeService(repo, _cfg(repo))
    lite.index()
    before = [[(r["path"], r["start_line"], r["score"]) for r in lite.search(q)["results"]] for q in QUERIES]
    lite.close()
    nsvc = NotesService(_cfg(None), roots=[notes_root])
    nsvc.index()
    notes_before = [(r["path"], r["score"]) for r in nsvc.search("deploy key")["results"]]
    nsvc.close()
    f = tmp_path / "h.jsonl"
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows()), encoding="utf-8")
    hsvc.import_paths([str(f)], fmt="generic", cfg=_cfg(None), embed=True)
    hist_before = hsvc.search("ledger timeout", all_sessions=True, detail=True, cfg=_cfg(None))["hits"]

    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["store", "migrate", "--to", pg_url, "--workspace", str(repo),
                                   "--notes", "--history", "--replace", "--json"])
    assert res.exit_code == 0, res.output
    out = {r["kind"]: r for r in json.loads(res.output)}
    assert out["code"]["files"] == 5 and out["code"]["pending"] == 0 and out["code"]["vectors"] > 0
    assert out["history"]["blocks"] == 5 and out["history"]["vectors"] == 5

    # Searching PostgreSQL now: the same answers, and nothing left to embed.
    pg = CodeService(repo, _cfg(repo, pg_url))
    try:
        assert pg.store.pending_count() == 0
        assert pg.store.get_meta("embedder") and pg.store.get_meta("chunker")
        after = [[(r["path"], r["start_line"], r["score"]) for r in pg.search(q)["results"]] for q in QUERIES]
        assert after == before
        assert pg.index().indexed == 0  # the copied file stats count as indexed
    finally:
        pg.close()
    n2 = NotesService(_cfg(None, pg_url), roots=[notes_root])
    try:
        assert [(r["path"], r["score"]) for r in n2.search("deploy key")["results"]] == notes_before
    finally:
        n2.close()
    monkeypatch.setenv("DSH_RECALL_STORE", pg_url)
    hist_after = hsvc.search("ledger timeout", all_sessions=True, detail=True, cfg=_cfg(None, pg_url))["hits"]
    assert [(h["session"], h["start_seq"]) for h in hist_after] == [(h["session"], h["start_seq"]) for h in hist_before]
    # A second copy into the same namespace needs --replace.
    res = CliRunner().invoke(cli, ["store", "migrate", "--to", pg_url, "--workspace", str(repo)])
    assert res.exit_code != 0 and "--replace" in res.output


def test_migrate_needs_a_postgres_url(tmp_path):
    res = CliRunner().invoke(cli, ["store", "migrate", "--workspace", str(tmp_path)])
    assert res.exit_code != 0 and "postgresql://" in res.output


def test_schema_versions_are_applied_in_order_and_newer_refused(pg_url, pg_namespace):
    from dsh_recall.stores.postgres import migrations
    from dsh_recall.stores.postgres import util as pg_util

    conn = pg_util.connect(pg_url)
    try:
        steps = [(1, "CREATE TABLE {s}.a (x INT)"),
                 (2, lambda c, s: c.execute(f"INSERT INTO {s}.a VALUES (7)")),
                 (3, "ALTER TABLE {s}.a ADD COLUMN y INT DEFAULT 1")]
        schema = migrations.ensure_namespace(conn, pg_namespace, "chunks", steps[:1])
        assert migrations.namespace_version(conn, pg_namespace) == 1
        assert migrations.ensure_namespace(conn, pg_namespace, "chunks", steps) == schema
        assert migrations.namespace_version(conn, pg_namespace) == 3
        assert conn.execute(f"SELECT x, y FROM {schema}.a").fetchall() == [(7, 1)]
        with pytest.raises(StoreError, match="newer"):
            migrations.ensure_namespace(conn, pg_namespace, "chunks", steps[:2])
        with pytest.raises(StoreError, match="holds a chunks index"):
            migrations.ensure_namespace(conn, pg_namespace, "history", steps)
        migrations.drop_namespace(conn, pg_namespace)
        assert migrations.namespace_version(conn, pg_namespace) is None
    finally:
        conn.close()


def test_stores_record_their_schema_version(pg_url, pg_namespace):
    from dsh_recall.stores.postgres import migrations as pg_util
    from dsh_recall.stores.postgres.chunks import SCHEMA_VERSION, PgChunkStore
    from dsh_recall.stores.postgres.history import SCHEMA_VERSION as HV
    from dsh_recall.stores.postgres.history import PgHistoryStore

    a, b = PgChunkStore(pg_url, pg_namespace + "/c"), PgHistoryStore(pg_url, pg_namespace + "/h")
    try:
        assert pg_util.namespace_version(a.conn, pg_namespace + "/c") == SCHEMA_VERSION
        assert pg_util.namespace_version(a.conn, pg_namespace + "/h") == HV
    finally:
        a.close()
        b.close()

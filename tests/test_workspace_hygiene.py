"""Workspace hygiene through the CLI: `status` never creates an index, `index --drop PATH`
removes one and says what it freed, and `index --json` tells the texts the model embedded
from the vectors the embedding cache gave back (on SQLite, and on a shared PostgreSQL store
where a teammate's index reuses what another embedded)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from click.testing import CliRunner

from dsh_recall.core.paths import workspace_dir
from dsh_recall.services.vectors import file_lock
from dsh_recall.stores import registry
from pg_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

ENV = {"DSH_RECALL_EMBEDDER__NAME": "fake"}


def _cli(*args: str, env: dict[str, str] | None = None, ok: bool = True):
    from dsh_recall.frontends.cli import cli

    r = CliRunner().invoke(cli, list(args), env={**ENV, **(env or {})})
    if ok:
        assert r.exit_code == 0, r.output
    return r


def _workspace(root: Path, tag: str = "") -> Path:
    root.mkdir(parents=True)
    for i in range(6):
        (root / f"mod{i}.py").write_text(
            f'"""Module {i} {tag}."""\n\n\ndef handler_{i}(event):\n    """Handle event {i} {tag}."""\n'
            f"    return event * {i}\n")
    return root


def test_status_in_a_new_folder_creates_no_index(tmp_path, _isolated_home):
    ws = tmp_path / "fresh"
    ws.mkdir()
    shown = _cli("status", "--workspace", str(ws), "--no-probe").output
    assert "not indexed yet" in shown and "database   none yet" in shown
    data = json.loads(_cli("status", "--workspace", str(ws), "--no-probe", "--json").output)
    assert data["indexed"] is False and data["files"] == 0 and data["job"]["state"] == "idle"
    assert not workspace_dir(ws.resolve(), _isolated_home).exists()
    assert not list(_isolated_home.glob("workspaces/*"))
    report = json.loads(_cli("report", "--no-baseline", "--json").output)
    assert not report["workspaces"]


def test_drop_removes_the_index_and_a_new_index_reuses_the_cache(tmp_path, _isolated_home):
    ws = _workspace(tmp_path / "proj").resolve()
    first = json.loads(_cli("index", str(ws), "--wait", "--json").output)
    assert first["chunks"] > 0 and first["embedded"] == first["chunks"] and first["reused"] == 0
    folder = workspace_dir(ws, _isolated_home)
    assert (folder / "index.sqlite").exists()
    assert json.loads(_cli("status", "--workspace", str(ws), "--json").output)["indexed"]

    dropped = json.loads(_cli("index", "--drop", str(ws), "--json").output)
    assert dropped["dropped"] and dropped["files"] == 6 and dropped["chunks"] == first["chunks"]
    assert dropped["freed_bytes"] > 0 and not folder.exists()
    assert not json.loads(_cli("status", "--workspace", str(ws), "--json").output)["indexed"]
    assert not folder.exists()  # and status did not bring it back
    assert "no code index for" in _cli("index", "--drop", str(ws)).output

    # The embedding cache outlives the index: the model embeds nothing the second time.
    again = json.loads(_cli("index", str(ws), "--wait", "--json").output)
    assert again["chunks"] == first["chunks"]
    assert again["embedded"] == 0 and again["reused"] == first["chunks"]
    said = _cli("index", "--drop", str(ws)).output
    assert said.startswith(f"dropped the code index of {ws}: 6 files") and "freed" in said
    said = _cli("index", str(ws), "--wait").output
    assert f"0 embedded + {first['chunks']} reused from the embedding cache" in said


def test_drop_needs_a_path_and_waits_for_no_indexer(tmp_path, _isolated_home):
    ws = _workspace(tmp_path / "proj").resolve()
    _cli("index", str(ws), "--wait", "--lexical-only")
    r = _cli("index", "--drop", ok=False)
    assert r.exit_code != 0 and "name the workspace" in r.output
    folder = workspace_dir(ws, _isolated_home)
    with file_lock(folder / "index.lock", 0) as got:
        assert got
        r = _cli("index", "--drop", str(ws), ok=False)
    assert r.exit_code == 1 and "an indexer is at work" in r.output
    assert (folder / "index.sqlite").exists()


def test_shared_postgres_store_tells_embedded_from_reused_and_drop_empties_it(pg_url, tmp_path):
    """Two users, two recall homes, one PostgreSQL store: the second indexes a copy of the
    same files and every vector comes from the store's embedding cache."""
    tag = uuid.uuid4().hex  # texts no other test embedded into the shared cache
    mine = _workspace(tmp_path / "ada" / "proj", tag).resolve()
    theirs = tmp_path / "bo" / "proj"
    shutil.copytree(mine, theirs)
    env_a = {"DSH_RECALL_HOME": str(tmp_path / "home-a"), "DSH_RECALL_STORE": pg_url}
    env_b = {"DSH_RECALL_HOME": str(tmp_path / "home-b"), "DSH_RECALL_STORE": pg_url}
    a = json.loads(_cli("index", str(mine), "--wait", "--json", env=env_a).output)
    b = json.loads(_cli("index", str(theirs), "--wait", "--json", env=env_b).output)
    assert a["embedded"] == a["chunks"] > 0 and a["reused"] == 0
    assert b["chunks"] == a["chunks"] and b["embedded"] == 0 and b["reused"] == b["chunks"]

    folder = workspace_dir(theirs.resolve(), tmp_path / "home-b")
    dropped = json.loads(_cli("index", "--drop", str(theirs), "--json", env=env_b).output)
    assert dropped["dropped"] and dropped["store"] == "postgresql" and not folder.exists()
    store = registry.chunk_store(pg_url, registry.code_namespace(folder.name), folder / "index.sqlite")
    try:
        assert store.chunk_count() == 0 and store.file_count() == 0
    finally:
        store.close()
    ada = workspace_dir(mine, tmp_path / "home-a")
    store = registry.chunk_store(pg_url, registry.code_namespace(ada.name), ada / "index.sqlite")
    try:
        assert store.chunk_count() == a["chunks"]  # the other user's index is untouched
    finally:
        store.close()

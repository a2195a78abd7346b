"""A source root added to or removed from the config shows (or stops showing) at the next
search, not only after a re-index; the answer says what changed."""

from __future__ import annotations

import fcntl
from pathlib import Path

from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService


def _cfg(ws: Path, roots: list[str]):
    return load_config(workspace=ws, overrides={"embedder": {"name": "fake"}, "source_roots": roots})


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "app.py").write_text("def start_server():\n    return 'listening'\n")
    sdk = tmp_path / "sdk"
    sdk.mkdir()
    (sdk / "client.py").write_text("def connect_to_broker():\n    return 'broker'\n")
    return ws, sdk


def _paths(ans) -> list[str]:
    return [r["path"] for r in ans["results"]]


def test_an_added_root_is_indexed_before_answering_and_a_removed_one_leaves(tmp_path):
    ws, sdk = _tree(tmp_path)
    svc = CodeService(ws, _cfg(ws, []))
    svc.index()
    assert "sdk/client.py" not in _paths(svc.search("connect_to_broker", layers=("lexical",)))
    svc.close()

    svc = CodeService(ws, _cfg(ws, [f"sdk={sdk}"]))  # the user adds the root; no re-index
    ans = svc.search("connect_to_broker", layers=("lexical",))
    assert _paths(ans)[0] == "sdk/client.py"
    assert any("source roots changed since the last index (added sdk)" in n for n in ans["notes"])
    again = svc.search("connect_to_broker", layers=("lexical",))
    assert not any("source roots changed" in n for n in again["notes"])  # recorded now
    svc.close()

    svc = CodeService(ws, _cfg(ws, []))  # and removes it again
    ans = svc.search("connect_to_broker", layers=("lexical",))
    assert "sdk/client.py" not in _paths(ans)
    assert any("(removed sdk)" in n for n in ans["notes"])
    assert not any(p.startswith("sdk/") for p in svc.store.files())
    svc.close()


def test_while_another_process_indexes_a_removed_roots_hits_are_left_out(tmp_path):
    ws, sdk = _tree(tmp_path)
    svc = CodeService(ws, _cfg(ws, [f"sdk={sdk}"]))
    svc.index()
    assert _paths(svc.search("connect_to_broker", layers=("lexical",)))[0] == "sdk/client.py"
    lock_path = svc.dir / "index.lock"
    svc.close()

    svc = CodeService(ws, _cfg(ws, []).model_copy(update={"search_deadline_s": 0.2}))
    with open(lock_path, "a+") as held:  # another indexer holds the workspace
        fcntl.flock(held, fcntl.LOCK_EX)
        ans = svc.search("connect_to_broker", layers=("lexical",))
    assert "sdk/client.py" not in _paths(ans)
    assert any("removed sdk" in n and "another process is indexing" in n for n in ans["notes"])
    assert ans.get("backlog")
    svc.close()

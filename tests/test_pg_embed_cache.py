"""Embed once for a team: the embedding cache of a shared PostgreSQL store, keyed by
(embedder fingerprint, text hash), reused by every user's index of the same code; `store
migrate` of a SQLite index fills it (tests/pg_fixture.py starts the server)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.services.code import CodeService
from dsh_recall.stores.postgres.embed_cache import PgEmbedCache
from pg_fixture import pg_server, pg_url  # noqa: F401  (fixtures)

FILES = 40


def make_tree(root: Path, tag: str, files: int = FILES) -> Path:
    """`files` Python modules of two functions each, their words unique to `tag` (the cache
    is database-wide: another test's vectors must not answer for these)."""
    for i in range(files):
        p = root / "pkg" / f"mod_{i:03d}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(
            f"def {tag}_handler_{i}_{j}(value):\n"
            + "".join(f"    value = value + {k} * {i} + {j}  # step {tag} {k}\n" for k in range(12))
            + "    return value\n" for j in range(2))
        p.write_text(body + "\n")
    return root


def service(ws: Path, home: Path, url: str | None) -> CodeService:
    over: dict = {"embedder": {"name": "fake"}}
    if url:
        over["store"] = url
    return CodeService(ws, load_config(workspace=ws, overrides=over), home=home)


def embedded_texts(svc: CodeService) -> int:
    emb = svc.embedder()
    assert emb is not None
    return int(emb.calls)  # type: ignore[attr-defined]  # the fake counts texts embedded


def embed_hashes(svc: CodeService, paths: list[str] | None = None) -> set[str]:
    ids = svc.store.chunk_ids_for_paths(paths if paths is not None else sorted(svc.store.files()))
    return {r.embed_hash for r in svc.store.chunks_by_id(ids, with_text=False).values()}


def top(svc: CodeService, q: str) -> list[tuple[str, int]]:
    return [(r["path"], r["start_line"]) for r in svc.search(q)["results"][:5]]


def test_a_teammates_index_of_the_same_tree_embeds_nothing(tmp_path, pg_url):
    tag = "t" + uuid.uuid4().hex[:8]
    first_tree = make_tree(tmp_path / "alice" / "repo", tag)
    second_tree = tmp_path / "bob" / "checkout"
    shutil.copytree(first_tree, second_tree)  # same commit, another path: another namespace
    alice = service(first_tree, tmp_path / "alice-home", pg_url)
    bob = service(second_tree, tmp_path / "bob-home", pg_url)
    try:
        assert alice.store.path != bob.store.path
        rep = alice.index()
        hashes = embed_hashes(alice)
        assert rep.pending == 0 and len(hashes) >= FILES
        assert embedded_texts(alice) == len(hashes)  # nothing cached yet: each text once

        rep = bob.index()
        assert rep.chunks == alice.store.chunk_count() and rep.pending == 0
        assert rep.reused == rep.chunks  # every chunk got its vector from the cache...
        assert rep.embedded == 0 and embedded_texts(bob) == 0  # ...and none was embedded again
        q = f"{tag} handler 7 step"
        assert top(bob, q) == top(alice, q)

        # 5% of the tree changed (2 files of 40): only their new texts are embedded.
        changed = [f"pkg/mod_{i:03d}.py" for i in (3, 21)]
        for rel in changed:
            (second_tree / rel).write_text(f"def {tag}_rewritten_{rel[-6:-3]}(x):\n    return x * 2\n")
        before = embedded_texts(bob)
        rep = bob.index()
        new = embed_hashes(bob, changed) - hashes
        assert rep.indexed == len(changed) and rep.pending == 0 and new
        assert embedded_texts(bob) - before == len(new) == rep.embedded
    finally:
        alice.close()
        bob.close()


def test_store_migrate_fills_the_shared_cache(tmp_path, pg_url, monkeypatch):
    tag = "m" + uuid.uuid4().hex[:8]
    tree = make_tree(tmp_path / "repo", tag, files=12)
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    lite = service(tree, home, None)
    lite.index()
    hashes = embed_hashes(lite)
    fp = lite.store.get_meta("embedder")
    lite.close()
    monkeypatch.chdir(tree)
    res = CliRunner().invoke(cli, ["store", "migrate", "--to", pg_url, "--workspace", str(tree),
                                   "--replace", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)[0]
    assert out["cached"] == out["vectors"] == len(hashes)
    cache = PgEmbedCache(pg_url)
    try:
        assert fp and set(cache.get(fp, sorted(hashes))) == hashes
    finally:
        cache.close()
    # A teammate's first index of the same tree, straight on PostgreSQL: nothing embedded.
    other = tmp_path / "elsewhere"
    shutil.copytree(tree, other)
    mate = service(other, tmp_path / "mate-home", pg_url)
    try:
        rep = mate.index()
        assert rep.pending == 0 and rep.chunks == len(hashes) and embedded_texts(mate) == 0
    finally:
        mate.close()


def test_the_cache_keys_by_fingerprint_and_holds_no_text(pg_url):
    cache = PgEmbedCache(pg_url)
    try:
        h = "h" + uuid.uuid4().hex
        v = np.arange(8, dtype=np.float32) / 10
        cache.put("fake:a", [(h, v)])
        cache.put("fake:a", [(h, v * 2)])  # a hash cached first keeps its vector
        got = cache.get("fake:a", [h, h, "absent"])
        assert list(got) == [h] and np.array_equal(got[h], v)
        assert cache.get("fake:b", [h]) == {}  # another vector space never answers
        cols = {r[0] for r in cache.conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'cache'", (cache.s,))}
        assert cols == {"fp", "hash", "vec"}
    finally:
        cache.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_drop_forgets_a_text_under_every_fingerprint(backend, tmp_path, request):
    """A forgotten note's vectors leave the cache, whatever embedder made them; others stay."""
    if backend == "postgresql":
        cache = PgEmbedCache(request.getfixturevalue("pg_url"))
    else:
        from dsh_recall.stores.sqlite.embed_cache import EmbedCache
        cache = EmbedCache(tmp_path / "embed-cache.sqlite")
    try:
        gone, kept = "h" + uuid.uuid4().hex, "h" + uuid.uuid4().hex
        v = np.arange(8, dtype=np.float32) / 10
        for fp in ("fake:a", "fake:b"):
            cache.put(fp, [(gone, v), (kept, v)])
        cache.drop([gone])
        for fp in ("fake:a", "fake:b"):
            assert list(cache.get(fp, [gone, kept])) == [kept]
    finally:
        cache.close()

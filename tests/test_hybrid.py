"""The one hybrid step code and notes share: lexical + vector fused by rank (rank/fuse.fuse_layers)
under the search deadline (services/hybrid.py). Notes got the deadline with it."""

from __future__ import annotations

import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.embedders import registry as embedders
from dsh_recall.embedders.fake import FakeEmbedder
from dsh_recall.rank.fuse import fuse_layers
from dsh_recall.rank.query import Query
from dsh_recall.services import hybrid
from dsh_recall.services.code import CodeService
from dsh_recall.services.notes import NotesService

ids = st.lists(st.integers(0, 40), max_size=30, unique=True)


@given(ids, ids, st.sampled_from(["parse_args", "how do I check if a file exists"]))
def test_a_chunk_first_in_every_layer_scores_one(lexical, vector, query):
    rankings = {"lexical": lexical, "vector": vector}
    fused, norm = fuse_layers(rankings, Query.parse(query), 1.0, 1.0, 10)
    assert {i for i, _, _ in fused} == set(lexical) | set(vector)
    assert [s for _, s, _ in fused] == sorted((s for _, s, _ in fused), reverse=True)
    if lexical and vector and lexical[0] == vector[0]:
        assert fused[0][0] == lexical[0] and abs(fused[0][1] * norm - 1.0) < 1e-9
    assert fuse_layers({}, Query.parse(query), 1.0, 1.0, 10) == ([], 1.0)


class Reopens:
    """A store whose own connection for the vector thread is itself; counts its closes (per
    store: a thread an earlier test released may still be closing its own)."""

    def __init__(self):
        self.closed = 0

    def reopen(self):
        return self

    def close(self):
        self.closed += 1


def _rank(vector, deadline_s, store=None):
    notes: list[str] = []
    store = store or Reopens()
    ranked = hybrid.rank(Query.parse("parse args"), ("lexical", "vector"), lexical=lambda: [(3, 2.0), (1, 1.0)],
                         vector=lambda: hybrid.start_beside(store, vector, notes),
                         deadline=time.monotonic() + deadline_s, notes=notes,
                         lexical_weight=1.0, vector_weight=1.0, rrf_k=10)
    return ranked, notes


def test_the_vector_layer_is_waited_for_until_the_deadline_only():
    ranked, notes = _rank(lambda store: [(1, 0.9), (5, 0.5)], 5.0)
    assert ranked.used == ["lexical", "vector"] and ranked.fused[0][0] == 1 and notes == []
    assert ranked.vector == {1: 0.9, 5: 0.5}
    release = threading.Event()
    t0 = time.monotonic()
    ranked, notes = _rank(lambda store: release.wait(5) and [(7, 0.9)], 0.2)
    assert time.monotonic() - t0 < 2
    release.set()
    assert ranked.used == ["lexical"] and [i for i, _, _ in ranked.fused] == [3, 1]
    assert notes == ["vector layer did not answer within the search deadline; lexical only"]


def test_a_failing_vector_layer_leaves_a_note_and_closes_its_connection():
    def broken(store):
        raise OSError("disk gone")

    store = Reopens()
    ranked, notes = _rank(broken, 5.0, store)
    assert ranked.used == ["lexical"] and notes == ["vector layer failed: disk gone; lexical only"]
    assert store.closed == 1


class SlowQueries(FakeEmbedder):
    """Embeds passages at once, a query only when the test lets it."""

    name = "slow-queries"
    release = threading.Event()

    def embed_query(self, text):
        self.release.wait(10)
        return super().embed_query(text)


def test_notes_answer_by_words_when_the_vector_layer_misses_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setitem(embedders._REGISTRY, "slow-queries", lambda cfg: SlowQueries())
    root = tmp_path / "memory"
    root.mkdir()
    (root / "tools.md").write_text("# Tools\n\n- My editor is helix\n")
    cfg = load_config(overrides={"embedder": {"name": "slow-queries"}, "search_deadline_s": 0.3})
    svc = NotesService(cfg, roots=[root], home=tmp_path / "home")
    svc.index()
    try:
        t0 = time.monotonic()
        res = svc.search("which editor, helix?")
        assert time.monotonic() - t0 < 3
        assert res["layers"] == ["lexical"] and res["results"][0]["path"] == "tools.md"
        assert any("did not answer within the search deadline" in n for n in res["notes"])
    finally:
        SlowQueries.release.set()
        svc.close()


def test_code_and_notes_page_with_offset(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(8):
        (repo / f"m{i}.py").write_text(f"def retry_{i}(request):\n    return backoff({i})\n")
    cfg = load_config(workspace=repo, overrides={"embedder": {"name": "fake"}})
    code = CodeService(repo, cfg, tmp_path / "home")
    whole = [r["path"] for r in code.search("retry backoff", limit=6)["results"]]
    page = [r["path"] for r in code.search("retry backoff", limit=3, offset=3)["results"]]
    assert len(whole) == 6 and page == whole[3:6]
    code.close()
    root = tmp_path / "memory"
    root.mkdir()
    (root / "log.md").write_text("".join(f"- entry {i}: the heron nests by lake {i}\n" for i in range(8)))
    notes = NotesService(cfg, roots=[root], home=tmp_path / "home")
    notes.index()
    whole = [r["start_line"] for r in notes.search("heron lake", limit=6)["results"]]
    page = [r["start_line"] for r in notes.search("heron lake", limit=3, offset=3)["results"]]
    assert len(whole) == 6 and page == whole[3:6]
    notes.close()

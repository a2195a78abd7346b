"""Notes service: incremental index, deletion, the chunk-spec gate, embedder change, CJK,
missing roots, source weights, auto-recall and eval."""

import json
import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.chunkers import notes as note_chunker
from dsh_recall.core.config import load_config
from dsh_recall.rank.notes_rank import RECALL_HEADER, Hit, recall_block
from dsh_recall.services.notes import NotesService
from dsh_recall.stores.contracts import ChunkRow


def cfg(**notes):
    embedder = notes.pop("embedder", {"name": "fake"})
    return load_config(overrides={"embedder": embedder, "notes": notes})


def write(root, rel, text):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def corpus(tmp_path):
    root = tmp_path / "memory"
    write(root, "facts.md", "# Tools\n\n- My editor is helix\n- Shell: fish\n")
    write(root, "people.md", "# People\n\nAlice leads the data platform team.\n")
    write(root, "journal/2024-05.md", "## Monday\n\nDebugged the flaky deploy pipeline.\n")
    return root


def test_touching_one_note_rechunks_only_it(tmp_path):
    root = corpus(tmp_path)
    svc = NotesService(cfg(), roots=[root])
    first = svc.index()
    assert first["indexed"] == 3 and first["chunks"] >= 4
    assert svc.index()["indexed"] == 0
    p = root / "people.md"
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    rep = svc.index()
    assert rep["reindexed"] == ["people.md"] and rep["unchanged"] == 2
    write(root, "facts.md", "# Tools\n\n- My editor is kakoune now\n")
    rep = svc.index()
    assert rep["reindexed"] == ["facts.md"]
    assert svc.search("kakoune", layers=("lexical",))["results"][0]["path"] == "facts.md"
    assert not svc.search("helix", layers=("lexical",))["results"]


def test_deleted_notes_are_forgotten(tmp_path):
    root = corpus(tmp_path)
    svc = NotesService(cfg(), roots=[root])
    svc.index()
    assert svc.search("Alice", layers=("lexical",))["results"]
    (root / "people.md").unlink()
    rep = svc.index()
    assert rep["deleted_paths"] == ["people.md"] and rep["files"] == 2
    assert not any(r["path"] == "people.md" for r in svc.search("Alice")["results"])
    assert svc.store.vector_count() == svc.store.chunk_count()  # orphan vectors pruned


def test_spec_change_is_gated_until_accepted(tmp_path, monkeypatch):
    root = corpus(tmp_path)
    svc = NotesService(cfg(), roots=[root])
    svc.index()
    chunks_before = svc.store.chunk_count()
    monkeypatch.setattr(note_chunker, "NOTES_CHUNKER_VERSION", "notes-test-next")
    rep = svc.index()
    assert rep["indexed"] == 0 and rep["spec"]["pending"] and rep["spec"]["pending_notes"] == 3
    assert any("--accept-spec-change" in n for n in rep["notes"])
    res = svc.search("helix")
    assert res["results"] and res["results"][0]["path"] == "facts.md"  # still working
    assert any("re-chunking pending" in n for n in res["notes"])
    # an edited note is indexed (never left stale) while the rest wait for the gate
    write(root, "people.md", "# People\n\nBob runs the release train.\n")
    rep = svc.index()
    assert rep["reindexed"] == ["people.md"] and rep["spec"]["pending_notes"] == 2
    rep = svc.index(accept_spec_change=True)
    assert sorted(rep["reindexed"]) == ["facts.md", "journal/2024-05.md"]
    assert not rep["spec"]["pending"] and rep["spec"]["pending_notes"] == 0
    assert svc.store.chunk_count() >= chunks_before - 1
    assert not any("pending" in n for n in svc.search("helix")["notes"])


def test_embedder_change_rebuilds_vectors_never_mixes(tmp_path):
    root = corpus(tmp_path)
    home = tmp_path / "home"
    a = NotesService(cfg(embedder={"name": "fake", "dim": 64}), roots=[root], home=home)
    a.index()
    assert a.store.vector_matrix()[1].shape[1] == 64
    a.close()
    b = NotesService(cfg(embedder={"name": "fake", "dim": 32}), roots=[root], home=home)
    rep = b.index()
    assert any("embedder changed" in n for n in rep["notes"])
    ids, mat = b.store.vector_matrix()
    assert mat.shape == (b.store.chunk_count(), 32)
    assert "vector" in b.search("helix")["layers"]


def test_chinese_notes_are_found_by_words(tmp_path):
    root = tmp_path / "zh"
    write(root, "决定.md", "# 数据库\n\n我们决定把主数据库迁移到 PostgreSQL。\n\n"
                          "周五不要部署。\n")
    write(root, "other.md", "# 旅行\n\n下个月去杭州看西湖。\n")
    svc = NotesService(cfg(), roots=[root])
    svc.index()
    for q in ["数据库迁移", "迁移", "西湖", "部署"]:
        res = svc.search(q, layers=("lexical",))
        assert res["results"], q
    top = svc.search("数据库迁移", layers=("lexical",))["results"][0]
    assert top["path"] == "决定.md" and "迁移" in top["text"] and top["start_line"] == 1
    assert svc.search("杭州", layers=("lexical",))["results"][0]["path"] == "other.md"


def test_a_missing_root_is_reported_not_fatal(tmp_path):
    root = corpus(tmp_path)
    svc = NotesService(cfg(), roots=[tmp_path / "gone", root])
    rep = svc.index()
    assert rep["files"] == 3
    assert any("does not exist" in p for p in rep["problems"])
    assert [r["ok"] for r in rep["roots"]] == [False, True]
    res = svc.search("helix", layers=("lexical",))
    assert res["results"][0]["path"] == "memory/facts.md"
    assert any("does not exist" in n for n in res["notes"])


def test_no_roots_means_an_empty_index_that_says_so(tmp_path):
    svc = NotesService(cfg(), roots=[])
    rep = svc.index()
    assert rep["files"] == 0 and any("no notes roots" in n for n in rep["notes"])
    res = svc.search("anything")
    assert res["results"] == [] and any("no notes roots" in n for n in res["notes"])


def test_exclude_globs(tmp_path):
    root = corpus(tmp_path)
    svc = NotesService(cfg(exclude=["journal/"]), roots=[root])
    assert svc.index()["files"] == 2


def test_source_weights_reorder_by_glob(tmp_path):
    root = tmp_path / "w"
    write(root, "curated/facts.md", "- the kettle is blue\n")
    write(root, "journal/day.md", "- the kettle is blue\n")
    plain = NotesService(cfg(), roots=[root])
    plain.index()
    base = {r["path"]: r["score"] for r in plain.search("kettle", layers=("lexical",))["results"]}
    plain.close()
    for weights, first in [({"journal/*": 0.5, "curated/*": 1.5}, "curated/facts.md"),
                           ({"journal/*": 3.0}, "journal/day.md")]:
        svc = NotesService(cfg(weights=weights), roots=[root])
        res = svc.search("kettle", layers=("lexical",))["results"]
        assert res[0]["path"] == first
        for r in res:
            mult = np.prod([w for g, w in weights.items() if r["path"].startswith(g[:-1])])
            assert abs(r["score"] - round(base[r["path"]] * mult, 4)) < 1e-3
        svc.close()


def test_search_result_shape(tmp_path):
    root = corpus(tmp_path)
    svc = NotesService(cfg(), roots=[root])
    svc.index()
    res = svc.search('helix "editor" OR (', limit=2)
    assert res["layers"] == ["lexical", "vector"] and len(res["results"]) == 2
    r = res["results"][0]
    assert {"path", "start_line", "end_line", "heading", "level", "score", "text"} <= set(r)
    assert r["path"] == "facts.md" and r["heading"] == "Tools" and r["level"] == "personal"


def test_auto_recall_is_bounded_and_empty_when_irrelevant(tmp_path):
    root = corpus(tmp_path)
    svc = NotesService(cfg(), roots=[root])
    svc.index()
    block = svc.auto_recall("which editor do I use, helix?")
    assert "facts.md:1 (Tools): - My editor is helix" in block
    assert len(block) <= svc.ncfg.auto_recall_budget_chars
    assert svc.auto_recall("quantum chromodynamics lattice gauge") == ""
    assert svc.auto_recall("   ") == ""
    tight = svc.auto_recall("helix editor Alice data platform", budget_chars=150)
    assert 0 < len(tight) <= 150


def _hit(i, text):
    row = ChunkRow(i, f"n{i}.md", f"/x/n{i}.md", 1, 1, text, "markdown", ("H",), "h")
    return Hit(row, 1.0, "public", None, 1.0, {})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=400), min_size=1, max_size=8),
       st.integers(min_value=1, max_value=3000))
def test_recall_block_never_exceeds_its_budget(texts, budget):
    block = recall_block([_hit(i, t) for i, t in enumerate(texts)], budget)
    assert len(block) <= budget
    if block:
        assert block.startswith(RECALL_HEADER)


def test_eval_reports_hit_rates(tmp_path):
    root = corpus(tmp_path)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in [
        {"question": "which editor", "expected_file": "facts"},
        {"question": "who leads the data platform", "expected_file": "people.md"},
        {"query": "flaky deploy", "expected_passage": "Debugged the flaky deploy pipeline."},
        {"query": "helix", "expected_file": "no-such-note"},
    ]))
    svc = NotesService(cfg(), roots=[root])
    out = svc.evaluate(cases, layers=("lexical",))
    assert out["cases"] == 4
    assert out["hit@1"] == 0.75 and out["hit@5"] == 0.75
    assert [m["query"] for m in out["misses"]] == ["helix"]


def test_a_search_leaves_a_backlog_it_cannot_embed_in_its_budget(tmp_path):
    # At the rate this embedder last reached here, 60 passages take 6 s: more than a
    # search's 2 s budget. The search answers at once, by words, and says how to catch up;
    # it used to spend its whole budget on every call while the backlog stayed.
    root = tmp_path / "memory"
    write(root, "log.md", "".join(f"- entry {i}: the heron nests by lake {i}\n" for i in range(60)))
    svc = NotesService(cfg(), roots=[root])
    svc.index(embed=False)
    assert svc.store.pending_count() == 60
    fp = svc.embedder().fingerprint
    svc.store.set_meta("embed_rate", f"{fp}|10.0")
    res = svc.search("heron lake 7")
    assert svc.store.pending_count() == 60
    assert any("60 passages wait for vectors" in n and "notes index" in n for n in res["notes"])
    assert res["results"] and res["pending"] == 60
    # ...and says it in structured form, for a front end that fills it.
    assert res["backlog"] == [{"source": "notes", "what": "vectors", "pending": 60,
                               "command": "dsh-recall notes index", "job": "notes.embed",
                               "hint": "`dsh-recall notes index` embeds them"}]
    # A backlog that fits the budget is embedded by the search itself.
    svc.store.set_meta("embed_rate", f"{fp}|1000.0")
    res = svc.search("heron lake 7")
    assert svc.store.pending_count() == 0 and res["pending"] == 0
    assert not any("wait for vectors" in n for n in res["notes"]) and "backlog" not in res
    # No rate known yet: a short first slice measures one (and, here, embeds them all).
    svc.store.clear_vectors()
    svc.store.set_meta("embed_rate", "")
    svc.search("heron")
    assert svc.store.pending_count() == 0 and svc.known_rate() is not None
    svc.close()


def test_the_mcp_server_embeds_a_notes_backlog_in_the_background(tmp_path):
    from dsh_recall.frontends.mcp.handlers import RecallApp

    root = tmp_path / "memory"
    write(root, "log.md", "".join(f"- entry {i}: the heron nests by lake {i}\n" for i in range(60)))
    c = cfg(roots=[str(root)])
    svc = NotesService(c, workspace=tmp_path)
    svc.index(embed=False)
    svc.store.set_meta("embed_rate", f"{svc.embedder().fingerprint}|10.0")
    app = RecallApp(tmp_path, c)
    try:
        out, _ = app.call("notes_search", {"query": "heron lake"})
        assert any("this server is embedding them in the background" in n for n in out["notes"])
        app.background.wait("notes.embed", tmp_path, 60)
        assert app.background.embedded("notes.embed", tmp_path) == 60 and svc.store.pending_count() == 0
    finally:
        app.close()
        svc.close()

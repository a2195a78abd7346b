"""The fused answer's relevance floor by each source's own judgment, identical payloads
folded, and the fused `match` (services/federated.py, rank/floor.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.rank import floor
from dsh_recall.services import federated
from worlds import owner_guest_world

SOURCES = ["code", "history", "notes", "objects"]


def hit(source, i, match=None, excerpt="x"):
    h = {"source": source, "title": f"{source}-{i}", "excerpt": excerpt}
    if match:
        h["match"] = match
    return h


def test_tiers_strong_then_weak_then_sources_that_found_nothing():
    hits = [hit("code", 0, "weak"), hit("notes", 0, "weak"), hit("history", 0, "strong"),
            hit("notes", 1, "weak"), hit("code", 1, "strong"), hit("objects", 0)]
    out = floor.order("x", hits, {"code": "strong", "notes": "none", "history": "strong"})
    assert [h["title"] for h in out] == ["history-0", "code-1", "objects-0", "code-0",
                                         "notes-0", "notes-1"]
    # a none source's hits are weak; a source that does not judge leaves no mark
    assert [h.get("match") for h in out] == ["strong", "strong", None, "weak", "weak", "weak"]
    assert "match" not in hits[5] and hits[1]["match"] == "weak"  # the input is not changed


def test_a_hit_whose_source_does_not_judge_is_placed_by_the_terms_it_shows():
    hits = [hit("code", 0, excerpt="alpha"), hit("notes", 0, "weak", "alpha beta gamma"),
            hit("history", 0, excerpt="alpha beta gamma")]
    out = floor.order("alpha beta gamma", hits, {"notes": "weak"})
    assert [h["source"] for h in out] == ["history", "code", "notes"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SOURCES),
                          st.sampled_from([None, "strong", "weak"]),
                          st.sampled_from(["alpha", "beta gamma", "alpha beta gamma", ""])),
                max_size=10),
       st.fixed_dictionaries({}, optional={s: st.sampled_from([None, "strong", "weak", "none"])
                                           for s in SOURCES}))
def test_order_is_a_stable_partition(items, answers):
    hits = [hit(s, i, m, e) for i, (s, m, e) in enumerate(items)]
    out = floor.order("alpha beta gamma", hits, answers)
    assert sorted(h["title"] for h in out) == sorted(h["title"] for h in hits)
    low = dict(zip([h["title"] for h in hits], floor.below_floor("alpha beta gamma", hits),
                   strict=True))
    src = {h["title"]: h for h in hits}
    tiers = [floor.tier(src[h["title"]], answers.get(h["source"]), low[h["title"]]) for h in out]
    assert tiers == sorted(tiers)
    for t in set(tiers):  # fused order kept within a tier
        titles = [h["title"] for h, x in zip(out, tiers, strict=True) if x == t]
        assert titles == sorted(titles, key=lambda n: [h["title"] for h in hits].index(n))
    for h in out:
        if answers.get(h["source"]) == "none":
            assert h["match"] == "weak"
        assert h.get("match") in (None, "strong", "weak")


def test_fold_lists_a_repeated_text_once_and_counts_the_copies():
    hits = [hit("objects", 0, excerpt="ERROR  disk full\nexit 1"),
            hit("code", 0, excerpt="other"),
            hit("objects", 1, excerpt="error disk full\n exit 1 "),
            hit("history", 0, "strong", excerpt="ERROR disk full exit 1"),
            hit("notes", 0, excerpt=""), hit("notes", 1, excerpt="")]
    out, n = floor.fold(hits)
    assert n == 2
    assert [h["title"] for h in out] == ["objects-0", "code-0", "notes-0", "notes-1"]
    assert out[0]["folded"] == 2 and "folded" not in out[1]
    assert "folded" not in hits[0]  # copies, not the given dicts


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "A ", "b", "b\n", "", "c"]), max_size=10))
def test_fold_keeps_one_hit_per_text(texts):
    hits = [hit("code", i, excerpt=t) for i, t in enumerate(texts)]
    out, n = floor.fold(hits)
    keys = [floor.payload_key(h["excerpt"]) for h in out if h["excerpt"].strip()]
    assert len(keys) == len(set(keys))
    assert len(out) + n == len(hits)
    assert sum(h.get("folded", 0) for h in out) == n


def test_the_fused_answers_match():
    strong = [{"source": "notes", "match": "strong"}]
    weak = [{"source": "notes", "match": "weak"}]
    assert floor.answer_match(strong, {"notes": ("strong", 1), "code": (None, 3)}) == "strong"
    assert floor.answer_match(weak, {"notes": ("none", 1), "code": ("none", 2)}) == "none"
    assert floor.answer_match([], {"notes": ("strong", 0), "code": (None, 0)}) == "none"
    assert floor.answer_match([], {}) == "none"
    assert floor.answer_match(weak, {"notes": ("weak", 1), "code": ("none", 2)}) == "weak"
    # a source with hits that does not judge: unknown, unless a strong hit is shown
    assert floor.answer_match(weak, {"notes": ("weak", 1), "objects": (None, 2)}) is None


def _world(tmp_path):
    log = "".join(f"step {i} ok\n" for i in range(400)) + "FATAL quota exceeded on cache\n"
    return owner_guest_world(
        tmp_path,
        code={"deploy.py": "def ship_canary(target):\n    return target\n"},
        notes={"public.md": "# Deploy\n\nThe canary deploy waits fifteen minutes before "
                            "promotion.\n\n## Lunch\n\nPizza on Fridays.\n"},
        sessions={"s-owner": ["we talked about lunch"]},
        logs=(log, log))  # the same log, offloaded twice (two channels, two objects)


def test_search_all_folds_the_same_log_stored_twice(tmp_path):
    w = _world(tmp_path)
    data = federated.search_all("FATAL quota exceeded", cfg=w["cfg"], workspace=w["repo"],
                                sources=("objects",))
    objs = [r for r in data["results"] if r["source"] == "objects"]
    assert len(objs) == 1 and objs[0]["folded"] == 1, data["results"]
    assert any("folded into it" in n for n in data["notes"])
    assert all("_payload" not in r for r in data["results"])
    assert data["sources"]["objects"]["hits"] == 2  # both found, one shown


def test_search_all_carries_the_notes_judgment(tmp_path):
    w = _world(tmp_path)
    data = federated.search_all("canary deploy promotion", cfg=w["cfg"], workspace=w["repo"],
                                sources=("notes",))
    assert data["match"] == "strong" and data["sources"]["notes"]["match"] == "strong"
    assert data["results"][0]["match"] == "strong"
    made_up = federated.search_all("flurbozite_handler canary", cfg=w["cfg"],
                                   workspace=w["repo"], sources=("notes",))
    assert made_up["match"] == "none"
    assert made_up["results"] and all(r["match"] == "weak" for r in made_up["results"])
    text = federated.render_text(made_up)
    assert text.startswith("-- no good match") and "(weak)" in text
    assert "notes ok (" in text and ", none)" in text


def test_a_source_that_found_nothing_related_ranks_after_the_others(tmp_path, monkeypatch):
    w = _world(tmp_path)
    real = federated._notes

    def notes_none(*a, **k):
        run = real(*a, **k)
        run.match = "none"
        for h in run.hits:
            h["match"] = "weak"
        return run

    monkeypatch.setattr(federated, "_notes", notes_none)
    data = federated.search_all("lunch", cfg=w["cfg"], workspace=w["repo"],
                                sources=("notes", "history"))
    order = [r["source"] for r in data["results"]]
    assert "notes" in order and "history" in order, data["sources"]
    assert order.index("history") < order.index("notes")
    assert all(r["match"] == "weak" for r in data["results"] if r["source"] == "notes")

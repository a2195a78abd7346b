"""Notes answers say how sure they are: `match` strong | weak | none on the answer and each
passage (docs/notes.md#how-sure-an-answer-is). Before, an answer about a made-up identifier
looked as sure as a real one, and answers trailed off into unrelated passages."""

from __future__ import annotations

import json

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest import approx

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.rank import notes_rank as nr
from dsh_recall.rank.query import Query
from dsh_recall.services.base import match_note
from dsh_recall.services.notes import NotesService


def test_evidence_adds_words_and_meaning_each_against_its_own_bar():
    assert nr.evidence(nr.WORDS_BAR, None, None) == approx(1.0)
    assert nr.evidence(0.0, 0.55, 0.25) == approx(1.0)  # 0.3 above the typical passage
    assert nr.evidence(nr.WORDS_BAR / 2, 0.40, 0.25) == approx(1.0)  # half of each
    assert nr.evidence(0.2, 0.1, 0.3) == approx(0.4)  # a cosine under the mean adds nothing
    assert nr.evidence(0.2, 0.9, None) == approx(0.4)  # meaning not checked: the words alone


def test_judge_strong_marks_far_less_covered_passages_weak_and_cuts_the_tail():
    covs = [1.0, 0.4, 0.6, 0.3, 0.0, 0.1, 0.05]
    coss = [0.7, 0.7, 0.3, None, 0.2, 0.2, None]
    v = nr.judge(covs, coss, 0.2)
    assert v.match == "strong"
    # 0.4 < half of 1.0: weak although its meaning alone is enough; 0.3 and the tail weak.
    assert v.hits[:4] == ("strong", "weak", "strong", "weak")
    # the trailing unrelated passages (evidence under half the bar) go
    assert v.keep == 4 and len(v.hits) == 4


def test_judge_keeps_at_least_a_few_passages_of_a_strong_answer():
    v = nr.judge([1.0, 0.0, 0.0, 0.0, 0.0], [None] * 5, 0.1)
    assert v.match == "strong" and v.keep == nr.MIN_KEPT
    assert v.hits == ("strong", "weak", "weak")


def test_judge_none_and_weak():
    # all the evidence is in and nothing reaches the bar: nothing related found
    assert nr.judge([0.3, 0.1], [0.25, 0.3], 0.2) == nr.Verdict("none", ("weak", "weak"), 2)
    # the same words, but the meaning could not be checked: the closest, not nothing
    assert nr.judge([0.3, 0.1], [None, None], None).match == "weak"
    assert nr.judge([0.1, 0.0], [None, None], None).match == "none"
    # a name the index never saw: none, however well the rest matches
    v = nr.judge([1.0, 0.9], [0.9, 0.9], 0.1, unknown_names=["nimbusfrost"])
    assert v == nr.Verdict("none", ("weak", "weak"), 2)
    assert nr.judge([], [], None) == nr.Verdict("none", (), 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.one_of(st.none(), st.floats(-1, 1))), max_size=12),
       st.one_of(st.none(), st.floats(-0.5, 0.5)), st.booleans())
def test_judge_properties(hits, mean, named):
    covs, coss = [c for c, _ in hits], [s for _, s in hits]
    v = nr.judge(covs, coss, mean, unknown_names=["x"] if named else [])
    assert v.match in ("strong", "weak", "none")
    assert len(v.hits) == v.keep <= len(hits)
    assert set(v.hits) <= {"strong", "weak"}
    assert (v.match == "strong") == ("strong" in v.hits)
    if v.match != "strong":
        assert v.keep == len(hits)  # only a strong answer is cut
    else:
        assert v.keep >= min(len(hits), nr.MIN_KEPT)
        assert "strong" in v.hits  # a cut never drops the passages that answer
        ev = [nr.evidence(c, s, mean) for c, s in hits]
        assert all(e < nr.UNRELATED for e in ev[v.keep:])
    if named:
        assert v.match == "none"


def test_written_names():
    assert nr.written_names(Query.parse("flurbozite_handler retry budget")) == ["flurbozite_handler"]
    assert nr.written_names(Query.parse("what does snarfleMode do")) == ["snarflemode"]
    assert nr.written_names(Query.parse("grombulator v3 error E4471")) == ["v3", "e4471"]
    assert nr.written_names(Query.parse("Project Nimbusfrost retrospective")) == ["nimbusfrost"]
    assert nr.written_names(Query.parse("GDPR rules")) == ["gdpr"]
    # a sentence's first word and plain words are not names
    assert nr.written_names(Query.parse("Working from home guidelines")) == []
    assert nr.written_names(Query.parse("user 123 purchases")) == []


def _service(tmp_path, **over):
    root = tmp_path / "memory"
    root.mkdir()
    (root / "deploy.md").write_text(
        "# Deploying\n\n## Staging\n\nWe deploy staging with make ship-staging; the canary "
        "waits fifteen minutes before promotion.\n\n## Rollback\n\nA failed canary rolls "
        "back by itself.\n")
    (root / "team.md").write_text(
        "# Team\n\nCode review needs two approvals.\n\n## Standup\n\nStandup is at nine "
        "thirty, on the video bridge.\n\n## Lunch\n\nPizza on Fridays.\n")
    cfg = load_config(overrides={"embedder": {"name": "fake"}, "notes": {"roots": [str(root)]},
                                 **over})
    svc = NotesService(cfg)
    svc.index()
    return svc, root


def test_a_real_query_is_strong_and_a_made_up_identifier_is_none(tmp_path):
    svc, _ = _service(tmp_path)
    try:
        real = svc.search("how do we deploy staging canary")
        assert real["match"] == "strong"
        assert real["results"][0]["path"] == "deploy.md"
        assert real["results"][0]["match"] == "strong"
        assert all(r["match"] in ("strong", "weak") for r in real["results"])
        made_up = svc.search("flurbozite_handler staging canary")
        assert made_up["match"] == "none"
        assert made_up["results"] and all(r["match"] == "weak" for r in made_up["results"])
        assert "no note mentions flurbozite_handler" in made_up["notes"]
        unrelated = svc.search("chocolate cake recipe")
        assert unrelated["match"] == "none"
    finally:
        svc.close()


def test_lexical_only_says_weak_when_the_meaning_could_not_be_checked(tmp_path):
    svc, _ = _service(tmp_path)
    try:
        # one word of three: not enough by words; with vectors the meaning decides
        d = svc.search("canary promotion elephant", layers=("lexical",))
        assert d["layers"] == ["lexical"]
        assert d["match"] == "weak"
        assert d["results"] and all(r["match"] == "weak" for r in d["results"])
    finally:
        svc.close()


def test_explain_shows_the_evidence(tmp_path):
    svc, _ = _service(tmp_path)
    try:
        r = svc.search("deploy staging canary", explain=True)["results"][0]
        assert r["evidence"] >= 1.0 and {"coverage", "cosine"} <= set(r)
    finally:
        svc.close()


def test_a_strong_answer_leaves_out_its_unrelated_tail_and_says_so(tmp_path):
    root = tmp_path / "memory"
    root.mkdir()
    (root / "a.md").write_text("# Rollout\n\nThe rollout of the widget service goes region "
                               "by region.\n")
    for i in range(8):
        (root / f"x{i}.md").write_text(f"# Other {i}\n\nThe rollout note {i} about cats, "
                                       "dogs and unrelated matters of the household.\n")
    cfg = load_config(overrides={"embedder": {"name": "fake"}, "notes": {"roots": [str(root)]}})
    svc = NotesService(cfg)
    svc.index()
    try:
        d = svc.search("widget service rollout region", limit=9, explain=True)
    finally:
        svc.close()
    assert d["match"] == "strong" and d["results"][0]["path"] == "a.md"
    # eight passages share one common word of four: the first two stay, marked weak
    assert [r["match"] for r in d["results"]] == ["strong", "weak", "weak"]
    assert "6 more passages left out: they hold little of the query" in d["notes"]


def test_cli_notes_search_shows_the_match_and_json_carries_it(tmp_path):
    svc, root = _service(tmp_path)
    svc.close()
    env = {"DSH_RECALL_EMBEDDER__NAME": "fake"}
    run = CliRunner().invoke
    r = run(cli, ["notes", "search", "flurbozite_handler", "staging", "--root", str(root)],
            env=env, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"-- {match_note('none')}\n")
    assert "(weak)" in r.output
    r = run(cli, ["notes", "search", "flurbozite_handler", "staging", "--root", str(root),
                  "--json"], env=env, catch_exceptions=False)
    data = json.loads(r.output)
    assert data["match"] == "none" and all(x["match"] == "weak" for x in data["results"])
    r = run(cli, ["notes", "search", "deploy", "staging", "canary", "--root", str(root)],
            env=env, catch_exceptions=False)
    assert "match:" not in r.output.splitlines()[0]  # strong: no match line
    assert not r.output.startswith("-- ")

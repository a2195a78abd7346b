"""History turn rules (rank/history_rules.py): each one, on versus off, on tiny synthetic
conversations with the fake embedder, changes the ranking the way docs/history.md says."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.rank import history_rules as hr
from dsh_recall.services import history as svc

RULES_OFF = {"answer_share": 0, "speaker_boost": 0, "time_boost": 0, "date_boost": 0,
             "session_boost": 0, "prf_terms": 0}


def _cfg(**rules) -> object:
    return load_config(overrides={"embedder": {"name": "fake"}, "history": {**RULES_OFF, **rules}})


def _import(tmp_path: Path, rows: list[dict]) -> None:
    path = tmp_path / "conv.jsonl"
    path.write_text("".join(json.dumps({"workspace": "conv", **r}) + "\n" for r in rows), encoding="utf-8")
    svc.import_paths([str(path)], fmt="generic", cfg=_cfg())


def _ids(query: str, cfg, layers=("literal",), detail=True) -> list[str]:
    ans = svc.search(query, workspace="conv", detail=detail, limit=10, layers=list(layers), cfg=cfg)
    return [m for h in ans["hits"] for m in h["message_ids"]]


def _turns(session: str, speakers_texts: list[tuple[str, str]], when: str | None = None,
           prefix: str = "") -> list[dict]:
    return [{"session": session, "seq": i, "role": who, "text": text, "id": f"{prefix}{i}",
             **({"time": when} if when else {})} for i, (who, text) in enumerate(speakers_texts)]


def test_defaults_turn_the_measured_rules_on():
    h = load_config().history
    assert (h.answer_share, h.speaker_boost, h.time_boost, h.date_boost, h.session_boost) == (0.5, 0.5, 0.5, 1.0, 0.3)
    assert h.prf_terms == 0  # measured no better on locomo-dev: off


def test_answer_partner_lifts_the_turn_after_a_question(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("Ann", "What did you paint for the gallery show?"),
        ("Bob", "A sunrise over the lake, all orange."),
        ("Ann", "Lovely."),
    ], prefix="a") + _turns("s2", [
        ("Bob", "I need to paint the fence before the gallery visit on Sunday, the fence is old."),
        ("Ann", "Good luck."),
    ], prefix="b"))
    q = "What did Bob paint for the gallery show?"
    off, on = _ids(q, _cfg()), _ids(q, _cfg(answer_share=0.5))
    assert off.index("a1") > off.index("b0")  # the answer only has its neighbour share
    assert on.index("a1") < on.index("b0")  # the question passes it half its score
    assert on[0] == "a0"


def test_answer_partner_ignores_a_statement_and_the_same_speaker(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("Ann", "The gallery show opened with my paintings."),
        ("Bob", "Nice colours."),
        ("Bob", "Which gallery show?"),
        ("Bob", "Never mind."),
    ]))
    q = "gallery show"
    off, on = _ids(q, _cfg()), _ids(q, _cfg(answer_share=0.5))
    assert on == off  # no '?' before turn 1; turn 3 follows a question by the same speaker


def test_speaker_named_in_the_question_prefers_that_speakers_turns(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("Bob", "Ann, hiking again? Ann and hiking, hiking, Ann."),
        ("Bob", "Sure."),
        ("Bob", "Fine."),
        ("Ann", "Hiking in the hills on weekends is what I like."),
    ]))
    q = "What does Ann think about hiking?"
    assert _ids(q, _cfg())[0] == "0"  # Bob's turn says "Ann" and "hiking" most
    assert _ids(q, _cfg(speaker_boost=1.0))[0] == "3"


def test_speaker_rule_leaves_agent_roles_alone(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("assistant", "The user asked about the cache; the user wants the cache flushed, user request."),
        ("user", "flush the cache"),
    ]))
    q = "what did the user say about the cache"
    assert _ids(q, _cfg(speaker_boost=2.0)) == _ids(q, _cfg())


def test_when_question_prefers_turns_with_time_words(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("Ann", "Climbing, climbing, climbing: climbing is my thing."),
        ("Ann", "I went climbing with my sister yesterday and then we had lunch at the lodge."),
    ]))
    assert _ids("When did Ann go climbing?", _cfg())[0] == "0"
    assert _ids("When did Ann go climbing?", _cfg(time_boost=1.0))[0] == "1"
    # Not a "when" question: the rule does nothing.
    assert _ids("Does Ann like climbing?", _cfg(time_boost=1.0)) == _ids("Does Ann like climbing?", _cfg())


def test_dates_in_the_question_prefer_turns_dated_in_them(tmp_path):
    _import(tmp_path, _turns("may", [("Ann", "Kayaking kayaking on the river, kayaking all day.")],
                             when="2023-05-08T13:56:00Z", prefix="m")
            + _turns("jul", [("Ann", "We went kayaking on the lake with friends.")],
                     when="2023-07-03T10:00:00Z", prefix="j")
            + _turns("aug", [("Ann", "Last week we went kayaking at the coast, a long trip with the whole family.")],
                     when="2023-08-02T10:00:00Z", prefix="a"))
    q = "Where did Ann go kayaking in July 2023?"
    off, on = _ids(q, _cfg()), _ids(q, _cfg(date_boost=1.0))
    assert off[0] == "m0"
    # July 3's turn, and August 2's "last week" (late July), both come before May's.
    assert on.index("j0") < on.index("m0") and on.index("a0") < on.index("m0")
    # Without a date in the question nothing moves.
    assert _ids("Where did Ann go kayaking?", _cfg(date_boost=1.0)) == _ids("Where did Ann go kayaking?", _cfg())


def test_session_then_turn_lifts_the_session_with_most_evidence(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("Ann", "The garden needs tomatoes this year."),
        ("Bob", "Sure."),
        ("Ann", "Tomatoes and basil for the garden."),
        ("Bob", "Fine."),
        ("Ann", "The garden fence keeps rabbits off the tomatoes."),
    ], prefix="a") + _turns("s2", [("Bob", "Garden tomatoes.")], prefix="b"))
    q = "garden tomatoes"
    assert _ids(q, _cfg())[0] == "b0"  # the shortest turn has the best BM25
    assert _ids(q, _cfg(session_boost=2.0))[0].startswith("a")


def test_feedback_terms_bring_in_a_turn_without_query_words(tmp_path):
    _import(tmp_path, _turns("s1", [
        ("Ann", "Our hiking trip went up the granite ridge trail."),
        ("Bob", "The hiking trip on the granite ridge trail was steep."),
        ("Ann", "A hiking trip to remember: granite ridge trail again."),
        ("Bob", "The granite ridge trail view at dawn was unreal."),
    ] + [("Ann", f"Filler line number {i} about lunch and coffee.") for i in range(8)]))
    q = "hiking trip"
    assert "3" not in _ids(q, _cfg(), detail=True)[:3]
    on = _ids(q, _cfg(prf_terms=3, prf_weight=1.0))
    assert "3" in on[:4]


def test_rules_keep_the_coarse_answer_and_scope(tmp_path):
    _import(tmp_path, _turns("s1", [("Ann", "What did you cook?"), ("Bob", "Soup with leeks.")]))
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"session": "x", "seq": 0, "role": "Bob", "text": "What did you cook? Soup.",
                                 "workspace": "elsewhere"}) + "\n", encoding="utf-8")
    svc.import_paths([str(other)], fmt="generic", cfg=_cfg())
    ans = svc.search("What did Bob cook?", workspace="conv", cfg=load_config(overrides={"embedder": {"name": "fake"}}))
    assert ans["hits"] and {h["session"] for h in ans["hits"]} == {"s1"}


# -- the pure parts ---------------------------------------------------------------------------

def test_question_dates():
    assert hr.question_dates("What did Maria do in May 2023?") == [(date(2023, 5, 1), date(2023, 5, 31))]
    assert hr.question_dates("on 7 July, 2023") == [(date(2023, 7, 7), date(2023, 7, 7))]
    assert hr.question_dates("on October 13, 2023") == [(date(2023, 10, 13), date(2023, 10, 13))]
    assert hr.question_dates("camping in June?", years=[2022, 2023]) == [
        (date(2022, 6, 1), date(2022, 6, 30)), (date(2023, 6, 1), date(2023, 6, 30))]
    assert hr.question_dates("what happened in 2022") == [(date(2022, 1, 1), date(2022, 12, 31))]
    assert hr.question_dates("you may want to march on") == []
    assert hr.question_dates("the run of 2024-02-29") == [(date(2024, 2, 29), date(2024, 2, 29))]


def test_turn_dates_resolve_relative_words_from_the_session_day():
    d = date(2023, 7, 3)
    got = hr.turn_dates("I went there yesterday", d)
    assert (d, d) in got and (date(2023, 7, 2), date(2023, 7, 2)) in got
    assert hr.dates_overlap(hr.turn_dates("two months ago we moved", d), [(date(2023, 5, 1), date(2023, 5, 5))])
    assert not hr.dates_overlap(hr.turn_dates("we moved", d), [(date(2023, 5, 1), date(2023, 5, 31))])
    assert hr.turn_dates("yesterday", None) == []


def test_time_words_and_when_questions():
    assert hr.has_time_expression("I went yesterday") and hr.has_time_expression("in May it rained")
    assert not hr.has_time_expression("since it is null you may go")
    assert hr.is_when_question("When did she move?") and hr.is_when_question("What year was it?")
    assert not hr.is_when_question("What did she say when it broke?")


def test_named_speakers():
    assert hr.named_speakers("What is Caroline's identity?", ["Caroline", "Melanie", "user"]) == {"Caroline"}
    assert hr.named_speakers("what did the user ask", ["user", "assistant"]) == set()


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_answer_partner_pure(share):
    turns = {1: hr.Turn(1, "s", 0, "A", "where?"), 2: hr.Turn(2, "s", 1, "B", "here")}
    out = hr.answer_partner({1: 2.0}, turns, {1: 2}, share)
    assert out.get(2, 0.0) == pytest.approx(share * 2.0)

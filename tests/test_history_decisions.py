"""The decision above the question (rank/history_rules.py `decision_boost`): a question about
what was decided, agreed or chosen, or why, finds the turn that states it before the turn
that asked and the tool output that mentions the same words; the coarse answer shows the
block's best-matching line, not its first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.rank import history_query as hq
from dsh_recall.rank import history_rules as hr
from dsh_recall.services import history as svc

# A Claude Code session: the user's question, the agent reading the settings (which name
# the cookie and SameSite over and over) and running a failing test, then the decision and
# its reason on the third line of a longer reply, then other work.
SETTINGS = ("# app/settings.py\nDEBUG = False\nSESSION_COOKIE_SECURE = True\nSESSION_COOKIE_HTTPONLY = True\n"
            "SESSION_COOKIE_SAMESITE = 'Strict'  # session cookie SameSite\nSESSION_COOKIE_AGE = 1209600\n"
            "CSRF_COOKIE_SAMESITE = 'Strict'\nSESSION_COOKIE_NAME = 'sid'  # the session cookie")
DECISION_TEXT = ("I read the provider's callback handling and the Django docs on cookies.\n"
                 "The provider returns with a cross-site top-level POST, which a Strict cookie never rides on.\n"
                 "Decision: we keep SESSION_COOKIE_SAMESITE = 'Lax' because Strict broke the OAuth redirect "
                 "(users landed logged out).\nCSRF stays covered by the CSRF token, so Lax costs nothing there.")
SESSION = [
    ("user", "Login breaks after the OAuth redirect from the identity provider. What SameSite value should "
             "the session cookie use, Strict or Lax?"),
    ("call", ("Read", {"file_path": "app/settings.py"})),
    ("result", SETTINGS),
    ("call", ("Bash", {"command": "pytest tests/test_login.py -q"})),
    ("result", "FAILED tests/test_login.py::test_oauth_callback - AssertionError: no session\n1 failed, 8 passed"),
    ("assistant", DECISION_TEXT),
    ("user", "Good. Now the flaky test in tests/test_payments.py, it fails about one run in ten."),
    ("assistant", "The test compares against the wall clock; I'll freeze time with freezegun so the invoice "
                  "date is fixed."),
    ("call", ("Bash", {"command": "pytest tests/test_payments.py -q"})),
    ("result", "............ 12 passed in 0.84s"),
    ("user", "Thanks. Also bump the requests pin to 2.32."),
    ("assistant", "Done: requirements.txt now pins requests==2.32.3."),
]
CASES = ["what did we decide about SameSite for the session cookie",
         "why did we choose Lax for the session cookie",
         "which SameSite value did we settle on"]


def _claude_code(path: Path) -> Path:
    lines = []
    for k, (kind, body) in enumerate(SESSION):
        base = {"uuid": f"e{k}", "sessionId": "web-1", "cwd": "/src/web",
                "timestamp": f"2025-03-04T10:{k:02d}:00Z"}
        if kind == "user":
            lines.append({**base, "type": "user", "message": {"role": "user", "content": body}})
        elif kind == "assistant":
            lines.append({**base, "type": "assistant",
                          "message": {"role": "assistant", "content": [{"type": "text", "text": body}]}})
        elif kind == "call":
            name, args = body
            lines.append({**base, "type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{k}", "name": name, "input": args}]}})
        else:
            lines.append({**base, "type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{k - 1}", "content": body}]}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


@pytest.fixture
def session(tmp_path, cfg) -> dict[str, int]:
    """Imports the session; returns each event's seq by its uuid."""
    svc.import_paths([str(_claude_code(tmp_path / "proj" / "web-1.jsonl"))], cfg=cfg, embed=True)
    return {e["message_id"]: e["seq"] for e in svc.show("web-1", page=1, page_size=50)["events"]}


def _seqs(query: str, cfg) -> list[int]:
    return [h["start_seq"] for h in svc.search(query, all_sessions=True, detail=True, cfg=cfg)["hits"]]


QUESTION, SETTINGS_READ, SETTINGS_SHOWN, DECIDED = "e0", "e1", "e2", "e5"


@pytest.mark.parametrize("query", CASES)
def test_the_turn_stating_the_decision_ranks_first(session, cfg, query):
    seqs = _seqs(query, cfg)
    assert seqs[0] == session[DECIDED]
    assert seqs.index(session[DECIDED]) < seqs.index(session[QUESTION])  # above the user's question
    assert seqs.index(session[DECIDED]) < seqs.index(session[SETTINGS_SHOWN])  # above the tool output
    ans = svc.search(query, all_sessions=True, detail=True, cfg=cfg)
    assert ans["match"] == "strong" and ans["hits"][0]["match"] == "strong"


def test_without_the_rule_the_tool_output_comes_first(session, cfg):
    seqs = _seqs(CASES[0], _off())
    assert seqs.index(session[DECIDED]) > seqs.index(session[SETTINGS_SHOWN])


def _off():
    return load_config(overrides={"embedder": {"name": "fake"}, "history": {"decision_boost": 0}})


def test_the_config_key_turns_the_rule_off(session):
    assert _seqs(CASES[0], _off())[0] != session[DECIDED]
    assert load_config().history.decision_boost == 0.5


def test_a_question_passes_its_share_past_the_tool_calls_to_the_reply(session):
    def scores(share: float) -> dict[int, float]:
        c = load_config(overrides={"embedder": {"name": "fake"}, "history": {
            "answer_share": share, "speaker_boost": 0, "time_boost": 0, "date_boost": 0, "session_boost": 0}})
        hits = svc.search("identity provider redirect", all_sessions=True, detail=True, layers=["literal"], cfg=c)["hits"]
        return {h["start_seq"]: h["score"] for h in hits}

    off, on = scores(0.0), scores(0.5)
    assert on[session[DECIDED]] > off.get(session[DECIDED], 0.0)  # the reply, four blocks on
    assert on.get(session[SETTINGS_READ], 0.0) == off.get(session[SETTINGS_READ], 0.0)  # not the tool call


def test_a_question_that_asks_no_decision_is_ranked_as_before(session, cfg):
    query = "session cookie SameSite settings"
    assert _seqs(query, _off()) == _seqs(query, cfg)


def test_the_coarse_snippet_is_the_decision_line(session, cfg):
    ans = svc.search(CASES[0], all_sessions=True, cfg=cfg)
    top = ans["hits"][0]
    assert top["role"] == "assistant" and top["match"] == "strong"
    assert top["snippet"].startswith("…Decision: we keep SESSION_COOKIE_SAMESITE = 'Lax' because")


def test_eval_of_decision_cases(session, tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"source": "history", "query": q, "session": "web-1",
                                         "seqs": [session[DECIDED]]}) + "\n" for q in CASES), encoding="utf-8")
    r = CliRunner().invoke(cli, ["eval", str(cases), "--json"])
    assert r.exit_code == 0, r.output
    scores = json.loads(r.output)["by_source"]["history"]
    assert scores["cases"] == len(CASES) and scores["hit@1"] == 1.0 and scores["mrr"] == 1.0


@pytest.mark.parametrize("query, asks", [
    ("what did we decide about SameSite", True), ("why is the build slow", True),
    ("which ORM did we choose", True), ("what was agreed with the vendor", True),
    ("how did we settle the pool size", True), ("what did we go with for caching", True),
    ("session cookie SameSite", False), ("when did the deploy fail", False),
])
def test_asks_decision(query, asks):
    assert hr.asks_decision(query) is asks


@pytest.mark.parametrize("role, kind, text, states", [
    ("assistant", "text", "Decision: we keep Lax.", True),
    ("assistant", "text", "We'll go with PostgreSQL for the ledger.", True),
    ("user", "text", "ok, agreed, Lax it is", True),
    ("Caroline", "text", "I chose adoption because I want to give a kid a home.", True),
    ("assistant", "text", "I set it to Lax; Strict broke the redirect, that's why.", True),
    ("user", "text", "Why did we pick Lax? Because of the redirect?", False),
    ("user", "text", "We need to decide the pool size soon.", False),
    ("tool", "text", "[bash result] decided: because the lock was held", False),
    ("assistant", "tool_result", "[read result] # decided because of CVE-2024-1", False),
    ("assistant", "tool_call", "[tool call] bash {\"command\": \"echo decided\"}", False),
])
def test_states_decision(role, kind, text, states):
    assert hr.states_decision(hr.Turn(1, "s", 0, role, text, kind=kind)) is states


def test_snippet_starts_at_the_best_matching_line():
    text = "Checked the docs.\nThe pool is shared by the workers.\nDecision: pool size 20 for the ledger.\nDone."
    assert hq.best_line(text, ["pool", "ledger"]) == 2  # "pool" alone is on two lines
    assert hq.snippet(text, ["pool", "ledger"], 600) == "…Decision: pool size 20 for the ledger. Done."
    assert hq.snippet(text, ["nothing"], 600) == " ".join(text.split())  # no line holds the query
    assert hq.snippet("one line about the pool", ["pool"], 600) == "one line about the pool"
    assert hq.best_line(text, []) == 0
    assert len(hq.snippet(text, ["ledger"], 20)) <= 20

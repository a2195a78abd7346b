"""The auto-recall gate: a pure function, tested on plain data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.policy.gate import (
    TTL_AFTER_RESTORE,
    TTL_TURNS,
    GateState,
    gate,
    is_process_command,
    past_reference,
    referring_segments,
    vocabulary,
)
from fixtures import eval_set

OLDER = vocabulary([
    "Let's add a retry decorator to fetch_orders with exponential backoff.",
    "We decided the cache TTL stays at 300 seconds.",
    "数据库迁移方案：先在预发环境升级，再切流量。",
])
PREV = referring_segments("I renamed parse_date to parse_timestamp in billing.")


@pytest.mark.parametrize("msg,restore", [
    ("continue", False), ("Please continue.", False), ("ok, go on", False),
    ("I restarted the session, continue", True), ("resume", True), ("继续", False),
    ("继续吧", False), ("我重启了", True), ("我回来了，继续", True),
])
def test_process_commands_fire_with_the_previous_turn(msg: str, restore: bool) -> None:
    d = gate(msg, OLDER, PREV)
    assert d.fire and d.kind == "process"
    assert "parse_timestamp" in d.query_terms
    assert d.ttl == (TTL_AFTER_RESTORE if restore else TTL_TURNS)


@pytest.mark.parametrize("msg", [
    "continue the loop when the value is None instead of raising",
    "How do I resume a paused docker container?",
    "继续优化一下这个查询的性能，加上索引",
    "Remember to run black before committing.",
    "Hey, what's up? Busy week since we talked.",
])
def test_ordinary_messages_stay_quiet(msg: str) -> None:
    assert not gate(msg, OLDER, PREV).fire


def test_past_reference_needs_its_referent_in_older_turns() -> None:
    hit = gate("As we discussed, add the retry decorator to fetch_orders.", OLDER, PREV)
    assert hit.fire and hit.kind == "past_reference" and "retry" in hit.matched
    miss = gate("As we discussed, add the Kafka consumer for audit events.", OLDER, PREV)
    assert not miss.fire and miss.kind == "past_reference"
    zh = gate("之前说的数据库迁移方案是什么？", OLDER, PREV)
    assert zh.fire and "迁移" in zh.matched
    zh_miss = gate("之前说的消息队列用哪个？", OLDER, PREV)
    assert not zh_miss.fire


def test_no_refire_while_an_injection_is_live_then_expiry() -> None:
    d = gate("continue", OLDER, PREV, GateState(turn=5))
    until = d.expires_after(5)
    assert until == 5 + TTL_TURNS - 1
    assert not gate("continue", OLDER, PREV, GateState(turn=6, live_until=until)).fire
    assert gate("continue", OLDER, PREV, GateState(turn=until + 1, live_until=until)).fire


def test_no_previous_turn_means_nothing_to_recall() -> None:
    assert not gate("continue", OLDER, ()).fire


def test_wording_detection_skips_greetings_and_imperatives() -> None:
    assert past_reference("Remenber the festival I told you about?") is not None
    assert past_reference("Been a busy week since we talked.") is None
    assert past_reference("Just remember that stumbling blocks can be doors.") is None
    assert past_reference("记得吗，我们上次改了登录超时") is not None
    assert is_process_command("go ahead and delete the unused imports")[0] is False


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_gate_is_total_and_deterministic(msg: str) -> None:
    a = gate(msg, OLDER, PREV)
    b = gate(msg, OLDER, PREV)
    assert a == b
    if a.fire:
        assert a.ttl in (TTL_TURNS, TTL_AFTER_RESTORE) and a.query_terms


def test_bench_script_reports_coverage_and_false_positive_rate() -> None:
    root = Path(__file__).resolve().parents[1]
    locomo = eval_set("locomo-dev")
    out = subprocess.run([sys.executable, str(root / "bench" / "gate_eval.py"), "--json",
                          "--locomo", str(locomo)], capture_output=True, text=True, check=True)
    table = json.loads(out.stdout)["table"]
    assert table["all"]["fire_items"] >= 30 and table["all"]["quiet_items"] >= 100
    # The referent check must beat wording alone on false positives without losing coverage.
    assert table["all"]["fp_rate"] <= table["all"]["baseline_fp_rate"]
    assert table["all"]["coverage"] >= 0.8 and table["all"]["fp_rate"] <= 0.1

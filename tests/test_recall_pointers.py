"""The pointers the auto-recall block and the compaction anchor hand the model resolve under
either MCP tool profile: the compact `recall` dsh mounts, and the full tool set."""

from __future__ import annotations

import re

import jsonschema

from dsh_recall.frontends.mcp import compact
from dsh_recall.frontends.mcp.tools import ALL_TOOLS
from dsh_recall.policy.anchor import Anchor, Fragment
from dsh_recall.services.recall import RecallService

SESSION = "2026-12-01T10-00-00-abc"
FULL = {t.name: t for t in ALL_TOOLS}


def _follow(text: str) -> None:
    m = re.search(r'recall id="([^"]+)"', text)
    assert m, text
    got = compact.plan({"id": m.group(1).replace("<seq>", "7")})
    assert got.tool == "history_detail" and got.args["session"] == SESSION and got.args["around"] == 7
    m = re.search(r'(\w+) session="([^"]+)" around=<seq>', text)
    assert m and m.group(1) in FULL, text
    jsonschema.validate({"session": m.group(2), "around": 7}, FULL[m.group(1)].input_schema)
    assert "with the full tool set" not in text  # the old pointer named no call of either


def test_the_anchor_points_to_calls_both_profiles_offer():
    text = Anchor(SESSION, "We chose port 8431.", (Fragment(3, "user", "pick a port", 11),)).render()
    _follow(text)
    m = re.search(r"recall source=(\w+) \(full tool set: (\w+)\)", text)
    assert m and m.group(2) in FULL, text
    assert compact.plan({"query": "port", "source": m.group(1)}).tool == m.group(2)


def test_the_auto_recall_block_points_to_calls_both_profiles_offer():
    hit = {"start_seq": 4, "end_seq": 5, "role": "assistant", "snippet": "port 8431 it is"}
    _follow(RecallService._render_hits(object.__new__(RecallService), SESSION, "refers back",
                                       {"hits": [hit]}))

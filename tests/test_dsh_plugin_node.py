"""plugin.mjs on its own, under Node with a fake cordis context and a fake worker that
misbehaves on purpose (tests/fixtures/dsh_plugin): whatever the worker does, every hook
settles with dsh's own result, and each kind of trouble is logged once.

Needs `node` on PATH; skipped otherwise, with that reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_recall.frontends.dsh import PLUGIN_PATH

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH")
FIX = Path(__file__).parent / "fixtures" / "dsh_plugin"
BIG = "x" * 5000


def run(mode: str, script: list[dict], **config) -> dict:
    cfg = {"command": sys.executable, "args": [str(FIX / "fake_worker.py")],
           "env": {"FAKE_MODE": mode}, "callTimeoutMs": 400, "startTimeoutMs": 5000, **config}
    out = subprocess.run([NODE, str(FIX / "harness.mjs"), PLUGIN_PATH.as_uri(), json.dumps(cfg),
                          json.dumps(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_results_are_replaced_and_the_section_is_literal():
    r = run("ok", [{"post": {"name": "bash", "blocks": [BIG, {"type": "image"}, "small"]}},
                   {"post": {"name": "read", "blocks": [BIG]}},
                   {"post": {"name": "mcp__recall__object_recall", "blocks": [BIG]}},
                   {"assemble": {"message": "as we discussed"}}])
    bash, read, recall, assembled = r["results"]
    assert bash["post"] == ["SHORT(5000)", "image", "small"]  # images and small text untouched
    assert read["post"] is None and recall["post"] is None  # read-like and our own recall tool
    section = assembled["sections"][-1]
    assert section["name"] == "dsh-recall:context" and section["interpolate"] is False
    assert section["text"] == "RECALLED {{not_a_variable}} for as we discussed"
    assert r["warnings"] == []


def test_a_hanging_worker_costs_one_deadline_then_results_pass_through():
    r = run("hang", [{"post": {"name": "bash", "blocks": [BIG]}},
                     {"post": {"name": "bash", "blocks": [BIG]}},
                     {"assemble": {"message": "hello"}}])
    first, second, assembled = r["results"]
    assert first["post"] is None and second["post"] is None  # dsh's own result both times
    assert [s["name"] for s in assembled["sections"]] == ["harness:identity"]
    assert len(r["warnings"]) == 1 and "offload took over" in r["warnings"][0]


def test_a_dying_worker_is_restarted_once_then_left_alone():
    r = run("die", [{"assemble": {"message": "one"}}, {"post": {"name": "bash", "blocks": [BIG]}},
                    {"wait": 300}, {"assemble": {"message": "two"}}, {"wait": 300},
                    {"post": {"name": "bash", "blocks": [BIG]}}, {"assemble": {"message": "three"}}])
    assert all(x.get("post") is None for x in r["results"] if "post" in x)
    assert all(len(x["sections"]) == 1 for x in r["results"] if "sections" in x)
    died = [w for w in r["warnings"] if "worker exited" in w]
    assert len(died) == 2, r["warnings"]
    assert "until the next request restarts it" in died[0] and "giving up" in died[1]


def test_a_missing_python_is_logged_once_and_changes_nothing():
    r = run("ok", [{"post": {"name": "bash", "blocks": [BIG]}}, {"assemble": {"message": "x"}},
                   {"post": {"name": "bash", "blocks": [BIG]}}],
            command="/nonexistent/dsh-recall", args=["worker"])
    assert [x.get("post") for x in r["results"] if "post" in x] == [None, None]
    assert all(w.startswith("dsh-recall worker could not run") for w in r["warnings"])
    assert 1 <= len(r["warnings"]) <= 2  # the first start and the one restart


def test_worker_errors_and_garbage_lines_pass_through_and_unknown_keys_are_named():
    r = run("error", [{"post": {"name": "bash", "blocks": [BIG]}},
                      {"post": {"name": "bash", "blocks": [BIG]}}], colour="blue")
    assert [x["post"] for x in r["results"]] == [None, None]
    assert any("unknown config keys ignored: colour" in w for w in r["warnings"])
    assert sum("offload failed: boom" in w for w in r["warnings"]) == 1
    g = run("garbage", [{"post": {"name": "bash", "blocks": [BIG]}}])
    assert g["results"][0]["post"] == ["SHORT(5000)"]

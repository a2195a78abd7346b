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
from procs import gone_within

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH (apt-get install -y nodejs)")
FIX = Path(__file__).parent / "fixtures" / "dsh_plugin"
BIG = "x" * 5000


def run(mode: str, script: list[dict], **config) -> dict:
    cfg = {"command": sys.executable, "args": [str(FIX / "fake_worker.py")],
           "env": {"FAKE_MODE": mode}, "callTimeoutMs": 400, "startTimeoutMs": 1500, **config}
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
    # The recalled block follows the user's message as a message of its own kind, once.
    user, added = assembled["messages"]
    assert user == {"kind": "user", "text": "as we discussed"}
    assert added == {"kind": "dsh-recall", "text": "HEADER\n\nRECALLED {{not_a_variable}} for as we discussed"}
    assert r["warnings"] == []


def test_a_block_already_in_the_conversation_is_not_added_again():
    r = run("ok", [{"assemble": {"message": "same"}}, {"assemble": {"message": "same"}},
                   {"assemble": {"message": "other"}}])
    first, second, third = (x["messages"] for x in r["results"])
    assert [m["kind"] for m in first] == ["user", "dsh-recall"]
    assert [m["kind"] for m in second] == ["user"]  # the same block: it is there already
    assert [m["kind"] for m in third] == ["user", "dsh-recall"] and "for other" in third[1]["text"]


def test_a_hanging_worker_costs_one_deadline_then_results_pass_through():
    r = run("hang", [{"post": {"name": "bash", "blocks": [BIG]}},
                     {"post": {"name": "bash", "blocks": [BIG]}},
                     {"assemble": {"message": "hello"}}])
    first, second, assembled = r["results"]
    assert first["post"] is None and second["post"] is None  # dsh's own result both times
    assert [m["kind"] for m in assembled["messages"]] == ["user"]
    assert len(r["warnings"]) == 1 and "offload took over" in r["warnings"][0]


def test_a_deadline_out_of_range_falls_back_to_the_default_and_says_so():
    # D7: Node fires a timer over 2^31-1 ms after 1 ms: every call "timed out" at once and
    # every big result reached the model whole. A hand-written patch's out-of-range value
    # (the card's save is refused by the schema's maximum) is replaced by the default.
    r = run("ok", [{"post": {"name": "bash", "blocks": [BIG]}}], callTimeoutMs=3_000_000_000,
            hangMs=-5, minChars="many")
    assert r["results"][0]["post"] == ["SHORT(5000)"], r  # answered: a real deadline, not 1 ms
    bad = [w for w in r["warnings"] if "config values out of range" in w]
    assert len(bad) == 1 and "callTimeoutMs 3000000000 (allowed 50-60000; using 1500)" in bad[0], r["warnings"]
    assert "hangMs -5" in bad[0] and 'minChars "many"' in bad[0]


def test_a_dying_worker_is_restarted_once_then_left_alone():
    r = run("die", [{"assemble": {"message": "one"}}, {"post": {"name": "bash", "blocks": [BIG]}},
                    {"wait": 300}, {"assemble": {"message": "two"}}, {"wait": 300},
                    {"post": {"name": "bash", "blocks": [BIG]}}, {"assemble": {"message": "three"}}])
    assert all(x.get("post") is None for x in r["results"] if "post" in x)
    assert all(len(x["messages"]) == 1 for x in r["results"] if "messages" in x)
    died = [w for w in r["warnings"] if "worker exited" in w]
    assert len(died) == 2, r["warnings"]
    assert "until the next request restarts it" in died[0] and "giving up" in died[1]


def test_a_dead_worker_is_restarted_at_the_next_request_with_auto_recall_off():
    # D10: the restart lived inside auto-recall; with it off, a killed worker stayed dead and
    # every big result reached the model whole.
    r = run("die", [{"post": {"name": "bash", "blocks": [BIG]}}, {"wait": 300},
                    {"assemble": {"message": "next turn"}}, {"wait": 300},
                    {"post": {"name": "bash", "blocks": [BIG]}}], autoRecall=False)
    died = [w for w in r["warnings"] if "worker exited" in w]
    assert len(died) == 2 and "giving up" in died[1], r["warnings"]  # it was started again


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


# -- worker health: reported where a user looks, never a long wait, never an orphan ----------

def _status(home: Path) -> dict:
    return json.loads((home / "dsh" / "plugin-status.json").read_text())


def test_a_worker_that_never_gets_ready_costs_the_first_request_at_most_its_start_deadline(tmp_path):
    r = run("silent", [{"assemble": {"message": "first"}}, {"post": {"name": "bash", "blocks": [BIG]}},
                       {"assemble": {"message": "second"}}],
            env={"FAKE_MODE": "silent", "DSH_RECALL_HOME": str(tmp_path)})
    first, post, second = r["results"]
    # The worker starts when the plugin loads; the first request waits out what is left of
    # the start deadline (1,500 ms by default), later ones pass through at once.
    assert first["ms"] <= 2000 and post["ms"] < 500 and second["ms"] < 500, r["results"]
    assert post["post"] is None and [m["kind"] for m in second["messages"]] == ["user"]
    assert any("no ready line" in w for w in r["warnings"]), r["warnings"]
    st = _status(tmp_path)
    assert st["state"] == "starting" and "no ready line" in st["reason"]
    assert any("no ready line" in w["message"] for w in st["warnings"])


def test_a_hung_worker_costs_one_call_deadline_and_says_so_in_the_status_file(tmp_path):
    r = run("hangall", [{"assemble": {"message": "first"}}, {"post": {"name": "bash", "blocks": [BIG]}},
                        {"assemble": {"message": "second"}}],
            env={"FAKE_MODE": "hangall", "DSH_RECALL_HOME": str(tmp_path)}, callTimeoutMs=1500)
    first, post, second = r["results"]
    assert first["ms"] <= 2000 and post["ms"] < 500 and second["ms"] < 500, r["results"]
    assert len(r["warnings"]) == 1 and "context took over 1" in r["warnings"][0], r["warnings"]
    st = _status(tmp_path)
    assert st["state"] == "slow" and st["late"] == {"context": 1}, st  # the others never waited


def test_small_results_never_reach_the_worker(tmp_path):
    # The fake worker's context answer names threshold 1000: after a request, a 900-char
    # result is not sent (a hanging offload would otherwise cost the call deadline).
    r = run("hang", [{"assemble": {"message": "hi"}}, {"post": {"name": "bash", "blocks": ["y" * 900]}},
                     {"post": {"name": "bash", "blocks": ["y" * 900]}}])
    assert [x["post"] for x in r["results"][1:]] == [None, None]
    assert all(x["ms"] < 300 for x in r["results"][1:]) and r["warnings"] == []


def test_no_worker_outlives_the_dsh_process(tmp_path):
    pid_file = tmp_path / "pid"
    run("hangall", [{"wait": 300}, {"exit": True}],
        env={"FAKE_MODE": "hangall", "FAKE_PID_FILE": str(pid_file), "DSH_RECALL_HOME": str(tmp_path)})
    assert gone_within(int(pid_file.read_text())), "the worker outlived the dsh process by 5 s"

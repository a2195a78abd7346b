"""The dsh browser half (frontends/dsh/client/client.js) under plain Node, fast: a stub React,
stub slots, configForms and locale (tests/node/client_bundle.mjs). It checks the contract
(slot names and keys, guarded registration, the test flag) and what each view says for
given figures; rendering and host wiring are tests/test_dsh_web.py's (real runtime, real
Chromium).

Needs `node` (Debian's nodejs; .ci/run installs it and sets RECALL_REQUIRE_NODE=1, so it
cannot skip in CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_recall.frontends.dsh import PLUGIN_PATH

NODE = shutil.which("node")
BUNDLE = PLUGIN_PATH.parent / "client" / "client.js"
SCRIPT = Path(__file__).parent / "node" / "client_bundle.mjs"
HOST = Path(__file__).parent / "node" / "host_stats.mjs"
HOST_RECALLING = Path(__file__).parent / "node" / "host_recalling.mjs"
FAKE_WORKER = Path(__file__).parent / "fixtures" / "dsh_plugin" / "fake_worker.py"


def _node(*args: str) -> dict:
    if NODE is None:
        if os.environ.get("RECALL_REQUIRE_NODE") == "1":
            pytest.fail("node is required here (apt-get install -y nodejs)")
        pytest.skip("node is not on PATH (apt-get install -y nodejs)")
    out = subprocess.run([NODE, *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(flag: str = "") -> dict:
    return _node(str(SCRIPT), str(BUNDLE), flag)


def test_every_surface_registers_under_its_slot_and_key():
    r = run()
    assert r["slots"] == ["plugins.item:recall-native", "plugins.bundle.config:dsh-recall",
                          "conversation.session.header.utilities:dsh-recall-chip",
                          "sidebar.footer.action:dsh-recall-strip", "sidebar.right.pane.tab:dsh-recall/recall",
                          "sidebar.right.pane.tab.title:dsh-recall/recall"]
    # Services the stub lacks (the sidebar's, the settings remote) cost only their own part.
    assert r["failures"] == ["remote", "sidebar"]


def test_the_views_say_what_the_figures_are_and_nothing_when_there_is_nothing():
    r = run()
    assert r["chip"] == "Recall 3 · 40× · 117 KB kept out"
    assert r["chipOther"] is None  # a conversation with no offload: no chip
    assert r["chipLedger"] == "Recall 1 · 22,556 tokens kept out"
    assert r["strip"] == "All conversations: 3 offloads · 29,250 tokens kept out · 9 hits · 12.0 MB on disk · running"
    assert r["strip_one"].startswith("All conversations: 1 offload · 1 token kept out · 1 hit · ")
    assert r["stripDone"].endswith("· Recall complete")
    assert r["stripDegraded"].endswith("degraded: a worker call took over its deadline")
    assert r["stripDegradedTone"] == "degraded:true"  # a dead worker's dot and words in the error colour
    assert r["stripUnloaded"] is None  # no route (sdk / headless host half): no strip
    assert r["bool"] == [{"kind": "set", "value": False}, None]
    # On the sidebar's 56 px rail: the health dot alone, the figures in its title.
    assert r["stripRail"] == {"text": "", "title": r["strip"], "wide": "false"}
    # A figure and its unit never break apart ("107 KB" on two lines).
    assert r["stripNowrap"] == [True, True] and r["chipNowrap"] == "nowrap"


def test_the_sweep_uses_the_runtimes_text_shimmer_a_memo_object():
    # D2: dsh's TextShimmer is React.memo(...), an object; the stub is one too.
    r = run()
    assert r["renderable"] == [True, True, False, False]
    assert r["stripBusy"]["shimmer"] and r["stripBusy"]["text"].endswith("Recalling…")


def test_words_go_through_the_runtimes_locale():
    r = run()
    assert r["zhKeys"] == []  # every English string has its Chinese one
    assert r["stripZh"] == "全部会话： 3 次卸载 · 省下 29,250 个 token · 9 次命中 · 磁盘占用 12.0 MB · 运行中"


def test_a_refusal_names_its_field_and_says_the_reason_in_words():
    r = run()
    assert r["refusal"] == {"field": "callTimeoutMs", "reason": "Must be at least 50."}
    assert r["refusalMax"] == {"field": "hangMs", "reason": "Must be at most 3,600,000."}
    assert r["refusalOther"]["field"] is None and "overridden by a home patch" in r["refusalOther"]["reason"]


def test_a_throw_inside_apply_is_contained():
    r = run("apply")
    assert r["failures"][0] == "test flag" and len(r["slots"]) == 6


def test_the_secret_badge_reads_the_runtimes_set_flag():
    r = run()
    # The settings document's `secrets[].set` (the value itself is never on the wire).
    assert r["secretSet"] == {"set": "true", "text": "Embedding endpoint key Set "}
    assert r["secretUnset"] == {"set": "false", "text": "Embedding endpoint key Not set "}
    assert r["secretRegistered"] is True  # the card apply() registers reads the service's mirror


def test_the_poller_sweeps_while_the_host_says_recalling_then_says_complete():
    r = run()
    # A recall seen running, then over; then a quiet spell; then one that ran between two
    # answers: "Recall complete" without a sweep (nothing was seen running).
    assert r["sweep"] == ["idle", "sweep", "complete", "idle", "complete"]
    # A long poll: each request carries what the last answer said (recalling:lastDoneAt).
    assert r["urls"] == ["api/dsh-recall/stats", "api/dsh-recall/stats?wait=0%3A0", "api/dsh-recall/stats?wait=1%3A0",
                         "api/dsh-recall/stats?wait=0%3A100", "api/dsh-recall/stats?wait=0%3A100"]


def test_the_stats_route_says_recalling_for_the_auto_recall_call_only_from_start_to_end():
    # D6: an offload is no recall (the route said `recalling` for 3 s after any call); the
    # turn's auto-recall is, exactly while it runs, and a long poll hears its start and end.
    cfg = {"command": sys.executable, "args": [str(FAKE_WORKER)], "env": {"FAKE_MODE": "ok", "FAKE_CONTEXT_SLEEP": "0.5"},
           "callTimeoutMs": 5000, "startTimeoutMs": 5000}
    r = _node(str(HOST_RECALLING), PLUGIN_PATH.as_uri(), json.dumps(cfg))
    assert r["before"]["recalling"] is False
    assert r["afterOffload"]["recalling"] is False and r["afterOffload"]["lastDoneAt"] == 0
    assert r["atStart"]["recalling"] is True and r["during"]["recalling"] is True
    assert r["atEnd"]["recalling"] is False and r["atEnd"]["lastDoneAt"] > 0
    assert r["added"] == 2  # the recall's message was added to the step
    assert r["quiet"]["recalling"] is False and r["quiet"]["lastDoneAt"] == r["atEnd"]["lastDoneAt"]
    assert r["order"][0] == "start-answered"  # the long poll answered when the recall started


def test_a_dead_worker_shows_no_sweep_and_no_recall_complete():
    # D9: after the worker died (here: on its first request) a call is answered by no one;
    # the strip must not sweep "Recalling…" and then say "Recall complete" for it.
    cfg = {"command": sys.executable, "args": [str(FAKE_WORKER)], "env": {"FAKE_MODE": "die"},
           "callTimeoutMs": 1000, "startTimeoutMs": 3000}
    r = _node(str(HOST), PLUGIN_PATH.as_uri(), json.dumps(cfg))
    assert r["later"]["recalling"] is False and r["later"]["health"] in ("dead", "disabled"), r["later"]
    assert r["afterDead"]["recalling"] is False and r["afterDead"]["busy"] == 0, r["afterDead"]
    assert r["afterDead"]["lastDoneAt"] == r["later"]["lastDoneAt"]

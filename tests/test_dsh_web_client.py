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
                          "shell.overlay:dsh-recall-strip", "sidebar.right.pane.tab:dsh-recall/recall",
                          "sidebar.right.pane.tab.title:dsh-recall/recall"]
    # Services the stub lacks (the sidebar's, the settings remote) cost only their own part.
    assert r["failures"] == ["remote", "sidebar"]


def test_the_views_say_what_the_figures_are_and_nothing_when_there_is_nothing():
    r = run()
    assert r["chip"] == "Recall 3 · 40× · 117 KB kept out"
    assert r["chipOther"] is None  # a conversation with no offload: no chip
    assert r["strip"] == "3 offloads · 29,250 tokens kept out · 9 hits · 12.0 MB on disk · running"
    assert r["strip_one"].startswith("1 offload · 1 token kept out · 1 hit · ")
    assert r["stripBusy"]["shimmer"] and r["stripBusy"]["text"].endswith("Recalling…")
    assert r["stripDone"].endswith("· Recall complete")
    assert r["stripDegraded"].endswith("degraded: a worker call took over its deadline")
    assert r["stripUnloaded"] is None  # no route (sdk / headless host half): no strip
    assert r["bool"] == [{"kind": "set", "value": False}, None]


def test_a_throw_inside_apply_is_contained():
    r = run("apply")
    assert r["failures"][0] == "test flag" and len(r["slots"]) == 6


def test_the_secret_badge_reads_the_runtimes_set_flag():
    r = run()
    # The settings document's `secrets[].set` (the value itself is never on the wire).
    assert r["secretSet"] == {"set": "true", "text": "Embedding endpoint key Set "}
    assert r["secretUnset"] == {"set": "false", "text": "Embedding endpoint key Not set "}
    assert r["secretRegistered"] is True  # the card apply() registers reads the service's mirror


def test_a_call_between_two_polls_still_shows_its_sweep_then_complete():
    r = run()
    assert r["sweep"][:3] == ["idle", "sweep", "complete"]


def test_the_stats_route_says_recalling_for_a_while_after_a_quick_call():
    cfg = {"command": sys.executable, "args": [str(FAKE_WORKER)], "env": {"FAKE_MODE": "ok"},
           "callTimeoutMs": 1000, "startTimeoutMs": 3000}
    r = _node(str(HOST), PLUGIN_PATH.as_uri(), json.dumps(cfg))
    assert r["before"]["recalling"] is False
    assert r["callMs"] < 1000
    # Over, and still `recalling` one poll (1.5 s) later; not for ever.
    assert r["afterPoll"]["busy"] == 0 and r["afterPoll"]["recalling"] is True
    assert r["afterPoll"]["lastDoneAt"] > 0
    assert r["later"]["recalling"] is False


def test_a_dead_worker_shows_no_sweep_and_no_recall_complete():
    # D9: after the worker died (here: on its first request) a call is answered by no one;
    # the strip must not sweep "Recalling…" and then say "Recall complete" for it.
    cfg = {"command": sys.executable, "args": [str(FAKE_WORKER)], "env": {"FAKE_MODE": "die"},
           "callTimeoutMs": 1000, "startTimeoutMs": 3000}
    r = _node(str(HOST), PLUGIN_PATH.as_uri(), json.dumps(cfg))
    assert r["later"]["recalling"] is False and r["later"]["health"] in ("dead", "disabled"), r["later"]
    assert r["afterDead"]["recalling"] is False and r["afterDead"]["busy"] == 0, r["afterDead"]
    assert r["afterDead"]["lastDoneAt"] == r["later"]["lastDoneAt"]

"""The native dsh plugin inside the real DeepSeek Harness runtime, offline.

Each test runs real turns through `deepseek_harness` with the patch `integrate dsh patch`
writes (MCP server + native plugin), against a scripted stand-in model endpoint on loopback
(tests/dsh_standin.py), and checks what the stand-in received:

- the reaper: a `bash` call printing ~112 KB reaches the next request as head + pointer +
  tail (dsh alone sends ~50,000 chars); the object holds the whole output; history finds a
  middle line;
- auto-recall: "as we discussed, what port did we pick?" brings the turn that set it into
  the next request's system prompt, an unrelated message brings nothing; a relevant note
  brings a notes block; after a compaction the anchor joins the system prompt;
- the worker killed mid-turn: the turn completes with dsh's own output, and the worker is
  back for the next turn.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_recall.frontends.cli.integrate import dsh_patch
from dsh_recall.frontends.dsh.worker import HEADER
from dsh_standin import (
    dsh_session,
    last_is_tool_result,
    last_user_text,
    overflow,
    recall_exe,
    results,
    runtime_available,
    say,
    session_events,
    system_text,
    use,
)
from procs import gone_within

pytestmark = pytest.mark.slow

_why = runtime_available()
if _why:
    pytest.skip(_why, allow_module_level=True)

BIG_LINES = 2000
MIDDLE = "line 01000"


def _big_script(tmp: Path) -> str:
    """A command printing ~112 KB: numbered lines, each with a checksum-like tail."""
    script = tmp / "big.py"
    script.write_text(f"for i in range({BIG_LINES}):\n"
                      "    print(f'line {i:05d} ' + 'abcdefghij' * 4 + f' {i * 37 % 1000:03d}')\n")
    return f"{sys.executable} {script}"


def _patch(env: dict[str, str]) -> str:
    home = os.environ["DSH_RECALL_HOME"]  # this test's own recall home (conftest)
    # The full tool profile: these tests call object_recall and status by name.
    return dsh_patch(command=recall_exe(), tools="full", env={"DSH_RECALL_HOME": home,
                                                "DSH_RECALL_EMBEDDER__NAME": "fake", **env})


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([recall_exe(), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DSH_RECALL_EMBEDDER__NAME": "fake"})


def test_reaper_offloads_a_big_bash_result_and_everything_gets_it_back(tmp_path):
    command = _big_script(tmp_path)

    def brain(body):
        got = results(body)
        if last_is_tool_result(body):
            m = re.search(r"to object ([0-9a-f]{8})", got.get("toolu_big", ""))
            if m and "toolu_recall" not in got:  # the model asks for a middle line back
                return use("mcp__recall__object_recall", {"id": m.group(1), "query": MIDDLE},
                           "toolu_recall")
            if "toolu_recall" in got and "toolu_status" not in got:
                return use("mcp__recall__status", {}, "toolu_status")
            return say("done")
        if "print" in last_user_text(body):
            return use("bash", {"description": "print a lot", "command": command}, "toolu_big")
        return say("ok")

    with dsh_session(tmp_path, brain, _patch({})) as (session, standin, dsh_home):
        assert session.run("print a lot please").final_response == "done"
        session.run("thanks")  # the next request imports the session into history first

    after = next(b for b in standin.requests if "toolu_big" in results(b))
    shown = results(after)["toolu_big"]
    assert len(shown) < 20_000, len(shown)  # dsh alone: ~50,000 (test_worker_killed_...)
    obj = re.search(r"to object ([0-9a-f]{8})", shown).group(1)
    assert shown.startswith("line 00000 ") and "line 01999 " in shown  # head + tail of it all
    assert MIDDLE not in shown
    # The pointer is also what the session log keeps (the model never saw more).
    logged = [e for e in session_events(dsh_home) if e["type"] == "tool/result"
              and e["data"]["message"].get("toolCallId") == "toolu_big"]
    assert logged and f"to object {obj}" in json.dumps(logged[0])
    # The model's own recall call, through the MCP server mounted by the same patch.
    recalled = next(results(b)["toolu_recall"] for b in standin.requests if "toolu_recall" in results(b))
    assert MIDDLE in recalled and "112000 chars" in recalled
    # The object holds the whole output, dsh's 64 KB cut undone: its first line too.
    got = _cli("object", "get", obj, "--start", "0", "--count", "24000", "--json")
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert data["total"] == 112_000 and data["text"].startswith("line 00000 ")
    middle = _cli("object", "get", obj, "--start", "56000", "--count", "2000", "--json")
    assert json.loads(middle.stdout)["text"].startswith(MIDDLE)
    # The status tool shows what the plugin did and what it costs on disk.
    status = next(results(b)["toolu_status"] for b in standin.requests if "toolu_status" in results(b))
    assert "dsh_plugin" in status and "disk_bytes" in status and "offloads" in status
    # History finds a line from the middle, although the log only holds the pointer.
    hist = _cli("history", "search", MIDDLE, "--session", session.id, "--json")
    assert hist.returncode == 0, hist.stderr
    hits = json.loads(hist.stdout)["hits"]
    assert hits and any(MIDDLE in h["snippet"] for h in hits), hits
    # The model's own recall call and its answer hold that line too: the tool result itself
    # must be found, put back from its object when the session was imported.
    detail = _cli("history", "search", MIDDLE, "--session", session.id, "--detail", "--json")
    assert detail.returncode == 0, detail.stderr
    found = json.loads(detail.stdout)["hits"]
    assert any(f"offloaded:{obj}" in h.get("flags", []) for h in found), found


def _texts(body: dict) -> list[str]:
    return [c.get("text", "") for m in body.get("messages") or [] if isinstance(m.get("content"), list)
            for c in m["content"] if isinstance(c, dict) and c.get("type") == "text"]


def _blocks_in(standin, marker: str) -> list[str]:
    """What dsh-recall added after the user text holding `marker`, in each request of that
    turn's first step."""
    out = []
    for b in standin.requests:
        if marker in last_user_text(b) and not last_is_tool_result(b):
            texts = _texts(b)
            at = max(i for i, t in enumerate(texts) if marker in t and not t.startswith(HEADER))
            out.append("\n".join(t for t in texts[at + 1:] if t.startswith(HEADER)))
    return out


def _wire(body: dict) -> str:
    return json.dumps({k: body.get(k) for k in ("tools", "system", "messages")},
                      ensure_ascii=False, separators=(",", ":"))


def test_auto_recall_notes_and_the_anchor_join_the_conversation_and_every_prefix_holds(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(
        "# Deploy\n\nThe staging deploy key lives in vault path ops/staging-deploy.\n")
    (notes / "style.md").write_text("# Style\n\nPython code uses black with line length 100.\n")
    (notes / "team.md").write_text("# Team\n\nReviews go to the platform channel on Mondays.\n")
    answers = {
        "which port": "Let us pick port 8431 for the staging server; 8080 is taken by the proxy.",
        "compose": "Done: compose.yml now maps 8431.",
        "readme": "README.md updated with the run instructions.",
        "changelog": "Changelog entry added.",
    }
    state = {"overflowed": False}

    def brain(body):
        text = last_user_text(body)
        if "OVERFLOW" in text and not state["overflowed"]:
            state["overflowed"] = True
            return overflow()  # dsh compacts, asks for a summary, then retries
        if state["overflowed"] and "summar" in json.dumps(body["messages"][-1]).lower() \
                and not state.get("summary"):
            state["summary"] = True
            return say("SUMMARY: staging runs on port 8431; compose, README and changelog done.")
        for key, answer in answers.items():
            if key in text:
                return say(answer)
        return say("ok")

    env = {"DSH_RECALL_NOTES__ROOTS": json.dumps([str(notes)])}
    with dsh_session(tmp_path, brain, _patch(env)) as (session, standin, _):
        for msg in ("which port should the staging server listen on?",
                    "now write the compose file", "update the readme", "and the changelog",
                    "add a unit test for the tokenizer",
                    "as we discussed, what port did we pick?",
                    "where does the staging deploy key live?",
                    "OVERFLOW: keep going with the tests",
                    "what is next?",
                    "as we discussed earlier, what port did we choose for staging?"):
            session.run(msg)

    unrelated = _blocks_in(standin, "unit test for the tokenizer")
    assert unrelated and all(b == "" for b in unrelated)
    # The decision is still in the request dsh sends: quoting it again would only repeat it.
    held = _blocks_in(standin, "as we discussed, what port")
    assert held and all("Earlier in this session" not in b for b in held), held
    # Once the compaction has summarized it away, the question brings it back.
    recalled = _blocks_in(standin, "did we choose for staging")
    assert recalled and all("8431" in b and "Earlier in this session" in b for b in recalled), recalled
    assert "Notes from memory" not in recalled[0]
    noted = _blocks_in(standin, "staging deploy key")
    assert noted and all("ops/staging-deploy" in b for b in noted)
    # The first request after the compaction (dsh's retry of the overflowed one) carries the
    # anchor: the summary and the original fragments.
    reqs = standin.requests
    summary_at = next(i for i, b in enumerate(reqs) if "summar" in json.dumps(b["messages"][-1]).lower()
                      and "OVERFLOW" not in last_user_text(b))
    first_after = reqs[summary_at + 1]
    anchor = [t for t in _texts(first_after) if t.startswith(HEADER) and "Context was compacted" in t]
    assert anchor and "SUMMARY: staging" in anchor[-1] and "Key original fragments" in anchor[-1]
    # Nothing recalled ever enters the system prompt, and each request repeats the previous
    # one byte for byte before adding its own turn (the provider's prefix cache holds), except
    # across the compaction, which replaces history.
    assert all(HEADER not in system_text(b) for b in reqs)
    main = [b for i, b in enumerate(reqs) if i != summary_at]
    overflowed = next(i for i, b in enumerate(main) if "OVERFLOW" in last_user_text(b))
    for i in range(1, len(main)):
        if i == overflowed + 1:
            continue  # the retried request after the compaction
        prev, cur = main[i - 1], main[i]
        assert prev["system"] == cur["system"] and prev["tools"] == cur["tools"], i
        assert cur["messages"][:len(prev["messages"])] == prev["messages"], i
        assert _wire(cur).startswith(_wire(prev)[:-2]), i  # the same bytes, then the new turn


def test_worker_killed_mid_turn_leaves_the_turn_with_dshs_own_output(tmp_path):
    status = Path(os.environ["DSH_RECALL_HOME"]) / "dsh" / "worker-status.json"
    kill = (f"{sys.executable} -c \"import json,os,signal,sys; p=json.load(open('{status}'))['pid']; "
            f"os.kill(p, signal.SIGKILL); print('killed worker', p, file=sys.stderr)\"")
    command = f"{kill}; {_big_script(tmp_path)}"

    def brain(body):
        done = results(body)
        if "again" in last_user_text(body):  # two small calls in the next turn
            for call_id in ("toolu_e1", "toolu_e2"):
                if call_id not in done:
                    return use("bash", {"description": "echo", "command": "echo small"}, call_id)
            return say("done again")
        if last_is_tool_result(body):
            return say("done")
        if "print" in last_user_text(body):
            return use("bash", {"description": "kill the worker, then print a lot",
                                "command": command}, "toolu_big")
        return say("ok")

    with dsh_session(tmp_path, brain, _patch({})) as (session, standin, _):
        result = session.run("print a lot please")
        assert result.final_response == "done"
        # The next request restarts the worker.
        assert session.run("and again, two small ones").final_response == "done again"
        restarted = json.loads(status.read_text())["pid"]

    seen = [results(b)["toolu_big"] for b in standin.requests if "toolu_big" in results(b)]
    killed = int(re.search(r"killed worker (\d+)", seen[0]).group(1))
    assert restarted != killed
    # That turn went on with dsh's own output, untouched ...
    assert "[dsh-recall: " not in seen[0]
    assert "[output truncated; full output: " in seen[0] and len(seen[0]) > 40_000  # dsh's cut
    # ... and once two newer results follow, the restarted worker reclaims it (replay-safe).
    assert "[dsh-recall: " in seen[-1] and len(seen[-1]) < 20_000


def test_results_already_seen_are_reclaimed_with_the_replay_safe_pair_under_a_budget(tmp_path):
    (tmp_path / "repo").mkdir()
    big = tmp_path / "repo" / "notes.txt"
    big.write_text("".join(f"row {i:04d} of the inventory table, shelf {i % 17}\n" for i in range(600)))
    # A ranged read passes whole when produced (a whole-file one would be shortened at once).
    steps = [("read", {"file_path": str(big), "offset": 1, "limit": 2000}, "toolu_read"),
             ("bash", {"description": "one", "command": "echo one"}, "toolu_b1"),
             ("bash", {"description": "two", "command": "echo two"}, "toolu_b2"),
             ("bash", {"description": "three", "command": "echo three"}, "toolu_b3")]

    def brain(body):
        done = results(body)
        for tool, args, call_id in steps:
            if call_id not in done:
                return use(tool, args, call_id)
        return say("done")

    with dsh_session(tmp_path, brain, _patch({"DSH_RECALL_OBJECTS__BUDGET_TOKENS": "1000"})) \
            as (session, standin, dsh_home):
        assert session.run("look at the inventory").final_response == "done"

    seen = [results(b).get("toolu_read") for b in standin.requests if "toolu_read" in results(b)]
    # read output is left alone when produced (the model edits from it) ...
    assert "row 0300 of the inventory" in seen[0] and "[dsh-recall: " not in seen[0]
    # ... and once two newer results follow, the context is over budget: it is shadowed.
    assert "[dsh-recall: " in seen[-1] and len(seen[-1]) < 2000
    events = session_events(dsh_home)
    original = next(e for e in events if e["type"] == "tool/result"
                    and e["data"]["message"].get("toolCallId") == "toolu_read" and e.get("surfaceOp") == "append")
    prune = [e for e in events if e["type"] == "compaction/prune" and original["seq"] in e["data"]["shadowedSeqs"]]
    replace = [e for e in events if e["type"] == "tool/result" and isinstance(e.get("surfaceOp"), dict)
               and e["surfaceOp"].get("startSeq") == original["seq"]]
    assert prune and replace and "[dsh-recall: " in json.dumps(replace[0]["data"])
    assert "row 0300 of the inventory" in json.dumps(original["data"])  # the log keeps it


def test_a_worker_that_never_gets_ready_is_reported_and_left_behind_by_nobody(tmp_path):
    """A worker that never prints its ready line: the session runs as plain dsh would, the
    plugin's status says why (MCP `status` reads it), and no worker is left after dsh exits."""
    silent = tmp_path / "silent_worker.py"
    pid_file = tmp_path / "worker.pid"
    silent.write_text("import os, sys, time\n"
                      f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                      "sys.stdin.read()\n")
    patch = _patch({}).replace('args: ["worker"]', f'args: [{json.dumps(str(silent))}]')
    patch = patch.replace(f'command: {json.dumps(recall_exe())}\n        args: [{json.dumps(str(silent))}]',
                          f'command: {json.dumps(sys.executable)}\n        args: [{json.dumps(str(silent))}]')
    assert str(silent) in patch and sys.executable in patch

    def brain(body):
        if not last_is_tool_result(body):
            return use("bash", {"description": "big", "command": _big_script(tmp_path)}, "toolu_big")
        return say("done")

    with dsh_session(tmp_path, brain, patch) as (session, standin, _):
        assert session.run("print a lot please").final_response == "done"
        status = json.loads((Path(os.environ["DSH_RECALL_HOME"]) / "dsh" / "plugin-status.json").read_text())
    assert status["state"] == "starting" and "no ready line" in status["reason"]
    assert any("no ready line" in w["message"] for w in status["warnings"])
    # dsh's own output went through untouched.
    shown = results(standin.requests[-1])["toolu_big"]
    assert "[dsh-recall: " not in shown and "[output truncated; full output: " in shown
    from dsh_recall.frontends.dsh.worker import last_status
    seen = last_status()
    assert seen is not None and seen["health"] == "starting" and "no ready line" in seen["reason"]
    assert gone_within(int(pid_file.read_text())), "the silent worker outlived dsh"


def test_a_red_test_run_reaches_the_model_with_its_failures_inline(tmp_path):
    """A real red `pytest -v` output (tests/fixtures/inline) printed by `bash`: the next
    request carries head + note + the failure lines + tail, so no recall call is needed."""
    red = Path(__file__).parent / "fixtures" / "inline" / "pytest_red.txt"

    def brain(body):
        if not last_is_tool_result(body):
            return use("bash", {"description": "tests", "command": f"cat {red}"}, "toolu_red")
        return say("done")

    with dsh_session(tmp_path, brain, _patch({})) as (session, standin, _):
        assert session.run("run the tests").final_response == "done"
    shown = results(standin.requests[-1])["toolu_red"]
    full = red.read_text()
    assert len(shown) < len(full) / 4 and re.search(r"moved to object [0-9a-f]{8}", shown)
    for line in ("ZeroDivisionError: division by zero", "AssertionError: case mismatch for alpha",
                 "AssertionError: assert {'threshold':..., 'head': 600} == {'threshold':..., 'head': 640}"):
        assert line in shown, line
    assert shown.rstrip().endswith(full.rstrip().splitlines()[-1])  # the summary line, whole

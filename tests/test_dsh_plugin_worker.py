"""The Python half of the dsh native plugin, without dsh: the worker's answers, the
protocol, dsh's spill files, and history finding what the conversation only points to.

The real runtime drives the same worker in test_dsh_plugin.py (slow)."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from dsh_recall.core.config import ObjectsConfig, load_config
from dsh_recall.frontends.dsh import loop
from dsh_recall.frontends.dsh.idle import IDLE_NICE, IdleProcess
from dsh_recall.frontends.dsh.spill import plausible_path, read_spill, restore_spilled
from dsh_recall.frontends.dsh.worker import Worker, call_seq
from dsh_recall.policy.offload import render_inline
from dsh_recall.policy.restore import restore_notes
from dsh_recall.services import history
from dsh_recall.services.objects import ObjectService

BIG = "".join(f"line {i:05d} build step {i * 7 % 13} ok\n" for i in range(4000))  # ~120 KB


@pytest.fixture(autouse=True)
def _fake_embedder(monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")


def _session_log(dsh_home: Path, sid: str, events: list[dict], cwd: str = "/work/x") -> Path:
    d = dsh_home / "sessions" / "--work-x--" / sid
    d.mkdir(parents=True, exist_ok=True)
    path = d / "session.v4.jsonl"
    lines = [{"type": "session", "version": 4, "id": sid, "createdAt": 1_700_000_000_000, "cwd": cwd}]
    lines += [{"seq": i, "time": 1_700_000_000_000 + i, **e} for i, e in enumerate(events)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _user(text: str) -> dict:
    return {"type": "user/message", "data": {"content": [{"type": "text", "text": text}],
                                             "source": {"kind": "user"}, "role": "user"}}


def _assistant(text: str) -> dict:
    return {"type": "assistant/message",
            "data": {"message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}}


def _call(call_id: str, name: str = "bash") -> dict:
    return {"type": "assistant/message", "data": {"message": {"role": "assistant", "content": [
        {"type": "tool-call", "id": call_id, "name": name, "arguments": "{}"}]}}}


def _result(call_id: str, text: str) -> dict:
    return {"type": "tool/result", "data": {"message": {
        "role": "tool", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}}}


# -- restoring offloaded text (search.restore, history import) ---------------------------------

def test_restore_puts_back_only_a_verified_pointer_form():
    inline = render_inline(BIG, "abcd1234", "bash", ObjectsConfig()).text
    found = {"abcd1234": BIG}
    r = restore_notes("before\n" + inline + "after", found.get)
    assert r.ids == ("abcd1234",) and r.text == "before\n" + BIG + "after"
    # Another object's text around the same note, an unknown id, a pasted note alone.
    assert restore_notes(inline, {"abcd1234": BIG.replace("00001", "99999")}.get).ids == ()
    assert restore_notes(inline, {}.get).ids == ()
    note = inline[inline.index("[dsh-recall: "):inline.index("query=...]") + 10]
    assert restore_notes(f"see {note} here", found.get).text == f"see {note} here"


def test_history_indexes_the_original_of_an_offloaded_result(tmp_path):
    cfg = load_config()
    with ObjectService(cfg.objects) as svc:
        res = svc.put(BIG, session="sess-a", seq=call_seq("call-1", "/content/0"), tool="bash")
        other = svc.put(BIG.replace("build", "other"), session="sess-b", seq=1, tool="bash")
    assert res.offloaded and "line 02000" not in res.inline
    dsh_home = tmp_path / "dsh"
    _session_log(dsh_home, "sess-a", [_user("run the build"), _call("call-1"), _result("call-1", res.inline),
                                      # a result pointing to another session's object stays as it is
                                      _call("call-2"), _result("call-2", other.inline)])
    history.import_paths([str(dsh_home)], cfg=cfg)
    # A line from the middle (chars ~60,000 of ~120,000) is found and shown in full.
    hits = history.search("line 02000", session="sess-a", detail=True, layers=["literal"], cfg=cfg)["hits"]
    assert hits and hits[0]["start_seq"] == 2
    assert any(f.startswith("offloaded:" + res.id) for f in hits[0]["flags"])
    shown = history.show("sess-a", around=2, window=0, max_chars=300_000)["events"][0]
    assert "line 03999" in shown["text"] and "[dsh-recall: " not in shown["text"]
    ev4 = history.show("sess-a", around=4, window=0)["events"][0]
    assert "[dsh-recall: " in ev4["text"]


def test_history_does_not_restore_across_channels(tmp_path):
    cfg = load_config()
    with ObjectService(cfg.objects) as svc:
        res = svc.put(BIG, session="sess-c", seq=5, tool="bash", channel="group:team")
    dsh_home = tmp_path / "dsh"
    _session_log(dsh_home, "sess-c", [_call("c"), _result("c", res.inline)])
    history.import_paths([str(dsh_home)], cfg=cfg)  # imported with no channel
    assert "[dsh-recall: " in history.show("sess-c", around=1, window=0)["events"][0]["text"]


# -- dsh's spill files -------------------------------------------------------------------------

def _spill(tmp_path: Path, text: str, name: str = "dsh-subprocess-123-1-abc-stdout.log") -> Path:
    d = tmp_path / "dsh-subprocess-AbC123"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(text, encoding="utf-8")
    return p


def test_spill_file_restores_the_whole_stream_when_its_tail_matches(tmp_path):
    p = _spill(tmp_path, BIG)
    kept = BIG[-64000:]
    text = f"{kept}\n[output truncated; full output: {p}]\n[stderr]\nwarning: slow\n[exit code: 2]"
    r = restore_spilled(text, lambda path: read_spill(path, 1 << 26))
    assert r.paths == (str(p),)
    assert r.text == BIG + "\n[stderr]\nwarning: slow\n[exit code: 2]"
    # A file whose end is not the kept tail, a name dsh does not give, a symlink: unchanged.
    wrong = _spill(tmp_path, BIG.replace("03999", "xxxxx"), "dsh-subprocess-9-stdout.log")
    t2 = f"{kept}\n[output truncated; full output: {wrong}]"
    assert restore_spilled(t2, lambda path: read_spill(path, 1 << 26)).text == t2
    secret = tmp_path / "secret.txt"
    secret.write_text(BIG)
    assert not plausible_path(str(secret)) and read_spill(str(secret), 1 << 26) is None
    link = tmp_path / "dsh-subprocess-AbC123" / "dsh-subprocess-7-stdout.log"
    link.symlink_to(secret)
    assert plausible_path(str(link)) and read_spill(str(link), 1 << 26) is None
    assert read_spill(str(p), 1000) is None  # over the cap


def test_spill_in_stderr_section_is_restored_too(tmp_path):
    p = _spill(tmp_path, "E" * 5000 + "\nfatal: boom\n", "dsh-subprocess-5-stderr.log")
    text = f"out line\n[stderr]\n{('E' * 5000 + chr(10) + 'fatal: boom' + chr(10))[-3000:]}\n[output truncated; full output: {p}]"
    r = restore_spilled(text, lambda path: read_spill(path, 1 << 26))
    assert r.text == "out line\n[stderr]\n" + "E" * 5000 + "\nfatal: boom\n"


# -- the worker's answers ------------------------------------------------------------------------

def test_offload_stores_the_full_output_and_is_idempotent_per_call(tmp_path):
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    p = _spill(tmp_path, BIG)
    shown = f"{BIG[-64000:]}\n[output truncated; full output: {p}]"
    req = {"op": "offload", "session": "s1", "call_id": "toolu_9", "tool": "bash",
           "blocks": [shown, None, "small"]}
    a = w.handle(req)
    new, obj = a["blocks"][0], a["ids"][0]
    assert a["blocks"][1:] == [None, None] and obj and len(new) < 2000
    assert new.startswith(BIG[:500]) and f"object {obj}" in new
    with ObjectService() as svc:
        assert svc.get(obj, 0, 24000).total == len(BIG)  # the whole stream, not dsh's 64 KB
        assert "line 02000" in svc.search_in(obj, "line 02000").matches[0].text
    assert w.handle(req)["ids"][0] == obj  # the same call again: the same object
    assert w.handle({**req, "blocks": ["tiny"]})["blocks"] == [None]


def test_context_recalls_history_and_notes_only_when_relevant(tmp_path, monkeypatch):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text("# Deploy\n\nThe staging deploy key lives in vault path ops/staging-deploy.\n")
    (notes / "style.md").write_text("# Style\n\nPython code uses black with line length 100.\n")
    (notes / "people.md").write_text("# Team\n\nReviews go to the platform channel on Mondays.\n")
    monkeypatch.setenv("DSH_RECALL_NOTES__ROOTS", json.dumps([str(notes)]))
    dsh_home = tmp_path / "dsh"
    _session_log(dsh_home, "sess-p", [
        _user("which port should the staging server listen on?"),
        _assistant("Let us pick port 8431 for the staging server; 8080 is taken by the proxy."),
        _user("ok, write the compose file"), _assistant("Done: compose.yml uses 8431."),
        # dsh compacted the first four events away: the model has only the summary of them.
        {"type": "compaction/summary", "data": {"compactionId": "c1", "summary": [
            {"type": "text", "text": "Set up the staging server's compose file."}],
            "shadowedRange": {"start": 0, "end": 3}, "shadowedSeqs": [0, 1, 2, 3]}},
        _user("now the readme"), _assistant("Updated README.md."),
        _user("and the changelog"), _assistant("Changelog updated.")])
    w = Worker(dsh_home=str(dsh_home))
    quiet = w.handle({"op": "context", "session": "sess-p", "message_id": "m1",
                      "message": "add a unit test for the parser"})
    assert quiet["text"] == ""
    fired = w.handle({"op": "context", "session": "sess-p", "message_id": "m2",
                      "message": "as we discussed, what port did we pick?"})
    assert fired["parts"]["recall"] and "8431" in fired["text"]
    assert "Earlier in this session" in fired["text"]
    # The same message again (the next step of the turn): the same block, no new gate run.
    again = w.handle({"op": "context", "session": "sess-p", "message_id": "m2", "message": "x"})
    assert again["text"] == fired["text"] and again["turn"] == fired["turn"]
    n = w.handle({"op": "context", "session": "sess-p", "message_id": "m3",
                  "message": "where does the staging deploy key live?"})
    assert n["parts"]["notes"] and "ops/staging-deploy" in n["text"]
    # Vectors were left for idle time (no embedding in the request path); the idle process
    # (a child at the lowest priority, the one the worker's loop hands off to) fills them.
    waiting = [svc.store for svc in w._notes.values() if svc.roots]
    assert waiting and sum(s.pending_count() for s in waiting) > 0
    runner = IdleProcess(None)
    try:
        w.hand_off(runner.send)
        assert not w.dirty and runner.pid is not None
        assert os.getpriority(os.PRIO_PROCESS, runner.pid) == IDLE_NICE
        deadline = time.monotonic() + 60
        while sum(s.pending_count() for s in waiting) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sum(s.pending_count() for s in waiting) == 0
        with history.HistoryService(load_config()) as hs:
            assert hs.store.stats()["blocks"] > 0
    finally:
        runner.close()
    assert runner.proc is None


def test_reclaim_keeps_newest_and_read_output_without_a_budget(tmp_path):
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    results = [{"seq": 10, "tool": "bash", "text": BIG},
               {"seq": 20, "tool": "read", "text": BIG, "pass_through": True},
               {"seq": 30, "tool": "bash", "text": BIG}, {"seq": 40, "tool": "bash", "text": BIG}]
    out = w.handle({"op": "reclaim", "session": "s2", "results": results})["replace"]
    assert set(out) == {"10"}  # never the newest two, never read-like output without a budget
    assert "[dsh-recall: " in out["10"]["text"]
    assert w.handle({"op": "reclaim", "session": "s2", "results": results})["replace"] == {}


def test_reclaim_takes_read_output_under_a_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_OBJECTS__BUDGET_TOKENS", "1000")
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    results = [{"seq": 20, "tool": "read", "text": BIG, "pass_through": True},
               {"seq": 30, "tool": "bash", "text": "x"}, {"seq": 40, "tool": "bash", "text": "y"}]
    assert set(w.handle({"op": "reclaim", "session": "s3", "results": results})["replace"]) == {"20"}


def test_import_makes_the_running_session_searchable(tmp_path):
    dsh_home = tmp_path / "dsh"
    w = Worker(dsh_home=str(dsh_home))
    assert w.handle({"op": "import", "session": "sess-q"})["imported"] is False
    _session_log(dsh_home, "sess-q", [_user("rename the frobnicator module")])
    assert w.handle({"op": "import", "session": "sess-q"})["imported"] is True
    assert history.search("frobnicator", session="sess-q", cfg=load_config())["hits"]
    assert w.handle({"op": "import", "session": "../../etc"})["imported"] is False


# -- the wire --------------------------------------------------------------------------------

def test_serve_answers_in_order_and_survives_bad_lines(tmp_path):
    lines = [b'{"id": 1, "op": "ping"}', b"not json", b"[1, 2]", b'{"id": 2, "op": "nope"}',
             json.dumps({"id": 3, "op": "offload", "session": "s", "call_id": "c",
                         "tool": "bash", "blocks": [BIG]}).encode(), b'{"id": 4, "op": "status"}']
    out = io.BytesIO()
    loop.serve(io.BytesIO(b"\n".join(lines) + b"\n"), out, Worker(dsh_home=str(tmp_path)), idle_s=0.05)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert answers[0]["result"]["ready"] is True
    assert [a["id"] for a in answers[1:]] == [1, None, None, 2, 3, 4]
    assert [a["ok"] for a in answers[1:]] == [True, False, False, False, True, True]
    assert "unknown op" in answers[4]["error"]
    status = answers[6]["result"]
    assert status["objects"]["offloaded"] == 1 and status["objects"]["disk_bytes"] > 0
    assert status["worker"]["offloads"] == 1 and status["worker"]["pid"] == os.getpid()


def test_every_request_counts_what_the_changes_it_carried_kept_out_of_it(tmp_path):
    # The old count added once per user turn (op context): 6 of 23 requests. The ledger adds
    # at every model request what the changes that request still carried kept out of it,
    # against what dsh handed over, as JSON chars / 4; a recall message is a cost.
    from dsh_recall.services.report.ledger import (
        MESSAGE_ENVELOPE,
        dsh_pruned_chars,
        dsh_sent_chars,
        figures_from_log,
        json_chars,
        tokens,
    )

    w = Worker(dsh_home=str(tmp_path / "dsh"))
    a = w.handle({"op": "offload", "session": "s1", "call_id": "c1", "tool": "bash", "blocks": [BIG]})
    # Against what dsh would have sent: its spill policy's head and tail of BIG, not all of it.
    kept = dsh_sent_chars(BIG) - json_chars(a["blocks"][0])
    assert len(BIG) > 100_000 and dsh_sent_chars(BIG) < 53_000  # 50,000 bytes, newlines escaped
    per = tokens(kept)
    w.handle({"op": "context", "session": "s1", "message_id": "m1", "message": "go on"})  # one turn
    for _i in range(5):  # ... of five model requests, each carrying c1
        w.handle({"op": "request", "session": "s1", "present": ["c1"], "input_tokens": 1000})
    st = w.handle({"op": "status"})
    s1 = st["ledger"]["sessions"]["s1"]
    assert s1["requests"] == 5 and s1["tokens_kept_out"] == 5 * per and s1["offloads"] == 1
    assert s1["tokens_sent"] == 5000 and s1["saving"] == round(5 * per / (5000 + 5 * per), 4)
    assert st["objects"]["tokens_kept_out"] == 5 * per  # the strip's figure: the same ledger
    # A recall message added before the next request costs its size; a request that no
    # longer carries c1 (a compaction summarized it away) gets nothing for it.
    w.handle({"op": "request", "session": "s1", "present": ["c1", "msg-x"], "added": [["msg-x", 402]]})
    w.handle({"op": "request", "session": "s1", "present": []})
    s1 = w.handle({"op": "status"})["ledger"]["sessions"]["s1"]
    assert s1["requests"] == 7 and s1["tokens_kept_out"] == 5 * per + tokens(kept - 402 - MESSAGE_ENVELOPE)
    # A request that follows a read-back of kept-out text (the model recalled the object, or
    # read the shortened file again) is one plain dsh would not have made: minus its size.
    assert w.handle({"op": "request", "session": "s1", "present": ["c1"], "input_tokens": 2000,
                     "readback": True})["tokens_kept_out"] == -2000
    s1 = w.handle({"op": "status"})["ledger"]["sessions"]["s1"]
    assert s1["readback_requests"] == 1 and s1["requests"] == 8
    # Over dsh's compaction threshold (min(0.8 x window, window - 73,728 reserved): 126,272
    # in a 200,000 window), plain dsh would first have pruned c9 to head + marker + tail,
    # then, still over, sent a summarization request of its whole transcript; after it c9
    # counts no more. A 16,000 window leaves dsh no budget: it never compacts.
    w.handle({"op": "offload", "session": "s2", "call_id": "c9", "tool": "bash", "blocks": [BIG]})
    c9 = w.handle({"op": "offload", "session": "s3", "call_id": "c9", "tool": "bash", "blocks": [BIG]})["blocks"][0]
    cut = tokens(dsh_pruned_chars(BIG) - json_chars(c9))
    at = {"op": "request", "session": "s2", "present": ["c9"], "input_tokens": 1000}
    assert w.handle({**at, "context_window": 200_000})["tokens_kept_out"] == per  # far under
    assert w.handle({**at, "context_window": 16_000})["tokens_kept_out"] == per  # no budget
    assert 0 < cut < per
    assert w.handle({**at, "input_tokens": 120_000, "context_window": 200_000})["tokens_kept_out"] == cut
    assert w.handle({**at, "input_tokens": 126_000, "context_window": 200_000})["tokens_kept_out"] == 126_000 + cut
    assert w.handle({**at, "context_window": 200_000})["tokens_kept_out"] == 0  # c9 is gone
    s2 = w.handle({"op": "status"})["ledger"]["sessions"]["s2"]
    assert (s2["plain_prunes"], s2["plain_compactions"]) == (1, 1)
    # The usage log recomputes exactly what the worker shows (report, object stats).
    assert figures_from_log()["sessions"]["s1"] == s1
    assert Worker(dsh_home=str(tmp_path / "dsh")).handle({"op": "status"})["ledger"]["sessions"]["s1"] == s1


def test_a_question_about_a_decision_recalls_the_turns_that_made_it(tmp_path):
    dsh_home = tmp_path / "dsh"
    _session_log(dsh_home, "s-dec", [
        _user("Fix the session cookie bug. We decided to keep the SameSite=Lax default because "
              "the SSO redirect breaks with Strict; do not change it."),
        _assistant("Understood: SameSite stays Lax for the SSO redirect. Let me look at the code."),
        _call("c1"), _result("c1", "$ grep -rn samesite src/flask\nsrc/flask/sessions.py:210:    "
                                   "def get_cookie_samesite(self, app):"),
        _assistant("The samesite value is read in sessions.py get_cookie_samesite."),
        _user("run the tests"), _assistant("12 passed, 1 failed in test_sessions.py"),
        {"type": "compaction/summary", "data": {"compactionId": "c1", "summary": "Tests run.",
                                                "shadowedRange": {"start": 0, "end": 6},
                                                "shadowedSeqs": list(range(7))}},
        _user("fix the failing test"), _assistant("Fixed the assertion in test_sessions.py."),
        _user("now update the changelog"), _assistant("Changelog updated.")])
    w = Worker(dsh_home=str(dsh_home))
    w.handle({"op": "context", "session": "s-dec", "message_id": "m1", "message": "fix it"})
    r = w.handle({"op": "context", "session": "s-dec", "message_id": "m2",
                  "message": "as we discussed earlier, what did we decide about the SameSite setting and why?"})
    block = r["blocks"]["recall"]
    # The turn that made the decision, with its reason, not only a line that names the term.
    assert "We decided to keep the SameSite=Lax default because the SSO redirect breaks" in block
    assert block.count("\n- seq ") <= 3 and 'recall id="s-dec#<seq>"' in block


def test_a_short_kept_tail_verifies_no_spill_file(tmp_path):
    # `a\n[output truncated; full output: PATH]` matched any spill file ending in a newline:
    # a marker the model printed could swap in another output of the user's.
    p = _spill(tmp_path, "another command's output\nwith its secrets\na\n")
    for kept in ("a\n", "\n", "secrets\na\n"):
        text = f"{kept}[output truncated; full output: {p}]"
        assert restore_spilled(text, lambda path: read_spill(path, 1 << 26)).paths == ()


def test_an_answer_after_the_deadline_counts_as_late_not_as_kept_out(tmp_path):
    # The plugin sends its deadline (epoch ms); past it dsh went on with its own result,
    # so an offload or a shortened read finished later kept nothing out of the request.
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    req = {"op": "offload", "session": "s1", "call_id": "c1", "tool": "bash", "blocks": [BIG]}
    late = w.handle({**req, "deadline_at": time.time() * 1000 - 1})
    assert late["late"] is True and late["ids"][0]
    assert w.counts["offloads"] == 0 and w.counts["chars_in"] == 0 and w.counts["late"] == 1
    w.handle({"op": "request", "session": "s1", "present": ["c1"]})
    assert w.ledger.session_figures("s1")["tokens_kept_out"] == 0  # dsh sent c1 whole
    on_time = w.handle({**req, "call_id": "c2", "deadline_at": time.time() * 1000 + 60_000})
    assert "late" not in on_time and w.counts["offloads"] == 1 and w.counts["late"] == 1
    w.handle({**req, "call_id": "c3"})  # no deadline sent (a caller of its own): counted
    assert w.counts["offloads"] == 2


def test_the_history_block_never_repeats_what_the_request_still_holds(tmp_path):
    # No compaction yet: the decision is in the request dsh sends, so quoting it again only
    # doubles it; once a compaction shadows it, the block brings it back.
    dsh_home = tmp_path / "dsh"
    events = [_user("which port should the staging server listen on?"),
              _assistant("Let us pick port 8431 for the staging server; 8080 is taken by the proxy."),
              _user("ok, write the compose file"), _assistant("Done: compose.yml uses 8431."),
              _user("now the readme"), _assistant("Updated README.md."),
              _user("and the changelog"), _assistant("Changelog updated.")]
    _session_log(dsh_home, "sess-q", events)
    w = Worker(dsh_home=str(dsh_home))
    asked = {"op": "context", "session": "sess-q", "message": "as we discussed, what port did we pick?"}
    assert not w.handle({**asked, "message_id": "m1"})["parts"]["recall"]
    summary = {"type": "compaction/summary", "data": {"compactionId": "c1", "summary": "Docs updated.",
                                                      "shadowedRange": {"start": 0, "end": 7},
                                                      "shadowedSeqs": list(range(8))}}
    _session_log(dsh_home, "sess-q", [*events, summary, _user("what next?")])
    got = w.handle({**asked, "message_id": "m2"})
    assert got["parts"]["recall"] and "8431" in got["text"]

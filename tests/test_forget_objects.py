"""A forgotten note is found by no source: not in an offloaded tool result quoting it either,
by any read of the object (search in it, a range, lines, the failure region, MCP
`object_recall`) nor in the inline form of a result offloaded after the forget. The object
itself is not rewritten; what it shows is (services/access/forgotten.withhold)."""

from __future__ import annotations

from pathlib import Path

from dsh_recall.policy.forget import WITHHELD
from dsh_recall.services.objects import ObjectService
from test_memory_write import mcp_calls, ok, world

NOTE = "The quokka release train leaves every second Thursday from platform nine."
PAD = "".join(f"build step {i} ok\n" for i in range(400))


def _reads(w, obj_id: str) -> dict[str, str]:
    """Every way back into the object, through the service and through MCP."""
    with ObjectService(w["cfg"].objects) as objs:
        got = {
            "search_in": "\n".join(m.text for m in objs.search_in(obj_id, "quokka release train").matches),
            "get": objs.get(obj_id, 0, 24000).text,
            "lines": objs.lines(obj_id, 395, 410)["text"],
            "failures": "\n".join(m.text for m in objs.failures(obj_id).matches),
        }
    _, res = mcp_calls(w, [("object_recall", {"id": obj_id, "query": "quokka release train"}),
                           ("object_recall", {"id": obj_id, "lines": "395-410"}),
                           ("object_recall", {"id": obj_id, "start": 0, "count": 24000})])
    for name, r in zip(("mcp_query", "mcp_lines", "mcp_range"), res, strict=True):
        d = ok(r)
        got[name] = "\n".join(m["text"] for m in d.get("matches") or []) or d.get("text", "")
    return got


def test_a_forgotten_note_is_withheld_from_every_read_of_an_object(tmp_path: Path) -> None:
    w = world(tmp_path, session_map=False)
    _, (saved,) = mcp_calls(w, [("notes_save", {"text": NOTE})])
    d = ok(saved)
    # The note printed at the end of a failing log, so the failure region shows it too.
    log = PAD + f"$ cat {d['path']}\n{NOTE}\nERROR: deploy failed\n"
    with ObjectService(w["cfg"].objects, scrub=w["cfg"].scrub) as objs:
        obj = objs.put(log, session="s1", tool="bash")
    assert obj.id
    before = _reads(w, obj.id)
    assert all("platform nine" in v for k, v in before.items() if k != "failures"), before

    _, (gone,) = mcp_calls(w, [("notes_forget", {"id": d["id"]})])
    assert ok(gone)["action"] == "forgotten"
    after = _reads(w, obj.id)
    assert not any("platform nine" in v for v in after.values()), after
    assert WITHHELD in after["get"] and WITHHELD in after["mcp_lines"]
    # What only shares the log stays: its other lines are shown as they were.
    assert "build step 399 ok" in after["get"] and "ERROR: deploy failed" in after["lines"]

    # A result offloaded after the forget keeps no quote of it in its inline form.
    with ObjectService(w["cfg"].objects, scrub=w["cfg"].scrub) as objs:
        again = objs.put(PAD + NOTE + "\n" + PAD + "done\n", session="s2", tool="bash")
    assert again.id and "platform nine" not in again.inline and "done" in again.inline


def test_an_object_that_quotes_nothing_forgotten_reads_as_it_is(tmp_path: Path) -> None:
    w = world(tmp_path, session_map=False)
    _, (saved,) = mcp_calls(w, [("notes_save", {"text": NOTE})])
    mcp_calls(w, [("notes_forget", {"id": ok(saved)["id"]})])
    log = PAD + "the quokka mascot needs a new hat\n" + PAD
    with ObjectService(w["cfg"].objects, scrub=w["cfg"].scrub) as objs:
        obj = objs.put(log, session="s1", tool="bash")
        assert objs.get(obj.id, 0, 24000).text == log[:24000]

"""History import on hostile transcripts: a bad record is skipped and counted, never the
file, never the folder. The crashing inputs of the adversarial pass are kept as
regression cases; hypothesis then puts any JSON value in any field of each format."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.readers.transcripts import ReadContext, reader
from dsh_recall.readers.transcripts.base import TranscriptEvent
from dsh_recall.services import history as svc
from dsh_recall.stores.sqlite.history import HistoryStore


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _line(obj: Any) -> str:
    # allow_nan writes NaN / Infinity as bare tokens, which Python's json reads back.
    return json.dumps(obj, allow_nan=True)


# -- small honest records of each format (shapes as the harnesses write them) ----------

def dsh_records(sid: str = "sess-r1") -> list[Any]:
    return [
        {"type": "session", "version": 4, "id": sid, "createdAt": 1795997552462, "cwd": "/tmp/ws"},
        {"type": "session/title", "seq": 1, "time": 1795997552470, "data": {"title": "Robust import"}},
        {"type": "user/message", "seq": 2, "time": 1795997552471,
         "data": {"content": [{"type": "text", "text": "please run the build"}],
                  "source": {"kind": "user"}, "role": "user", "id": "u-1"}},
        {"type": "assistant/message", "seq": 3, "time": 1795997552480,
         "data": {"message": {"role": "assistant", "id": "a-1", "content": [
             {"type": "reasoning", "text": "run bash"},
             {"type": "tool-call", "id": "call_1", "name": "bash", "arguments": "{\"cmd\": \"make\"}"}]}}},
        {"type": "tool/result", "seq": 4, "time": 1795997552490,
         "data": {"message": {"role": "tool", "toolCallId": "call_1", "source": {"callId": "call_1"},
                              "content": [{"type": "text", "text": "build ok"}], "id": "t-1"}},
         "surfaceOp": {"op": "replace", "startSeq": 4, "endSeq": 4}},
        {"type": "compaction/prune", "seq": 5, "time": 1795997552491, "data": {"shadowedSeqs": [4]}},
        {"type": "compaction/summary", "seq": 6, "time": 1795997552492,
         "data": {"compactionId": "c-1", "summary": [{"type": "text", "text": "summary of the build"}],
                  "shadowedRange": {"start": 2, "end": 4}, "shadowedSeqs": [2, 3]}},
    ]


def claude_records(sid: str = "cc-r1") -> list[Any]:
    base = {"sessionId": sid, "cwd": "/tmp/ws", "timestamp": "2026-01-01T10:00:00Z"}
    return [
        {"type": "summary", "summary": "Robust import"},
        {**base, "type": "user", "uuid": "u-1", "message": {"role": "user", "content": "please run the build"}},
        {**base, "type": "assistant", "uuid": "a-1", "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "run bash"},
            {"type": "text", "text": "running it"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}]}},
        {**base, "type": "user", "uuid": "r-1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "build ok", "is_error": False}]}},
        {**base, "type": "user", "uuid": "s-1", "isCompactSummary": True,
         "message": {"role": "user", "content": [{"type": "text", "text": "summary of the build"}]}},
    ]


def codex_records(sid: str = "0b9d6c7e-0000-4000-8000-000000000001") -> list[Any]:
    ts = "2026-01-01T10:00:00Z"
    return [
        {"timestamp": ts, "type": "session_meta", "payload": {"id": sid, "cwd": "/tmp/ws", "timestamp": ts}},
        {"timestamp": ts, "type": "response_item", "payload": {
            "type": "message", "role": "user", "id": "m-1",
            "content": [{"type": "input_text", "text": "please run the build"}]}},
        {"timestamp": ts, "type": "response_item", "payload": {
            "type": "reasoning", "summary": [{"type": "summary_text", "text": "run bash"}]}},
        {"timestamp": ts, "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "call_id": "call_1", "arguments": "{\"cmd\": [\"make\"]}"}},
        {"timestamp": ts, "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "call_1", "output": {"content": "build ok"}}},
        {"timestamp": ts, "type": "compacted", "payload": {"message": "summary of the build"}},
    ]


def generic_records(sid: str = "g-r1") -> list[Any]:
    return [
        {"session": sid, "seq": 0, "role": "user", "text": "please run the build", "id": "m-1",
         "time": "2026-01-01T10:00:00Z", "title": "Robust import", "workspace": "/tmp/ws"},
        {"session": sid, "seq": 1, "role": "assistant", "text": "running it", "time": 1767261600},
        {"session": sid, "seq": 2, "role": "tool", "text": "build ok", "time": 1767261600123},
    ]


FORMATS = {
    "dsh": (dsh_records, "{}.session.v4.jsonl"),
    "claude-code": (claude_records, "{}.jsonl"),
    "codex": (codex_records, "rollout-2026-01-01T10-00-00-{}.jsonl"),
    "generic": (generic_records, "{}.jsonl"),
}


def _write(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8", errors="surrogatepass")
    return path


def _import(paths: list[Path], fmt: str | None, cfg, store: HistoryStore | None = None) -> dict:
    return svc.import_paths([str(p) for p in paths], fmt=fmt, cfg=cfg, store=store)


# -- regression cases from the adversarial pass ---------------------------------------

def test_cut_emoji_in_a_claude_code_tool_result_does_not_abort_the_folder(tmp_path, cfg):
    # The reported case: one tool_result holding a lone high surrogate stopped the whole
    # folder, and every rerun stopped the same way.
    folder = tmp_path / "transcripts"
    recs = claude_records("cc-emoji")
    recs[3]["message"]["content"][0]["content"] = "build ok \ud83d"
    bad = _write(folder / "proj", "cc-emoji.jsonl", [_line(r) for r in recs])
    good = _write(folder / "other", "g-good.jsonl", [_line(r) for r in generic_records("g-good")])
    rep = _import([folder], None, cfg)
    by_path = {Path(f["path"]).name: f for f in rep["files"]}
    assert by_path[bad.name]["status"] == "imported"
    assert by_path[good.name]["status"] == "imported"
    shown = svc.show("cc-emoji")
    texts = "\n".join(e["text"] for e in shown["events"])
    assert "build ok \ufffd" in texts
    rerun = _import([folder], None, cfg)
    assert {f["status"] for f in rerun["files"]} == {"unchanged"}


@pytest.mark.parametrize("fmt,mutate,why", [
    ("dsh", lambda r: r[2].__setitem__("seq", 2**63), "seq >= 2^63"),
    ("dsh", lambda r: r[2].__setitem__("time", 2**63), "time >= 2^63"),
    ("dsh", lambda r: r[0].__setitem__("createdAt", 2**64), "createdAt >= 2^63"),
    ("dsh", lambda r: r[6]["data"].__setitem__("shadowedSeqs", [2**63, 3]), "shadowed seq >= 2^63"),
    ("dsh", lambda r: r[4]["data"].__setitem__("message", "not an object"), "message is a string"),
    ("dsh", lambda r: r[6]["data"].__setitem__("shadowedRange", "x"), "range is a string"),
    ("dsh", lambda r: r[4]["data"]["message"].__setitem__("source", [1]), "source is a list"),
    ("dsh", lambda r: r[3]["data"]["message"]["content"][1].__setitem__("id", ["a"]), "call id is a list"),
    ("dsh", lambda r: r[2]["data"].__setitem__("id", {"x": 1}), "message id is an object"),
    ("dsh", lambda r: r[0].__setitem__("cwd", ["/a"]), "cwd is a list"),
    ("generic", lambda r: r[0].__setitem__("time", float("inf")), "time Infinity"),
    ("generic", lambda r: r[0].__setitem__("time", float("nan")), "time NaN"),
    ("generic", lambda r: r[1].__setitem__("time", 1e300), "time 1e300"),
    ("generic", lambda r: r[0].__setitem__("seq", -(2**70)), "seq < -2^63"),
    ("generic", lambda r: r[0].__setitem__("workspace", [1, 2]), "workspace is a list"),
    ("claude-code", lambda r: r[2]["message"]["content"][1].__setitem__("text", 5), '"text": 5'),
    ("claude-code", lambda r: r[1].__setitem__("uuid", ["u", 1]), "a list as uuid"),
    ("claude-code", lambda r: r[1].__setitem__("timestamp", float("inf")), "timestamp Infinity"),
    ("claude-code", lambda r: r[1].__setitem__("timestamp", "9999-12-31T23:59:59-23:59"), "timestamp past year 9999"),
    ("claude-code", lambda r: r[1].__setitem__("cwd", {"a": 1}), "cwd is an object"),
    ("claude-code", lambda r: r[2]["message"]["content"][2].__setitem__("id", [1]), "tool_use id is a list"),
    ("claude-code", lambda r: r[2]["message"].__setitem__("role", ["assistant"]), "role is a list"),
    ("codex", lambda r: r[0]["payload"].__setitem__("cwd", [1]), "cwd is a list"),
    ("codex", lambda r: r[1]["payload"].__setitem__("id", [1]), "message id is a list"),
    ("codex", lambda r: r[3]["payload"].__setitem__("call_id", {"x": 1}), "call_id is an object"),
    ("codex", lambda r: r[1].__setitem__("timestamp", float("nan")), "timestamp NaN"),
])
def test_one_bad_field_never_fails_the_file(tmp_path, cfg, fmt, mutate, why):
    make, name = FORMATS[fmt]
    good = make()
    good_rep = _import([_write(tmp_path / "good", name.format("good"), [_line(r) for r in good])], fmt, cfg,
                       store=HistoryStore(tmp_path / "good.sqlite"))
    recs = make()
    mutate(recs)
    path = _write(tmp_path / "bad", name.format("bad"), [_line(r) for r in recs])
    store = HistoryStore(tmp_path / "bad.sqlite")
    rep = _import([path], fmt, cfg, store=store)
    (f,) = rep["files"]
    assert f["status"] == "imported", (why, f)
    # At most the mutated record is lost; every other record of the file is imported.
    assert f["events"] >= good_rep["files"][0]["events"] - 1, (why, f)
    assert f["events"] + f["skipped"] >= good_rep["files"][0]["events"] - 1
    # What was stored reads back as valid text.
    for s in store.sessions():
        assert isinstance(s["id"], str)
        for e in store.events(s["id"]):
            e["text"].encode("utf-8")
    store.close()


def test_line_nested_100k_deep_is_skipped_and_counted(tmp_path, cfg):
    deep = "[" * 100_000 + "]" * 100_000
    recs = [_line(r) for r in generic_records("g-deep")]
    recs.insert(1, '{"session": "g-deep", "seq": 9, "role": "user", "text": ' + deep + "}")
    recs.insert(2, deep)
    path = _write(tmp_path, "deep.jsonl", recs)
    rep = _import([path], "generic", cfg)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["events"] == 3 and f["skipped"] == 2
    assert any("nested too deep" in n for n in f["notes"])


def test_deep_value_in_a_tool_input_does_not_fail_the_file(tmp_path, cfg):
    recs = claude_records("cc-deep")
    lines = [_line(r) for r in recs]
    # Deep enough to pass the JSON parser in some builds, too deep to serialise again.
    nested = "[" * 5_000 + "]" * 5_000
    lines[2] = lines[2].replace('{"command": "make"}', nested)
    rep = _import([_write(tmp_path, "cc-deep.jsonl", lines)], "claude-code", cfg)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["events"] >= 3


def test_invalid_utf8_bytes_become_replacement_characters(tmp_path, cfg):
    path = tmp_path / "bytes.jsonl"
    recs = generic_records("g-bytes")
    lines = [_line(r).encode() for r in recs]
    lines[2] = lines[2].replace(b"build ok", b"build \xff\xfe ok \xed\xa0\x80")
    path.write_bytes(b"\n".join(lines) + b"\n")
    rep = _import([path], "generic", cfg)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["events"] == 3 and f["skipped"] == 0
    text = svc.show("g-bytes", around=2, window=0)["events"][0]["text"]
    assert text.startswith("build \ufffd")
    text.encode("utf-8")  # valid UTF-8 all the way out


def test_skipped_records_are_counted_with_the_first_reasons(tmp_path, cfg):
    lines = [_line(r) for r in generic_records("g-skip")]
    lines[1:1] = ["not json", "[1, 2]", '{"session": "g-skip"}', "{\"broken\": ", '{"role": 5}']
    rep = _import([_write(tmp_path, "skip.jsonl", lines)], "generic", cfg)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["events"] == 3
    assert f["skipped"] == 5 and rep["skipped"] == 5
    reasons = [n for n in f["notes"] if "skipped" in n]
    assert len(reasons) == 3 and reasons[0].startswith("line 2: not JSON")


def test_unreadable_file_is_one_line_error_and_the_folder_goes_on(tmp_path, cfg):
    folder = tmp_path / "t"
    _write(folder, "a-good.jsonl", [_line(r) for r in generic_records("g-ok")])
    # A transcript name pointing into /proc: refused without reading (a harmless file
    # stands in for /proc/kmsg, which blocks and consumes the kernel log).
    (folder / "b-proc.jsonl").symlink_to("/proc/self/status")
    rep = _import([folder], "generic", cfg)
    by_name = {Path(f["path"]).name: f for f in rep["files"]}
    assert by_name["a-good.jsonl"]["status"] == "imported"
    err = by_name["b-proc.jsonl"]
    assert err["status"] == "error" and len(err["notes"]) == 1 and "\n" not in err["notes"][0]
    assert "pseudo-filesystem" in err["notes"][0]


def test_explicit_fifo_or_proc_path_is_a_one_line_input_error(tmp_path, cfg):
    import os

    from dsh_recall.core.errors import InputError

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        _import([fifo], None, cfg)
    with pytest.raises(InputError, match="pseudo-filesystem"):
        _import([Path("/proc/self")], None, cfg)


def test_a_row_the_store_refuses_is_skipped_not_the_file(tmp_path, cfg):
    # Readers type every field, so the store refusing a row should not happen; if it
    # does, the file's other rows are still written and the refused one counted.
    class Picky(HistoryStore):
        def write_batch(self, sessions, events, blocks, marks, file_row):
            if any(e["seq"] == 1 for e in events):
                raise sqlite3.InterfaceError("Error binding parameter 3")
            return super().write_batch(sessions, events, blocks, marks, file_row)

    store = Picky(tmp_path / "h.sqlite")
    path = _write(tmp_path, "g.jsonl", [_line(r) for r in generic_records("g-picky")])
    rep = _import([path], "generic", cfg, store=store)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["events"] == 2 and f["skipped"] == 1
    assert any("g-picky:1" in n and "InterfaceError" in n for n in f["notes"])
    assert [e["seq"] for e in store.events("g-picky")] == [0, 2]
    again = _import([path], "generic", cfg, store=store)
    assert again["files"][0]["status"] == "unchanged"
    store.close()


def test_event_refuses_wrong_types():
    with pytest.raises(TypeError):
        TranscriptEvent("s", 2**63, "user", ())
    with pytest.raises(TypeError):
        TranscriptEvent("s", 1, "user", (), message_id=["x"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TranscriptEvent("s", True, "user", ())  # type: ignore[arg-type]


def test_real_dsh_fixtures_still_import_unchanged(cfg):
    from fixtures import DSH_SESSIONS

    rep = svc.import_paths([str(DSH_SESSIONS)], cfg=cfg)
    assert all(f["status"] == "imported" and f["skipped"] == 0 for f in rep["files"])
    assert rep["index"]["sessions"] == 3


# -- properties: any JSON value in any field of each format ---------------------------

_ODD_TEXT = st.sampled_from(["", " ", "\ud800", "build ok \ud83d", "\udcff", "\x00", "\ufffd",
                             "9" * 30, "-1", "NaN", "1e999", "2026-01-01T10:00:00Z", "\u65e5\u672c"])
_LEAVES = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 0, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(exclude_categories=()), max_size=12),
    _ODD_TEXT,
)
JSON_VALUES = st.recursive(
    _LEAVES,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6) | _ODD_TEXT, kids, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a record a value can go: each key and index, nested."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(prefix + (k,))
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append(prefix + (i,))
            out.extend(_paths(v, prefix + (i,)))
    return out


def _set(record: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = value


_GOOD_SIDS = {"dsh": "sess-good", "claude-code": "cc-good", "codex": "0b9d6c7e-0000-4000-8000-00000000beef",
              "generic": "g-good"}


def _check_any_value_anywhere(fmt: str, data) -> None:
    make, name = FORMATS[fmt]
    recs = make()
    where = data.draw(st.sampled_from([(i, p) for i, r in enumerate(recs) for p in [()] + _paths(r)]))
    value = data.draw(JSON_VALUES)
    i, path = where
    if path:
        _set(recs[i], path, value)
    else:
        recs[i] = value  # the whole record replaced
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        bad = _write(folder / "bad", name.format("bad"), [_line(r) for r in recs])
        good = _write(folder / "good", name.format("good"), [_line(r) for r in make(_GOOD_SIDS[fmt])])
        store = HistoryStore(folder / "h.sqlite")
        try:
            rep = svc.import_paths([str(bad), str(good)], fmt=fmt, cfg=cfg, store=store)
            by_name = {Path(f["path"]).name: f for f in rep["files"]}
            ok = by_name[good.name]
            assert ok["status"] == "imported" and ok["skipped"] == 0
            f = by_name[bad.name]
            assert f["status"] == "imported", f
            # One bad record costs at most its own event, never the others of its file.
            assert f["events"] >= ok["events"] - 1, (where, value, f)
            json.dumps(rep, ensure_ascii=False).encode("utf-8")  # the report is valid UTF-8
            for s in store.sessions():
                json.dumps(s, ensure_ascii=False).encode("utf-8")
                for e in store.events(s["id"]):
                    e["text"].encode("utf-8")
        finally:
            store.close()


_PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(data=st.data())
def test_any_json_value_in_any_dsh_field(data):
    _check_any_value_anywhere("dsh", data)


@_PROPERTY
@given(data=st.data())
def test_any_json_value_in_any_claude_code_field(data):
    _check_any_value_anywhere("claude-code", data)


@_PROPERTY
@given(data=st.data())
def test_any_json_value_in_any_codex_field(data):
    _check_any_value_anywhere("codex", data)


@_PROPERTY
@given(data=st.data())
def test_any_json_value_in_any_generic_field(data):
    _check_any_value_anywhere("generic", data)


def test_reader_api_on_a_bad_record_directly(tmp_path):
    # The readers themselves never raise on a record: the caller gets events and a count.
    recs = dsh_records("sess-direct")
    recs[3]["data"]["message"]["content"][1]["name"] = {"x": [1]}
    recs[4]["data"]["message"]["content"] = [{"type": "text", "text": "\ud800"}]
    recs.insert(2, {"type": "user/message", "seq": 2**64, "data": {}})
    path = _write(tmp_path, "sess-direct.session.v4.jsonl", [_line(r) for r in recs])
    res = reader("dsh")(path, 0, ReadContext())
    assert res.skipped == 1 and [e.seq for e in res.events] == [2, 3, 4, 6]
    assert res.events[1].pieces[1].tool == "tool"  # a name that is not text is no name
    assert res.events[2].pieces[0].text == "\ufffd"

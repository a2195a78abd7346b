"""No planted credential is stored, over every ingest path: the seeded corpus of
bench/scrub_corpus.py goes in through the history import of each harness format the
project reads (each file written here in that harness's own shape: user and assistant
text, reasoning, tool-call arguments JSON-escaped, tool results, summaries and titles,
a title's first line cut where a secret sits), through the dsh reaper (the worker spoken
to over its wire, as the plugin does: offload with a spill file, reclaim, context, import,
idle) and through the Claude Code hooks (post-tool-use offload, user-prompt-submit's
import). Then every byte the recall home holds is read back as
tests/test_secrets_every_store.py does (databases column by column, blobs decompressed),
and also raw (free pages, write-ahead logs, caches, the vector files, every file's name):
no 8-character piece of any planted secret may be there."""

from __future__ import annotations

import io
import json
import os
import random
import sqlite3
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.dsh import loop
from dsh_recall.frontends.dsh.worker import Worker
from dsh_recall.services import history
from test_scrub_corpus import _bench
from test_secrets_every_store import _texts_of

PER_FORMAT = 7  # documents per format: 21 plants, every kind of the corpus at least once
TITLE_CUT = 80  # where a title taken from the first user line is cut (200: a named title)


@pytest.fixture(autouse=True)
def _fake_embedder(monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")


def _cut_at(text: str, secret: str, at: int) -> str:
    """`text` (a plant's first line) led by filler so that char `at` falls inside `secret`."""
    line = text.split("\n")[0]
    i = line.find(secret)
    if i < 0:
        return line
    return "see " + "x" * max(0, at - i - len(secret) // 2 - 4) + " " + line


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _args(text: str) -> dict:
    return {"command": text, "timeout": 120}


# -- each harness, in its own shape ------------------------------------------------------------
# d: PER_FORMAT document texts; t80 / t200: a first line with a secret across char 80 / 200.

def _dsh(root: Path, sid: str, d: list[str], t80: str, t200: str, zstd: bool = False) -> Path:
    p = root / "sessions" / "--work-x--" / sid / ("session.v4.jsonl.zstd" if zstd else "session.v4.jsonl")
    p.parent.mkdir(parents=True)
    ev = [{"type": "session/title", "data": {"title": t200 + "\n" + d[5]}},
          {"type": "user/message", "data": {"content": [{"type": "text", "text": t80 + "\n" + d[0]}],
                                            "source": {"kind": "user"}}},
          {"type": "assistant/message", "data": {"message": {"id": "m1", "content": [
              {"type": "reasoning", "text": d[1]}, {"type": "text", "text": d[2]},
              {"type": "tool-call", "id": "c1", "name": "bash", "arguments": _args(d[3])},
              {"type": "tool-call", "id": "c2", "name": "bash", "arguments": json.dumps(_args(d[6]))}]}}},
          {"type": "tool/result", "data": {"message": {"toolCallId": "c1", "content": [{"type": "text", "text": d[4]}]}}},
          {"type": "tool/result", "surfaceOp": {"op": "replace", "startSeq": 4, "endSeq": 4},
           "data": {"message": {"toolCallId": "c2", "isError": True, "content": [{"type": "text", "text": d[6]}]}}},
          {"type": "compaction/summary", "data": {"summary": d[5], "shadowedSeqs": [1, 2],
                                                  "shadowedRange": {"start": 1, "end": 2}}}]
    rows = [{"type": "session", "version": 4, "id": sid, "createdAt": 1_700_000_000_000, "cwd": "/work/x"}]
    rows += [{"seq": i + 1, "time": 1_700_000_000_000 + i, **e} for i, e in enumerate(ev)]
    data = _lines(rows).encode()
    if zstd:  # one frame a line, as dsh appends them
        c = zstandard.ZstdCompressor()
        data = b"".join(c.compress(line + b"\n") for line in data.splitlines())
    p.write_bytes(data)
    return p


def _claude(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    p = root / "projects" / "-work-x" / f"{sid}.jsonl"
    p.parent.mkdir(parents=True)
    base = {"sessionId": sid, "cwd": "/work/x", "timestamp": "2025-01-02T03:04:05Z"}
    p.write_text(_lines([
        {"type": "summary", "summary": t200 + " " + d[5]},
        {"type": "user", "uuid": "u1", **base, "message": {"role": "user", "content": t80 + "\n" + d[0]}},
        {"type": "assistant", "uuid": "a1", **base, "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": d[1]}, {"type": "text", "text": d[2]},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": _args(d[3])}]}},
        {"type": "user", "uuid": "u2", **base, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": d[4]}]}]}},
        {"type": "user", "uuid": "u3", **base, "isCompactSummary": True, "message": {"role": "user", "content": d[5]}},
        {"type": "user", "uuid": "u4", **base, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": d[6]}]}},
    ]))
    return p


def _codex(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    p = root / "sessions" / "2025" / "01" / "02" / f"rollout-2025-01-02T03-04-05-{sid}.jsonl"
    p.parent.mkdir(parents=True)

    def item(payload: dict, kind: str = "response_item") -> dict:
        return {"timestamp": "2025-01-02T03:04:05Z", "type": kind, "payload": payload}
    p.write_text(_lines([
        item({"id": sid, "cwd": "/work/x", "timestamp": "2025-01-02T03:04:05Z"}, "session_meta"),
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t80 + "\n" + d[0]}]}),
        item({"type": "reasoning", "summary": [{"type": "summary_text", "text": d[1]}]}),
        item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": d[2]}]}),
        item({"type": "function_call", "name": "shell", "call_id": "k1",
              "arguments": json.dumps({"command": ["bash", "-lc", d[3]]})}),
        item({"type": "function_call_output", "call_id": "k1", "output": d[4]}),
        item({"message": t200 + "\n" + d[5]}, "compacted"),
        item({"type": "custom_tool_call", "name": "apply_patch", "call_id": "k2", "input": d[6]}),
        item({"type": "custom_tool_call_output", "call_id": "k2", "output": {"content": d[6]}}),
    ]))
    return p


def _generic(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    p = root / f"{sid}.jsonl"
    p.parent.mkdir(parents=True)
    texts = [t80 + "\n" + d[0], *d[1:]]
    p.write_text(_lines([{"session": sid, "seq": i, "role": ("user", "assistant", "tool")[i % 3], "text": t,
                          **({"title": t200 + " " + t} if i == 0 else {})} for i, t in enumerate(texts)]))
    return p


def _db(path: Path, script: str, rows: list[tuple[str, tuple]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(script)
    for sql, values in rows:
        conn.execute(sql, values)
    conn.commit()
    conn.close()
    return path


def _cursor(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    kv = "INSERT INTO cursorDiskKV VALUES (?, ?)"
    old = f"{sid}-old"
    return _db(root / "User" / "globalStorage" / "state.vscdb",
               "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);"
               "CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);", [
        (kv, (f"composerData:{sid}", json.dumps({
            "_v": 10, "composerId": sid, "name": t200, "createdAt": 1766691308486,
            "fullConversationHeadersOnly": [{"bubbleId": "b1", "type": 1}, {"bubbleId": "b2", "type": 2},
                                            {"bubbleId": "b3", "type": 1}]}))),
        (kv, (f"bubbleId:{sid}:b1", json.dumps({"type": 1, "bubbleId": "b1", "text": t80 + "\n" + d[0]}))),
        (kv, (f"bubbleId:{sid}:b2", json.dumps({"type": 2, "bubbleId": "b2", "text": d[2],
                                                "thinking": {"text": d[1]}}).encode())),  # a BLOB value
        (kv, (f"bubbleId:{sid}:b3", json.dumps({"type": 1, "bubbleId": "b3", "text": d[3]}))),
        (kv, (f"composerData:{old}", json.dumps({
            "_v": 2, "composerId": old, "name": d[5], "createdAt": 1730000000000, "conversation": [
                {"type": 1, "bubbleId": "o1", "text": d[4]}, {"type": 2, "bubbleId": "o2", "text": d[6]}]}))),
    ])


def _gemini_messages(d: list[str], t80: str) -> list[dict]:
    return [
        {"id": "m1", "timestamp": "2026-04-20T10:00:05.000Z", "type": "user", "content": [{"text": t80 + "\n" + d[0]}]},
        {"id": "m2", "timestamp": "2026-04-20T10:00:09.000Z", "type": "gemini", "content": d[2],
         "thoughts": [{"subject": "Plan", "description": d[1]}],
         "toolCalls": [{"id": "g1", "name": "run_shell_command", "args": _args(d[3]), "status": "success",
                        "result": [{"functionResponse": {"id": "g1", "name": "run_shell_command",
                                                         "response": {"output": d[4]}}}]},
                       {"id": "g2", "name": "read_file", "args": {"path": "a.txt"}, "status": "error",
                        "result": [{"text": d[6]}]}]},
        {"id": "m3", "timestamp": "2026-04-20T10:00:19.000Z", "type": "user", "content": d[5]},
        {"id": "m4", "timestamp": "2026-04-20T10:00:20.000Z", "type": "info", "content": "Request cancelled."},
    ]


def _gemini(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    chats = root / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    (root / "tmp" / "proj" / ".project_root").write_text("/work/x\n")
    p = chats / f"session-2026-04-20T10-00-{sid[:8]}.jsonl"
    p.write_text(_lines([{"sessionId": sid, "projectHash": "proj", "startTime": "2026-04-20T10:00:00.000Z",
                          "lastUpdated": "2026-04-20T10:00:00.000Z"},
                         *_gemini_messages(d, t80), {"$set": {"summary": t200 + " " + d[5]}}]))
    return p


def _gemini_json(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    chats = root / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    p = chats / f"session-2025-09-01T08-00-{sid[:8]}.json"
    p.write_text(json.dumps({"sessionId": sid, "projectHash": "proj", "startTime": "2025-09-01T08:00:00.000Z",
                             "summary": t200 + " " + d[5], "messages": _gemini_messages(d, t80)}))
    return p


_OPENCODE = """
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, directory TEXT NOT NULL,
  title TEXT NOT NULL, version TEXT, time_created INTEGER NOT NULL, time_updated INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
  time_updated INTEGER, data TEXT NOT NULL);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
  time_created INTEGER, time_updated INTEGER, data TEXT NOT NULL);
CREATE TABLE session_message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, type TEXT NOT NULL,
  seq INTEGER NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER, data TEXT NOT NULL);
"""


def _opencode(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    s = "INSERT INTO session VALUES (?, 'p', NULL, 'slug', '/work/x', ?, '1', ?, ?)"
    m = "INSERT INTO message VALUES (?, ?, ?, ?, ?)"
    pt = "INSERT INTO part VALUES (?, ?, ?, 0, 0, ?)"
    sm = "INSERT INTO session_message VALUES (?, ?, ?, ?, ?, 0, ?)"
    v2 = f"{sid}-v2"
    return _db(root / "opencode" / "opencode.db", _OPENCODE, [
        (s, (sid, t200, 1750000000000, 1750000000000)),
        (m, ("msg1", sid, 1750000001000, 0, json.dumps({"role": "user", "time": {"created": 1750000001000}}))),
        (pt, ("p1", "msg1", sid, json.dumps({"type": "text", "text": t80 + "\n" + d[0]}))),
        (m, ("msg2", sid, 1750000002000, 0, json.dumps({"role": "assistant", "time": {"created": 1750000002000}}))),
        (pt, ("p2", "msg2", sid, json.dumps({"type": "reasoning", "text": d[1]}))),
        (pt, ("p3", "msg2", sid, json.dumps({"type": "tool", "callID": "o1", "tool": "bash", "state": {
            "status": "completed", "input": _args(d[3]), "output": d[4]}}))),
        (pt, ("p4", "msg2", sid, json.dumps({"type": "text", "text": d[2]}))),
        (m, ("msg3", sid, 1750000003000, 0, json.dumps({"role": "assistant", "summary": True}))),
        (pt, ("p5", "msg3", sid, json.dumps({"type": "text", "text": d[5]}))),
        (s, (v2, d[6], 1760000000000, 1760000000000)),
        (sm, ("s1", v2, "user", 1, 1760000001000, json.dumps({"text": d[0]}))),
        (sm, ("s2", v2, "assistant", 2, 1760000002000, json.dumps({"content": [
            {"type": "reasoning", "text": d[1]},
            {"type": "tool", "id": "o2", "name": "bash", "state": {"status": "error", "input": _args(d[6]),
                                                                   "error": d[6]}}]}))),
        (sm, ("s3", v2, "shell", 3, 1760000003000, json.dumps({"command": d[3], "output": d[4]}))),
        (sm, ("s4", v2, "compaction", 4, 1760000004000, json.dumps({"summary": d[5]}))),
    ])


def _aider(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    p = root / sid / ".aider.chat.history.md"
    p.parent.mkdir(parents=True)

    def user(text: str) -> list[str]:
        return [f"#### {line}  " for line in text.split("\n")]

    def tool(text: str) -> list[str]:
        return [f"> {line}  " for line in text.split("\n")]
    out = ["", "# aider chat started at 2025-06-10 09:15:02", "", *tool("Aider v0.84.0"), "",
           *user(t80 + "\n" + d[0]), "", *d[2].split("\n"), "", *tool(d[4]), "",
           "# aider chat started at 2025-06-11 14:00:00", "", *user(d[3]), "", *d[5].split("\n"), "",
           *tool(d[6]), "", *user(d[1]), ""]
    p.write_text("\n".join(out))
    return p


def _cline_messages(d: list[str], t80: str, roo: bool) -> list[dict]:
    env = "<environment_details>\n# Current Workspace Directory (/work/x) Files\nmain.py\n</environment_details>"
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": f"<task>\n{t80}\n{d[0]}\n</task>"},
                                     {"type": "text", "text": env}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": d[1]}, {"type": "text", "text": d[2]},
                                          {"type": "tool_use", "id": "tu1", "name": "execute_command",
                                           "input": _args(d[3])}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": [
            {"type": "text", "text": d[4]}], "is_error": True}]},
        {"role": "assistant", "content": d[5], "reasoning_content": d[6]},
    ]
    if roo:
        msgs += [{"type": "reasoning", "text": d[1], "summary": [{"type": "summary_text", "text": d[6]}],
                  "ts": 1718000000500},
                 {"role": "assistant", "isSummary": True, "content": [{"type": "text", "text": d[5]}],
                  "ts": 1718000000900},
                 {"role": "user", "condenseParent": "x", "content": d[3], "ts": 1718000001000}]
    return msgs


def _cline(root: Path, sid: str, d: list[str], t80: str, t200: str, roo: bool = False) -> Path:
    p = root / "tasks" / sid / "api_conversation_history.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(_cline_messages(d, t80, roo)))
    return p


def _cline_sdk(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    folder = root / "sessions" / sid
    folder.mkdir(parents=True)
    (folder / f"{sid}.json").write_text(json.dumps({"cwd": "/work/x"}))
    p = folder / f"{sid}.messages.json"
    p.write_text(json.dumps({"messages": _cline_messages(d, t80, False)}))
    return p


def _goose_content(d: list[str], t80: str) -> list[tuple[str, list]]:
    return [
        ("user", [{"type": "text", "text": t80 + "\n" + d[0]}]),
        ("assistant", [{"type": "thinking", "thinking": d[1], "signature": "x"}, {"type": "text", "text": d[2]},
                       {"type": "toolRequest", "id": "r1", "toolCall": {"status": "success", "value": {
                           "name": "developer__shell", "arguments": _args(d[3])}}}]),
        ("user", [{"type": "toolResponse", "id": "r1", "toolResult": {"status": "success", "value": {
            "content": [{"type": "text", "text": d[4]}], "isError": False}}}]),
        ("assistant", [{"type": "text", "text": d[5]},
                       {"type": "toolRequest", "id": "r2", "toolCall": {"status": "success", "value": {
                           "name": "developer__shell", "arguments": {"command": "ls"}}}}]),
        ("user", [{"type": "toolResponse", "id": "r2", "toolResult": {"status": "error", "error": d[6]}}]),
    ]


_GOOSE = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY);
INSERT INTO schema_version VALUES (13);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
  working_dir TEXT NOT NULL, created_at TIMESTAMP);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, role TEXT NOT NULL,
  content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL, metadata_json TEXT);
"""


def _goose(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    msg = "INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES (?, ?, ?, ?)"
    return _db(root / "goose" / "sessions" / "sessions.db", _GOOSE, [
        ("INSERT INTO sessions VALUES (?, ?, ?, '/work/x', '2025-11-08 09:00:00')", (sid, t200, d[5])),
        *[(msg, (sid, role, json.dumps(content), 1762592400 + i))
          for i, (role, content) in enumerate(_goose_content(d, t80))]])


def _goose_jsonl(root: Path, sid: str, d: list[str], t80: str, t200: str) -> Path:
    p = root / "goose" / "sessions" / f"{sid}.jsonl"
    p.parent.mkdir(parents=True)
    p.write_text(_lines([{"working_dir": "/work/x", "description": t200, "message_count": 5},
                         *[{"role": role, "created": 1740823200 + i, "content": content}
                           for i, (role, content) in enumerate(_goose_content(d, t80))]]))
    return p


# (format, writer, the format history import is told; None: sniffed from the file)
FORMATS = [
    ("dsh", _dsh, "dsh"),
    ("dsh-zstd", lambda *a: _dsh(*a, zstd=True), None),
    ("claude-code", _claude, "claude-code"),
    ("codex", _codex, None),
    ("generic", _generic, "generic"),
    ("cursor", _cursor, None),
    ("gemini", _gemini, None),
    ("gemini-json", _gemini_json, "gemini"),
    ("opencode", _opencode, None),
    ("aider", _aider, None),
    ("cline", _cline, "cline"),
    ("roo-code", lambda *a: _cline(*a, roo=True), "roo-code"),
    ("cline-sdk", _cline_sdk, None),
    ("goose", _goose, None),
    ("goose-jsonl", _goose_jsonl, "goose"),
]


# -- reading the store back --------------------------------------------------------------------

def _everything(roots: list[Path]) -> dict[str, str]:
    """Every file under `roots` (its name, then what it holds: `_texts_of`) by path; a WAL
    beside a database is a file of its own."""
    out: dict[str, str] = {}
    for root in roots:
        for f in sorted(root.rglob("*")):
            texts = [str(f.relative_to(root))]
            if f.is_file() and not f.is_symlink():
                texts += _texts_of(f)
            out[str(f)] = "\n".join(texts)
    assert sum(f.is_file() for root in roots for f in root.rglob("*")) > 5
    return out


def _left(plants: list[tuple[str, str]], files: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(kind, secret's head, file, the text around) of each plant with an 8-character piece
    (the whole of a shorter one) in a file, backslashes aside (bench.survives, in one pass)."""
    pieces: dict[str, tuple[str, str]] = {}
    shorts = []
    for kind, secret in plants:
        s = secret.replace("\\", "")
        if len(s) <= 8:
            shorts.append((kind, s))
        for i in range(len(s) - 7):
            pieces.setdefault(s[i:i + 8], (kind, s))
    left: dict[tuple[str, str], tuple[str, str, str, str]] = {}
    for name, text in files.items():
        blob = text.replace("\\", "")
        for kind, s in shorts:
            if s in blob:
                left.setdefault((kind, s), (kind, s[:16], name, s))
        for i in range(len(blob) - 7):
            hit = pieces.get(blob[i:i + 8])
            if hit is not None and hit not in left:
                left[hit] = (hit[0], hit[1][:16], name, blob[max(0, i - 60):i + 60])
    return list(left.values())


# -- the test ----------------------------------------------------------------------------------

def test_no_planted_secret_is_stored_by_any_harness_import_the_reaper_or_the_hooks(tmp_path, monkeypatch):
    bench = _bench()
    kinds = list(bench.PLANTS)
    rng = random.Random(4040)  # not the corpus seed: its secrets would repeat
    docs = list(enumerate(bench.corpus(PER_FORMAT * len(FORMATS) + 40, seed=3939)))
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    plants: list[tuple[str, str]] = []
    markers: list[str] = []  # a line of every document, proof that it was stored at all

    def take(n: int, stored: bool = True) -> list[str]:
        got, docs[:] = docs[:n], docs[n:]
        for i, doc in got:
            plants.extend(doc.plants)
            if stored:
                markers.append(f"[{i}:{doc.plants[0][0]}]")
        return [doc.text for _, doc in got]

    def cut(j: int, at: int) -> str:
        text, secret = bench.PLANTS[kinds[j % len(kinds)]](rng)
        plants.append((kinds[j % len(kinds)], secret))
        return _cut_at(text, secret, at)

    # 1. History: every harness format, imported by the real import.
    harness = tmp_path / "harness"
    for j, (name, write, fmt) in enumerate(FORMATS):
        sid = f"{name}-{j:02d}-4e8f-9a10-b2c3d4e5f601"
        path = write(harness / name, sid, take(PER_FORMAT), cut(2 * j, TITLE_CUT), cut(2 * j + 1, 200))
        rep = history.import_paths([str(path)], fmt=fmt, cfg=cfg)
        (f,) = rep["files"]
        assert f["status"] == "imported" and f["events"] >= 4, (name, f)

    # 2. The dsh reaper: the worker over its wire, as the plugin speaks to it.
    dsh_home = tmp_path / "dsh"
    pad = "".join(f"step {i} ok\n" for i in range(3000))
    spill = tmp_path / "dsh-subprocess-AbC123" / "dsh-subprocess-77-1-abc-stdout.log"
    spill.parent.mkdir()
    whole = pad + "\n".join(take(4)) + "\n" + pad
    spill.write_text(whole)
    shown = whole[-20000:] + f"\n[output truncated; full output: {spill}]"
    session_log = take(PER_FORMAT)
    _dsh(dsh_home, "sess-reaper", session_log, cut(40, TITLE_CUT), cut(41, 200))
    reclaim = [{"seq": 10 * (i + 1), "tool": "bash", "text": pad + t + "\n" + pad} for i, t in enumerate(take(4))]
    reclaim += [{"seq": 50 + i, "tool": "bash", "text": pad} for i in range(2)]  # the newest stay
    requests = [
        {"op": "hello"},
        {"op": "offload", "session": "sess-reaper", "call_id": "call-1", "tool": "bash",
         "blocks": [shown, None, pad + take(1)[0]]},
        {"op": "reclaim", "session": "sess-reaper", "results": reclaim},
        {"op": "import", "session": "sess-reaper"},
        {"op": "context", "session": "sess-reaper", "message_id": "u9", "message": take(1, stored=False)[0]},
        {"op": "status"},
    ]
    out = io.BytesIO()
    wire = b"".join(json.dumps({"id": i + 1, **r}).encode() + b"\n" for i, r in enumerate(requests))
    worker = Worker(dsh_home=str(dsh_home))
    loop.serve(io.BytesIO(wire), out, worker, idle_s=0.05)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert all(a["ok"] for a in answers), [a.get("error") for a in answers]
    offload = answers[2]["result"]
    assert offload["ids"][0] and offload["ids"][2], offload
    assert answers[3]["result"]["replace"], "reclaim offloaded nothing"
    assert answers[4]["result"]["imported"] is True

    # 3. The Claude Code hooks: post-tool-use offloads, user-prompt-submit imports.
    for i, t in enumerate(take(3)):
        payload = {"session_id": "hook-sess", "transcript_path": "/nowhere.jsonl", "cwd": str(tmp_path),
                   "hook_event_name": "PostToolUse", "tool_name": ("Bash", "mcp__db__query", "Grep")[i],
                   "tool_input": {"command": "x"}, "tool_use_id": f"toolu_{i}",
                   "tool_response": ({"stdout": pad + t, "stderr": "", "interrupted": False, "isImage": False}
                                     if i != 1 else [{"type": "text", "text": pad + t}])}
        res = CliRunner().invoke(cli, ["hook", "claude-code", "post-tool-use"], input=json.dumps(payload))
        assert res.exit_code == 0 and "hookSpecificOutput" in res.stdout, res.stdout
    transcript = _claude(tmp_path / "cc", "hook-sess", take(PER_FORMAT), cut(42, TITLE_CUT), cut(43, 200))
    payload = {"session_id": "hook-sess", "transcript_path": str(transcript), "cwd": str(tmp_path),
               "hook_event_name": "UserPromptSubmit", "prompt": "what did we decide earlier?"}
    res = CliRunner().invoke(cli, ["hook", "claude-code", "user-prompt-submit"], input=json.dumps(payload))
    assert res.exit_code == 0, res.output
    assert history.require_session("hook-sess")["events"] >= 5

    # Every byte of the recall home back.
    files = _everything([Path(os.environ["DSH_RECALL_HOME"])])
    assert any(f.endswith(".i8v") for f in files)  # the vector layer embedded what was imported
    plain = "\n".join(files.values()).replace("\\", "")
    missing = [m for m in markers if m not in plain]
    assert not missing, missing  # every document reached a store (else this proves nothing)
    left = _left(plants, files)
    assert not left, left

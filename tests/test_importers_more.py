"""History importers for Cursor, Gemini CLI, OpenCode, Aider, Cline / Roo Code and Goose.

Fixtures are hand-made from each harness's documented format (tests/fixtures/harnesses/;
the SQLite ones are built here from the committed .sql). Each is imported through the real
import path and found through the real history search.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.services import history as svc
from fixtures import HERE

FIX = HERE / "harnesses"
GEMINI_CHATS = FIX / "gemini" / "tmp" / "ledger-app" / "chats"
GEMINI_JSONL = GEMINI_CHATS / "session-2026-04-20T10-00-5e1f0a2b.jsonl"
GEMINI_SID = "5e1f0a2b-7c4d-4e8f-9a10-b2c3d4e5f601"
CLINE = FIX / "cline" / "tasks" / "1718000000000" / "api_conversation_history.json"
CLINE_SDK = FIX / "cline" / "sessions" / "1760000000000_ab12c" / "1760000000000_ab12c.messages.json"
ROO = (FIX / "roo-code" / "rooveterinaryinc.roo-cline" / "tasks" / "7f3c2a10-5b7e-4d1a-9c33-2a1b0c9d8e7f"
       / "api_conversation_history.json")
GOOSE_JSONL = FIX / "goose" / "sessions" / "20250301_1.jsonl"
AIDER = FIX / "aider" / ".aider.chat.history.md"
COMPOSER = "c0ffee00-1111-4222-8333-444455556666"


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _db(sql: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(dest)
    conn.executescript(sql.read_text())
    conn.commit()
    conn.close()
    return dest


def _cursor_db(root: Path) -> Path:
    return _db(FIX / "cursor" / "state.sql", root / "Cursor" / "User" / "globalStorage" / "state.vscdb")


def _opencode_db(root: Path) -> Path:
    return _db(FIX / "opencode" / "opencode.sql", root / "opencode" / "opencode.db")


def _goose_db(root: Path) -> Path:
    return _db(FIX / "goose" / "sessions.sql", root / "goose" / "sessions" / "sessions.db")


def _hits(query, cfg, **scope):
    ans = svc.search(query, detail=True, layers=["literal"], cfg=cfg, **(scope or {"all_sessions": True}))
    return ans["hits"]


def _found(query, cfg, session, role):
    hits = _hits(query, cfg)
    assert any(h["session"] == session and h["role"] == role for h in hits), (query, hits)


CASES = [
    # (harness, path maker, query, session, role)
    ("gemini", lambda t: GEMINI_JSONL, "overdraft reconciliation", GEMINI_SID, "user"),
    ("gemini", lambda t: GEMINI_JSONL, "separate overdraft pass", GEMINI_SID, "assistant"),
    ("gemini", lambda t: GEMINI_CHATS / "session-2025-09-01T08-00-0b7d9c3e.json", "load_ledger_fixtures",
     "0b7d9c3e-1111-4222-8333-944455556666", "assistant"),
    ("cline", lambda t: CLINE, "jitter webhook", "cline:1718000000000", "user"),
    ("cline", lambda t: CLINE, "sendWebhook fetch", "cline:1718000000000", "tool"),
    ("cline", lambda t: CLINE_SDK, "soft bounces", "cline:1760000000000_ab12c", "user"),
    ("cline", lambda t: CLINE_SDK, "startsWith record", "cline:1760000000000_ab12c", "tool"),
    ("roo-code", lambda t: ROO, "invoices table singular", "roo-code:7f3c2a10-5b7e-4d1a-9c33-2a1b0c9d8e7f",
     "summary"),
    ("goose", lambda t: GOOSE_JSONL, "state lock", "goose:20250301_1", "user"),
    ("goose", lambda t: GOOSE_JSONL, "force-unlock LOCK_ID", "goose:20250301_1", "tool"),
    ("goose", _goose_db, "idle_in_transaction_session_timeout", "goose:20251108_1", "assistant"),
    ("goose", _goose_db, "pg_stat_activity", "goose:20251108_1", "assistant"),
    ("opencode", _opencode_db, "autocomplete p95", "ses_01JA", "user"),
    ("opencode", _opencode_db, "GROUP BY query", "ses_01JA", "assistant"),
    ("opencode", _opencode_db, "prefixes db.execute", "ses_01JA", "tool"),
    ("opencode", _opencode_db, "trigram index downtime", "ses_02V2", "user"),
    ("opencode", _opencode_db, "CONCURRENTLY swap", "ses_02V2", "assistant"),
    ("opencode", _opencode_db, "shadow trigram rename", "ses_02V2", "summary"),
    ("cursor", _cursor_db, "websocket reconnect", COMPOSER, "user"),
    ("cursor", _cursor_db, "heartbeat fake clock", COMPOSER, "assistant"),
    ("cursor", _cursor_db, "gradle version catalog", "0ld0ld00-aaaa-4bbb-8ccc-dddd00000001", "user"),
    ("aider", lambda t: AIDER, "semicolon separated", None, "user"),
    ("aider", lambda t: AIDER, "byte order mark utf-8-sig", None, "assistant"),
    ("aider", lambda t: AIDER, "Applied edit importer", None, "tool"),
]


@pytest.mark.parametrize(("harness", "make", "query", "session", "role"), CASES,
                         ids=[f"{c[0]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_fixture_imports_and_is_found_by_search(cfg, tmp_path, harness, make, query, session, role):
    path = make(tmp_path)
    rep = svc.import_paths([str(path)], cfg=cfg)  # format detected from the file, as by default
    (f,) = rep["files"]
    assert f["format"] == harness and f["status"] == "imported", f
    hits = [h for h in _hits(query, cfg) if h["role"] == role]
    assert hits, (query, _hits(query, cfg))
    sid = session or hits[0]["session"]
    assert any(h["session"] == sid for h in hits)
    info = svc.require_session(sid)
    assert info["source"] == harness


def test_sessions_carry_workspace_title_and_time(cfg, tmp_path):
    svc.import_paths([str(GEMINI_JSONL), str(ROO), str(_opencode_db(tmp_path)), str(_goose_db(tmp_path))], cfg=cfg)
    gem = svc.require_session(GEMINI_SID)
    assert gem["workspace"] == "/home/dev/src/ledger-app"  # from the project's .project_root
    assert gem["title"] == "Overdraft rows skipped by reconciliation"  # the $set summary
    assert gem["created"].startswith("2026-04-20")
    roo = svc.require_session("roo-code:7f3c2a10-5b7e-4d1a-9c33-2a1b0c9d8e7f")
    assert roo["workspace"] == "/home/dev/src/billing"
    assert roo["title"] == "Why is the nightly export missing the invoices table?"
    assert svc.require_session("ses_01JA")["workspace"] == "/home/dev/src/search-api"
    assert svc.require_session("ses_01JA")["events"] == 3  # not doubled by its session_message copy
    assert [e["role"] for e in svc.show("ses_02V2", page=1)["events"]] == ["user", "assistant", "tool", "summary"]
    assert svc.require_session("goose:20251108_1")["title"] == "Postgres vacuum"
    svc.import_paths([str(CLINE_SDK)], cfg=cfg)
    assert svc.require_session("cline:1760000000000_ab12c")["workspace"] == "/home/dev/src/mailer"  # manifest cwd
    ws = svc.search("overdraft", workspace="ledger-app", detail=True, cfg=cfg)
    assert ws["hits"] and {h["session"] for h in ws["hits"]} == {GEMINI_SID}


def test_gemini_replays_updates_and_rewinds(cfg):
    rep = svc.import_paths([str(GEMINI_JSONL)], cfg=cfg)
    (f,) = rep["files"]
    assert f["skipped"] == 1 and f["notes"] == ["line 6: not JSON; skipped"]
    assert not _hits("first draft take back", cfg)  # rewound away
    events = svc.show(GEMINI_SID, page=1)["events"]
    # user, the updated model turn (once, with its tool call), its tool result, the last turn
    assert [e["role"] for e in events] == ["user", "assistant", "tool", "assistant"]
    assert "[reasoning] Finding the filter" in events[1]["text"]
    assert "search_file_content" in events[1]["text"]


def test_roo_code_condensed_messages_are_kept_and_flagged(cfg):
    svc.import_paths([str(ROO)], cfg=cfg)
    sid = "roo-code:7f3c2a10-5b7e-4d1a-9c33-2a1b0c9d8e7f"
    events = svc.show(sid, page=1)["events"]
    assert [e["role"] for e in events] == ["user", "assistant", "summary", "user"]
    assert "summarized" in events[1]["flags"]
    assert "environment_details" not in events[0]["text"]


def test_aider_runs_are_sessions_and_reply_headings_stay_replies(cfg):
    rep = svc.import_paths([str(AIDER)], cfg=cfg)
    sessions = sorted(rep["files"][0]["sessions"], key=lambda s: int(s.rsplit(":", 1)[1]))  # by start line
    assert len(sessions) == 2 and all(s.startswith("aider:") for s in sessions)
    first = svc.show(sessions[0], page=1)["events"]
    roles = [e["role"] for e in first]
    assert roles == ["tool", "user", "assistant", "tool"]
    assert "Headings in a reply stay with the reply" in first[2]["text"]
    second = svc.show(sessions[1], page=1)["events"]
    assert second[0]["role"] == "user" and "bank export" in second[0]["text"]  # two input lines, one turn


def test_malformed_records_are_skipped_and_counted(cfg, tmp_path):
    rep = svc.import_paths([str(CLINE), str(_opencode_db(tmp_path)), str(_goose_db(tmp_path))], cfg=cfg)
    by = {f["format"]: f for f in rep["files"]}
    assert by["cline"]["skipped"] == 1 and by["cline"]["status"] == "imported"
    assert by["cline"]["notes"] == ["message 4: not an object; skipped"]
    assert by["opencode"]["notes"][0].startswith("message msg_03:")
    assert by["opencode"]["skipped"] == 1
    assert by["goose"]["skipped"] == 1


def test_cursor_unknown_composer_layout_is_named_and_skipped(cfg, tmp_path):
    rep = svc.import_paths([str(_cursor_db(tmp_path))], cfg=cfg)
    (f,) = rep["files"]
    assert f["status"] == "imported" and f["skipped"] == 1
    assert any("unknown layout (_v 99)" in n for n in f["notes"])
    assert sorted(f["sessions"]) == sorted([COMPOSER, "0ld0ld00-aaaa-4bbb-8ccc-dddd00000001"])


def test_unknown_format_versions_are_clear_errors_and_lose_nothing(cfg, tmp_path):
    db = _goose_db(tmp_path)
    conn = sqlite3.connect(db)  # a future goose that moved message content elsewhere
    conn.executescript("ALTER TABLE messages RENAME COLUMN content_json TO payload; "
                       "INSERT INTO schema_version (version) VALUES (14);")
    conn.commit()
    conn.close()
    gem = tmp_path / "chats" / "session-2024-01-01T00-00-deadbeef.json"
    gem.parent.mkdir()
    gem.write_text(json.dumps({"sessionId": "x", "projectHash": "y", "turns": []}))
    cline = tmp_path / "tasks" / "42" / "api_conversation_history.json"
    cline.parent.mkdir(parents=True)
    cline.write_text(json.dumps({"version": 9, "messages": []}))
    rep = svc.import_paths([str(db), str(gem), str(cline)], cfg=cfg)
    for f in rep["files"]:
        assert f["status"] == "error" and len(f["notes"]) == 1, f
    notes = {f["format"]: f["notes"][0] for f in rep["files"]}
    assert "schema v14" in notes["goose"] and "messages.content_json" in notes["goose"]
    assert "no messages list" in notes["gemini"]
    assert "not a JSON array" in notes["cline"]
    # Nothing was recorded as read: once the file is readable, it is imported in full.
    conn = sqlite3.connect(db)
    conn.execute("ALTER TABLE messages RENAME COLUMN payload TO content_json")
    conn.commit()
    conn.close()
    again = svc.import_paths([str(db)], cfg=cfg)
    assert again["files"][0]["status"] == "imported" and again["files"][0]["events"] == 4


def test_incremental_append_rewind_and_unchanged(cfg, tmp_path):
    path = tmp_path / "chats" / GEMINI_JSONL.name
    path.parent.mkdir()
    shutil.copy(GEMINI_JSONL, path)
    first = svc.import_paths([str(path)], cfg=cfg)["files"][0]
    assert first["events"] == 4
    assert svc.import_paths([str(path)], cfg=cfg)["files"][0]["status"] == "unchanged"
    with path.open("a") as f:  # the session goes on: only the new turn is written
        f.write(json.dumps({"id": "m6", "timestamp": "2026-04-20T10:01:00.000Z", "type": "user",
                            "content": "and the refundable ones too?"}) + "\n")
    grown = svc.import_paths([str(path)], cfg=cfg)["files"][0]
    assert grown["status"] == "imported" and grown["events"] == 1
    assert svc.status()["events"] == 5
    _found("refundable", cfg, GEMINI_SID, "user")
    with path.open("a") as f:  # a rewind to the last turn: the session is written again
        f.write(json.dumps({"$rewindTo": "m6"}) + "\n")
        f.write(json.dumps({"id": "m7", "type": "user", "timestamp": "2026-04-20T10:02:00.000Z",
                            "content": "what about chargebacks"}) + "\n")
    rewound = svc.import_paths([str(path)], cfg=cfg)["files"][0]
    assert rewound["events"] == 5
    assert not _hits("refundable", cfg) and _hits("chargebacks", cfg)
    assert svc.status()["events"] == 5


def test_incremental_sqlite_writes_only_changed_sessions(cfg, tmp_path):
    db = _cursor_db(tmp_path)
    svc.import_paths([str(db)], cfg=cfg)
    blocks = svc.status()["blocks"]
    assert svc.import_paths([str(db)], cfg=cfg)["files"][0]["status"] == "unchanged"
    conn = sqlite3.connect(db)
    key = f"composerData:{COMPOSER}"
    data = json.loads(conn.execute("SELECT value FROM cursorDiskKV WHERE key = ?", (key,)).fetchone()[0])
    data["fullConversationHeadersOnly"].append({"bubbleId": "b-user-2", "type": 1})
    conn.execute("UPDATE cursorDiskKV SET value = ? WHERE key = ?", (json.dumps(data), key))
    conn.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (f"bubbleId:{COMPOSER}:b-user-2", json.dumps(
        {"_v": 3, "type": 1, "bubbleId": "b-user-2", "text": "now the flaky grpc stream test"})))
    conn.commit()
    conn.close()
    rep = svc.import_paths([str(db)], cfg=cfg)["files"][0]
    assert rep["status"] == "imported" and rep["events"] == 1 and rep["sessions"] == [COMPOSER]
    assert svc.status()["blocks"] == blocks + 1
    _found("grpc stream", cfg, COMPOSER, "user")


def test_secrets_are_scrubbed_like_every_import(cfg):
    svc.import_paths([str(GEMINI_JSONL)], cfg=cfg)
    events = svc.show(GEMINI_SID, page=1)["events"]
    tool = next(e for e in events if e["role"] == "tool")
    assert "[secret:password]" in tool["text"] and "s3cr3t-value" not in tool["text"]
    assert not _hits("s3cr3t-value", cfg)


def test_default_locations_are_discovered(cfg, tmp_path, monkeypatch):
    home = tmp_path / "home"
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "GEMINI_CLI_HOME", "CLINE_DIR", "CLINE_DATA_DIR",
                "GOOSE_PATH_ROOT", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    shutil.copytree(FIX / "gemini" / "tmp", home / ".gemini" / "tmp")
    shutil.copytree(CLINE.parent, home / ".cline" / "data" / "tasks" / CLINE.parent.name)
    shutil.copytree(CLINE_SDK.parent, home / ".cline" / "data" / "sessions" / CLINE_SDK.parent.name)
    roo = home / ".config" / "Code" / "User" / "globalStorage" / "rooveterinaryinc.roo-cline" / "tasks"
    shutil.copytree(ROO.parent, roo / ROO.parent.name)
    _cursor_db(home / ".config")
    _opencode_db(home / ".local" / "share")
    _goose_db(home / ".local" / "share")
    shutil.copy(GOOSE_JSONL, home / ".local" / "share" / "goose" / "sessions")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    shutil.copy(AIDER, project)
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")  # aider's file sits at the git root
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(AIDER, tmp_path / "elsewhere")  # not a default location: never read
    rep = svc.import_paths(cfg=cfg)
    formats = sorted(f["format"] for f in rep["files"])
    assert formats == sorted(["gemini", "gemini", "cline", "cline", "roo-code", "cursor", "opencode", "goose", "goose",
                              "aider"]), rep["files"]
    assert all(f["status"] == "imported" for f in rep["files"])
    assert not any("elsewhere" in f["path"] for f in rep["files"])
    for sid in (GEMINI_SID, "cline:1718000000000", COMPOSER, "ses_01JA", "goose:20251108_1"):
        assert svc.require_session(sid)["events"] > 0


def test_sqlite_rows_in_the_write_ahead_log_count_as_a_change(cfg, tmp_path):
    db = _goose_db(tmp_path)
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # new rows stay in sessions.db-wal, as while goose runs
    svc.import_paths([str(db)], cfg=cfg)
    writer.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) VALUES "
                   "('20251108_1', 'user', '[{\"type\":\"text\",\"text\":\"and the toast tables?\"}]', 1762592500)")
    writer.commit()
    try:
        rep = svc.import_paths([str(db)], cfg=cfg)["files"][0]
        assert rep["status"] == "imported" and rep["events"] == 1
        _found("toast", cfg, "goose:20251108_1", "user")
    finally:
        writer.close()


def test_a_database_of_another_application_is_a_clear_error(cfg, tmp_path):
    vscode = tmp_path / "Code" / "User" / "globalStorage" / "state.vscdb"  # VS Code's: no cursorDiskKV
    vscode.parent.mkdir(parents=True)
    conn = sqlite3.connect(vscode)
    conn.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
    conn.commit()
    conn.close()
    junk = tmp_path / "opencode" / "opencode.db"
    junk.parent.mkdir()
    junk.write_bytes(b"not a database at all\n" * 100)
    rep = svc.import_paths([str(vscode), str(junk)], cfg=cfg)
    notes = {f["format"]: (f["status"], f["notes"]) for f in rep["files"]}
    assert notes["cursor"][0] == "error" and "no table cursorDiskKV" in notes["cursor"][1][0]
    assert notes["opencode"][0] == "error" and "not a readable SQLite database" in notes["opencode"][1][0]


def test_cli_import_takes_the_new_formats(monkeypatch):
    from click.testing import CliRunner

    from dsh_recall.frontends.cli import cli

    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    r = CliRunner().invoke(cli, ["history", "import", str(CLINE), "--format", "cline", "--json"])
    assert r.exit_code == 0, r.output
    files = json.loads(r.output)["files"]
    assert files[0]["format"] == "cline" and files[0]["events"] == 4


def test_a_document_adds_a_bounded_amount_to_the_store(cfg, tmp_path, monkeypatch):
    # A chat database repeats itself (each message quoting the thread): a hostile one of
    # 0.9 MB grew the history store to 951 MB. Past its bound the rest stays out, said once.
    from dsh_recall.services.history import documents

    monkeypatch.setattr(documents, "GROWTH", 0)  # nothing per byte: the floor alone
    monkeypatch.setattr(documents, "GROWTH_FLOOR", 300)  # the fixture's events: 63-142 chars
    monkeypatch.setattr(documents, "EVENT_CHARS", 1)  # their length alone
    doc = tmp_path / "proj" / ".aider.chat.history.md"
    doc.parent.mkdir()
    shutil.copy(AIDER, doc)
    f = svc.import_paths([str(doc)], cfg=cfg)["files"][0]
    assert 0 < f["events"] < 6 and sum("stopped after" in n for n in f["notes"]) == 1, f
    # An unchanged document is not read again (the bound is per import of a changed one).
    assert svc.import_paths([str(doc)], cfg=cfg)["files"][0]["status"] == "unchanged"


def test_a_document_of_one_line_messages_is_bounded_by_its_events(cfg, tmp_path, monkeypatch):
    # A 4 MB Aider history of one-line messages was 325k events: 33 s and 550 MB to import.
    # Each event counts as EVENT_CHARS at least against the document's room, and a reader
    # stops holding events at MAX_DOCUMENT_EVENTS; both are said in the file's notes.
    from dsh_recall.readers.transcripts import document
    from dsh_recall.services.history import documents

    monkeypatch.setattr(documents, "GROWTH_FLOOR", 0)  # the per-byte room alone: 16 x size
    doc = tmp_path / "proj" / ".aider.chat.history.md"
    doc.parent.mkdir()
    rows = [f"#### q{i}  \n> r{i}  \nreply {i}\n" for i in range(2000)]
    doc.write_text("# aider chat started at 2026-01-01 10:00:00\n\n" + "".join(rows))
    size = doc.stat().st_size
    f = svc.import_paths([str(doc)], cfg=cfg)["files"][0]
    bound = documents.GROWTH * size // documents.EVENT_CHARS
    assert bound // 2 < f["events"] <= bound < 6000, (f["events"], bound)
    assert sum("counts as 1,024 chars" in n for n in f["notes"]) == 1, f["notes"]
    # The reader's own bound: it stops holding events, says so once, and what it read is kept.
    monkeypatch.setattr(document, "MAX_DOCUMENT_EVENTS", 100)
    monkeypatch.setattr(documents, "EVENT_CHARS", 1)
    doc2 = tmp_path / "proj2" / ".aider.chat.history.md"
    doc2.parent.mkdir()
    shutil.copy(doc, doc2)
    f = svc.import_paths([str(doc2)], cfg=cfg)["files"][0]
    assert f["events"] == 100 and sum("stopped reading after 100 events" in n for n in f["notes"]) == 1, f

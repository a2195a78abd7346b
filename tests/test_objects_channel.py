"""Objects carry the access channel that produced them (issue 9); a reader that may not see
a channel gets exactly what an unknown id gets, and listings leave such objects out."""

from __future__ import annotations

import sqlite3
import zlib

import pytest

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.core.errors import InputError
from dsh_recall.services.objects import ObjectService, ResultText
from dsh_recall.stores.sqlite.objects import ObjectStore, text_sha


def _log(n: int, tag: str = "") -> str:
    return "".join(f"{tag}line {i}: running test_case_{i} ok\n" for i in range(n))


class _Sees:
    """A viewer (services.access.channel.Viewer's surface) seeing the channels `pred` allows."""

    unfiltered = False

    def __init__(self, pred):
        self.can_see = pred


owner_only = _Sees(lambda channel: channel == "owner")
group_view = _Sees(lambda channel: channel in ("group:team", "guest"))


def _error(call) -> str:
    with pytest.raises(InputError) as e:
        call()
    return str(e.value)


def test_channel_is_recorded_and_hidden_reads_look_like_unknown_ids(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        secret = svc.put(_log(400, "secret "), session="s", tool="Bash", channel="owner")
        public = svc.put(_log(400, "public "), session="g", tool="Bash", channel="group:team")
        assert svc.store.get(secret.id).channel == "owner"
        assert svc.store.get(public.id).channel == "group:team"
        recalls = svc.stats()["recalls"]

        unknown = _error(lambda: svc.get("deadbeef", viewer=group_view))
        for call in (lambda i: svc.get(i, viewer=group_view),
                     lambda i: svc.get(i, 100, 50, viewer=group_view),
                     lambda i: svc.search_in(i, "secret", viewer=group_view),
                     lambda i: svc.size(i, viewer=group_view)):
            msg = _error(lambda: call(secret.id))
            assert msg == unknown.replace("deadbeef", secret.id)
            assert "secret" not in msg.replace(secret.id, "")
        assert svc.stats()["recalls"] == recalls  # refused reads count no recall

        # the reader's own channel, and no predicate at all (the user), still see it
        assert svc.get(public.id, viewer=group_view).text.startswith("public ")
        assert svc.search_in(public.id, "public", viewer=group_view).matches
        assert svc.size(secret.id, viewer=owner_only) == len(_log(400, "secret "))
        assert svc.get(secret.id).total == len(_log(400, "secret "))
        assert svc.stats()["recalls"] == recalls + 3


def test_evicted_object_of_another_channel_is_not_even_said_to_be_evicted(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        old = svc.put(_log(400), session="s", channel="owner")
        svc.gc(max_age_days=0)
        assert "evicted" in _error(lambda: svc.get(old.id, viewer=owner_only))
        unknown = _error(lambda: svc.get("deadbeef", viewer=group_view))
        assert _error(lambda: svc.get(old.id, viewer=group_view)) == unknown.replace(
            "deadbeef", old.id)


def test_listings_leave_out_objects_the_reader_may_not_see(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        mine = svc.put(_log(400, "a "), session="g", tool="GroupTool", channel="group:team")
        other = svc.put(_log(500, "b "), session="s", tool="SecretTool", channel="owner")
        legacy = svc.put(_log(600, "c "), session="x", tool="OldTool")  # no channel
        every = svc.stats()
        assert {r["id"] for r in every["recent"]} == {mine.id, other.id, legacy.id}

        seen = svc.stats(viewer=group_view)
        assert [r["id"] for r in seen["recent"]] == [mine.id]
        assert seen["offloaded"] == 1 and seen["live"] == 1
        assert seen["chars_offloaded"] == len(_log(400, "a "))
        assert "SecretTool" not in str(seen) and other.id not in str(seen)
        # None is a channel like any other for the predicate: objects stored before
        # channels existed are shown only to a reader that accepts None.
        assert {r["id"] for r in svc.stats(viewer=_Sees(lambda c: c is None))["recent"]} == {legacy.id}

        out = svc.gc(max_age_days=0, viewer=group_view)
        assert out["ids"] == [mine.id] and out["evicted"] == 1
        assert svc.stats()["evicted"] == 3  # retention itself covers the whole store


def test_same_session_seq_of_another_channel_reveals_nothing(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        text = _log(400)
        a = svc.put(text, session="s", seq=1, channel="owner")
        b = svc.put(text, session="s", seq=1, channel="guest")
        assert b.id is None and not b.offloaded and b.inline == text
        assert svc.put(text, session="s", seq=1, channel="owner") == a
        # the same text under its own (session, seq) is stored for the other channel,
        # sharing the payload but not the access
        c = svc.put(text, session="t", seq=1, channel="guest")
        assert c.offloaded and c.id != a.id
        assert svc.stats()["blobs"] == 1
        assert _error(lambda: svc.get(a.id, viewer=group_view)).startswith("no object")
        assert svc.get(c.id, viewer=group_view).text == text[:8000]


def test_reclaim_records_the_channel_and_skips_only_what_the_reader_may_see(tmp_path):
    with ObjectService(ObjectsConfig(keep=0), path=tmp_path / "o.sqlite") as svc:
        results = [ResultText(i, _log(300, f"r{i} ")) for i in range(3)]
        out = svc.reclaim("conv", results, channel="guest", viewer=group_view)
        assert sorted(out) == [0, 1, 2]
        assert {svc.store.get(r.id).channel for r in out.values()} == {"guest"}
        assert svc.reclaim("conv", results, channel="guest", viewer=group_view) == {}
        # another channel's reclaim of the same conversation neither rewrites nor reveals
        assert svc.reclaim("conv", results, channel="owner", viewer=owner_only) == {}


OLD_SCHEMA = [  # the object store as the first release wrote it (no channel, no index)
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE blobs (sha TEXT PRIMARY KEY, raw_bytes INTEGER NOT NULL, "
    "stored_bytes INTEGER NOT NULL, payload BLOB NOT NULL)",
    "CREATE TABLE objects (id TEXT PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL, "
    "tool TEXT, chars INTEGER NOT NULL, tokens INTEGER NOT NULL, inline_chars INTEGER NOT NULL, "
    "inline_tokens INTEGER NOT NULL, raw_bytes INTEGER NOT NULL, created REAL NOT NULL, "
    "sha TEXT REFERENCES blobs(sha), evicted REAL, UNIQUE (session, seq))",
    "CREATE INDEX objects_created ON objects(created)",
    "CREATE INDEX objects_sha ON objects(sha)",
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "INSERT INTO counters(name, value) VALUES ('recalls', 0)",
    "INSERT INTO meta(key, value) VALUES ('kind', 'dsh-recall objects')",
    "INSERT INTO meta(key, value) VALUES ('schema', '1')",
    "PRAGMA application_id = 1146308687"  # 0x4453484F,
]


def test_a_store_written_before_channels_is_migrated_in_place(tmp_path):
    path = tmp_path / "objects.sqlite"
    text = _log(300) + "\x1b[31mERROR\x1b[0m: boom in test_widget\n" + _log(50, "post ")
    data = text.encode()
    db = sqlite3.connect(path)
    for stmt in OLD_SCHEMA:
        db.execute(stmt)
    payload = zlib.compress(data)
    db.execute("INSERT INTO blobs VALUES (?, ?, ?, ?)",
               (text_sha(data), len(data), len(payload), payload))
    db.execute("INSERT INTO objects VALUES "
               "('0123abcd', 's', 0, 'Bash', ?, 1, 1, 1, ?, 1.0, ?, NULL)",
               (len(text), len(data), text_sha(data)))
    db.commit()
    db.close()

    with ObjectService(path=path) as svc:
        row = svc.store.get("0123abcd")
        assert row.channel is None  # existing rows: no channel
        assert svc.store.search_parts(row.sha) is None  # and no index yet
        (m,) = svc.search_in("0123abcd", "error: boom").matches
        assert m.line == 301 and m.text == "ERROR: boom in test_widget"
        assert svc.store.search_parts(row.sha) is not None  # built once, then kept
        assert _error(lambda: svc.get("0123abcd", viewer=owner_only)).startswith("no object")
        assert svc.get("0123abcd", viewer=_Sees(lambda c: c is None)).total == len(text)
        new = svc.put(_log(400), session="n", channel="owner")
        assert svc.store.get(new.id).channel == "owner"
    # a second open finds the columns there and changes nothing
    ObjectStore(path).close()
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(objects)")}
    assert "channel" in cols

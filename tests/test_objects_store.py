"""The object store and service: put/get/search, dedupe, idempotence, retention, safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import zlib

import pytest

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.core.errors import InputError, StoreError
from dsh_recall.services.objects import ObjectService, ResultText, default_path
from dsh_recall.stores.sqlite.objects import ObjectStore


def _log(n: int, tag: str = "") -> str:
    return "".join(f"{tag}line {i}: running test_case_{i}\n" for i in range(n))


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_put_get_search_roundtrip(tmp_path):
    text = _log(2000) + "ERROR: test_widget_renders failed\n" + _log(100, "post ")
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        res = svc.put(text, session="s", seq=3, tool="Bash")
        assert res.offloaded and len(res.id) == 8 and res.chars == len(text)
        assert res.id in res.inline and len(res.inline) < svc.cfg.inline_chars + 200
        assert "2001| ERROR: test_widget_renders failed" in res.inline
        first = svc.get(res.id)
        assert first.start == 0 and first.text == text[:8000] and first.total == len(text)
        hit = svc.search_in(res.id, "error")
        assert hit.matches[0].line == 2001
        m = hit.matches[0]
        again = svc.get(res.id, m.offset, len(m.text))
        assert again.text == m.text == "ERROR: test_widget_renders failed"
        assert len(svc.get(res.id, 0, 10**6).text) == 24_000
        assert svc.stats()["recalls"] == 4
        assert svc.size(res.id) == len(text)
        assert svc.stats()["recalls"] == 4  # size is not a recall
        with pytest.raises(InputError, match="no object"):
            svc.size("deadbeef")


def test_small_result_is_not_stored(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        res = svc.put("short")
        assert res == res.__class__(None, "short", 5, False)
        assert svc.stats()["offloaded"] == 0


def test_same_session_seq_is_idempotent_and_marker_text_is_not_trusted(tmp_path):
    text = _log(500)
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        a = svc.put(text, session="s", seq=1)
        b = svc.put(text, session="s", seq=1)
        assert a == b
        # the already-rewritten form under the same (session, seq) is left alone
        c = svc.put(a.inline + "x" * 3000, session="s", seq=1)
        assert c.id == a.id and c.inline == a.inline + "x" * 3000
        # a new result that merely contains the marker text is offloaded like any other
        d = svc.put(a.inline + _log(300), session="s", seq=2)
        assert d.offloaded and d.id != a.id
        assert svc.stats()["offloaded"] == 2


def test_identical_payloads_are_stored_once(tmp_path):
    text = _log(800)
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        ids = {svc.put(text, session=s).id for s in ("a", "b", "c")}
        st = svc.stats()
        assert len(ids) == 3 and st["offloaded"] == 3 and st["blobs"] == 1
        assert st["raw_bytes"] == 3 * len(text.encode())


def test_id_collision_takes_next_attempt(tmp_path, monkeypatch):
    import dsh_recall.policy.offload as mod  # the service takes it from there at each put

    monkeypatch.setattr(mod, "make_id", lambda s, q, n, attempt: f"{attempt:08x}")
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        assert svc.put(_log(500), session="a").id == "00000000"
        assert svc.put(_log(500), session="b").id == "00000001"


def test_unknown_and_evicted_ids_say_so(tmp_path):
    clock = Clock()
    with ObjectService(ObjectsConfig(max_age_days=1), path=tmp_path / "o.sqlite", clock=clock) as svc:
        old = svc.put(_log(500), session="s")
        clock.t += 2 * 86400
        with pytest.raises(InputError, match="no object"):
            svc.get("deadbeef")
        svc.gc()
        with pytest.raises(InputError, match="evicted"):
            svc.get(old.id)
        with pytest.raises(InputError, match="evicted"):
            svc.search_in(old.id, "line")


def test_eviction_by_age_keeps_young_ones(tmp_path):
    clock = Clock()
    with ObjectService(path=tmp_path / "o.sqlite", clock=clock) as svc:
        old = svc.put(_log(500, "old "), session="s")
        clock.t += 10 * 86400
        young = svc.put(_log(500, "young "), session="s")
        assert svc.gc()["evicted"] == 0  # retention is off unless asked
        out = svc.gc(max_age_days=5)
        assert out["ids"] == [old.id]
        assert svc.get(young.id).total > 0
        st = svc.stats()
        assert st["evicted"] == 1 and st["blobs"] == 1


def test_eviction_by_size_oldest_first_and_shared_blobs(tmp_path):
    import random

    clock = Clock()
    rnd = random.Random(7)
    texts = ["".join(rnd.choice("abcdefghij \n") for _ in range(20_000)) for _ in range(4)]
    with ObjectService(path=tmp_path / "o.sqlite", clock=clock) as svc:
        ids = []
        for t in texts:
            clock.t += 1
            ids.append(svc.put(t, session="s").id)
        clock.t += 1
        dup = svc.put(texts[0], session="other").id  # shares the oldest blob
        per_blob = svc.stats()["stored_bytes"] // 4
        out = svc.gc(max_bytes=per_blob * 2 + per_blob // 2)
        # ids[0] goes but its blob stays (dup still needs it): ids[1], ids[2] go too
        assert out["ids"] == ids[:3]
        assert svc.get(dup).text == texts[0][:8000]
        assert svc.get(ids[3]).total == 20_000
        assert svc.stats()["blobs"] == 2


def test_put_runs_retention_when_configured(tmp_path):
    clock = Clock()
    cfg = ObjectsConfig(max_age_days=1)
    with ObjectService(cfg, path=tmp_path / "o.sqlite", clock=clock) as svc:
        a = svc.put(_log(500), session="s")
        clock.t += 3 * 86400
        svc.put(_log(600), session="s")
        with pytest.raises(InputError, match="evicted"):
            svc.get(a.id)


def test_reclaim_applies_keep_and_budget(tmp_path):
    with ObjectService(ObjectsConfig(keep=2), path=tmp_path / "o.sqlite") as svc:
        results = [ResultText(i, _log(400, f"r{i} ")) for i in range(4)] + [ResultText(4, None)]
        out = svc.reclaim("conv", results)
        assert sorted(out) == [0, 1, 2]  # the newest two (3 and the image) untouched
        assert svc.reclaim("conv", results) == {}  # already offloaded: nothing new


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "objects.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="objects.sqlite"):
        ObjectStore(path)
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["notes"]
    db.close()
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("PRAGMA application_id = 42")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not a dsh-recall object store"):
        ObjectStore(other)


def test_unwritable_home_is_a_store_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("DSH_RECALL_HOME", str(blocker / "home"))
    with pytest.raises(StoreError):
        ObjectService().put(_log(500))
    assert default_path() == blocker / "home" / "objects.sqlite"


CHILD = textwrap.dedent('''
    import sys, time
    from dsh_recall.services.objects import ObjectService
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    svc = ObjectService(path=path)
    ids = []
    for i in range(n):
        text = "".join(f"{who} {i} line {k} status ok\\n" for k in range(300))
        r = svc.put(text, session=who)
        assert r.offloaded
        ids.append(r.id)
        assert svc.get(r.id, 0, 20).text == text[:20]
        assert svc.search_in(ids[i // 2], "status").matches
    print(",".join(ids))
''')


def test_two_processes_offload_and_recall_at_once(tmp_path):
    path = tmp_path / "o.sqlite"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    n = 25
    procs = [subprocess.Popen([sys.executable, str(script), str(path), who, str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for who in ("alpha", "beta")]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    ids = [i for out, _ in outs for i in out.strip().split(",")]
    assert len(set(ids)) == 2 * n
    with ObjectService(path=path) as svc:
        st = svc.stats()
        assert st["offloaded"] == 2 * n
        assert st["recalls"] == 2 * 2 * n  # one get and one search per put, none lost
        assert svc.store.integrity() == "ok"


KILLED = textwrap.dedent('''
    import sys, time
    from dsh_recall.services.objects import ObjectService
    from dsh_recall.stores.sqlite import objects as store_mod
    path, n_ok = sys.argv[1], int(sys.argv[2])
    svc = ObjectService(path=path)
    for i in range(n_ok):
        svc.put("".join(f"done {i} {k}\\n" for k in range(400)), session="k")
    real = store_mod.ObjectStore._insert_object
    def slow(self, row):
        print("MID", flush=True)  # the blob is written, the object row is not: die here
        time.sleep(60)
        real(self, row)
    store_mod.ObjectStore._insert_object = slow
    svc.put("".join(f"half {k}\\n" for k in range(400)), session="k")
''')


def test_kill_9_mid_put_leaves_no_half_object(tmp_path):
    path = tmp_path / "o.sqlite"
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    p = subprocess.Popen([sys.executable, str(script), str(path), "3"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "MID"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    with ObjectService(path=path) as svc:
        assert svc.store.integrity() == "ok"
        st = svc.stats()
        assert st["offloaded"] == 3 and st["blobs"] == 3  # the half put's blob rolled back too
        for row in svc.store.recent(10):
            data = svc.store.payload(row.sha)
            assert data is not None and len(data.decode()) == row.chars
            assert "half" not in data.decode()
        db = sqlite3.connect(path)
        assert db.execute("SELECT COUNT(*) FROM blobs WHERE sha NOT IN "
                          "(SELECT sha FROM objects)").fetchone()[0] == 0
        for (payload,) in db.execute("SELECT payload FROM blobs"):
            zlib.decompress(payload)
        db.close()
        # and the store takes writes again
        assert svc.put(_log(500), session="k").offloaded

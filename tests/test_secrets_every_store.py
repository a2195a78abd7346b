"""No planted credential is stored anywhere: the seeded corpus of bench/scrub_corpus.py goes
in through a history import (a generic transcript), object puts (as the dsh reaper and the
hooks offload) and notes saves (MCP), then every byte the recall home holds (and the notes write folder) is read back:
each SQLite database through SQLite, every column of every table, blobs decompressed, and
raw; every other file as it is on disk. No 8-character piece of any planted secret may be there."""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from pathlib import Path

from dsh_recall.services import history
from dsh_recall.services.objects import ObjectService
from test_memory_write import mcp_calls, ok, world
from test_scrub_corpus import _bench


def _texts_of(path: Path) -> list[str]:
    """What a file holds, as text: a database's every value (blobs decompressed when they
    are zlib) and its raw pages (free ones too), another file's bytes."""
    raw = path.read_bytes()
    if not raw.startswith(b"SQLite format 3\x00"):
        out = [raw.decode("latin-1")]
        try:
            out.append(zlib.decompress(raw).decode("utf-8", "replace"))
        except zlib.error:
            pass
        return out
    out = [raw.decode("latin-1")]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for t in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{t}"').fetchall()
            except sqlite3.Error:
                continue  # a virtual table's module this build lacks
            for row in rows:
                for v in row:
                    if isinstance(v, bytes):
                        try:
                            out.append(zlib.decompress(v).decode("utf-8", "replace"))
                        except zlib.error:
                            out.append(v.decode("latin-1"))
                    elif v is not None:
                        out.append(str(v))
    finally:
        conn.close()
    return out


def test_no_planted_secret_is_stored_by_any_ingest_path(tmp_path: Path) -> None:
    bench = _bench()
    docs = bench.corpus(45, seed=3939)
    w = world(tmp_path, session_map=False)
    # History: a generic transcript, every document one event.
    src = tmp_path / "s1.jsonl"
    src.write_text("".join(json.dumps({"session": "s1", "seq": i, "role": ("user", "assistant", "tool")[i % 3],
                                       "text": d.text, "workspace": str(w["repo"])}) + "\n"
                           for i, d in enumerate(docs[:15])))
    assert history.import_paths([str(src)], fmt="generic", cfg=w["cfg"])["files"][0]["status"] == "imported"
    # Objects: big tool results, as the dsh reaper and the hooks offload them.
    pad = "".join(f"step {i} ok\n" for i in range(500))
    with ObjectService(w["cfg"].objects, scrub=w["cfg"].scrub) as objs:
        for d in docs[15:30]:
            assert objs.put(pad + d.text + "\n" + pad, session="s2", tool="bash").id
    # Notes: saved by an agent over MCP.
    _, res = mcp_calls(w, [("notes_save", {"text": d.text[:4000]}) for d in docs[30:]])
    for r in res:
        ok(r)

    roots = [Path(os.environ["DSH_RECALL_HOME"]), w["saved"]]  # the recall home, the notes folder
    seen = 0
    text = []
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file() and not f.is_symlink():
                text += _texts_of(f)
                seen += 1
    assert seen > 5
    blob = "\n".join(text)
    left = [(k, s[:12]) for d in docs for k, s in d.plants if bench.survives(s, blob)]
    assert not left, left

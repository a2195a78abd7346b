"""Disk per code chunk, by table, for this tree and a baseline source tree in one run.

An index of about N chunks (copies of the SWE-bench dev trees pytest, flask and requests,
as bench/scale.py's build_workspace makes them) is built by each source tree in its own
process (PYTHONPATH set to that tree's src), lexical first, then a random unit vector of
384 dimensions per chunk written as the indexer writes vectors (the fake embedder's Python
loop would take most of the run; the bytes are the same), the vector file synced, and each
vector put in the user's embedding cache. Then per index: bytes per chunk for each table
and index (SQLite's dbstat), the vector files, and in total as bench/scale.py measures it
(`store.size_bytes() / chunks`: the database, its WAL, the score-list cache and the vector
files), plus the embedding cache's bytes per entry.

    python bench/disk.py [--chunks 100000] --baseline-src DIR [--reuse | --reuse-baseline]
    python bench/disk.py --quality [--quality-chunks 2000]

`--quality`: what float16 does to the exact cosines with the shipped model (MiniLM): code
chunks spread over the three dev trees and 40 queries (keyword queries and SWE-bench issue
texts) embedded once, each query's cosines and top 10 from the float32 vectors against
those from the vectors as the store keeps them (stores/vec_codec.py); then end to end, the
flask tree indexed with its vectors as float32 blobs (as the release before wrote them) and
searched, the same vectors rewritten as float16 and searched again (hybrid, top 10).

DIR: the `src` of the release to compare with, e.g. `git archive <commit> src | tar -x -C
/tmp/base` then `--baseline-src /tmp/base/src`. Without it only this tree is measured.
Needs the dev trees: $RECALL_EVAL_DIR or ../shared/eval (skips with the reason when absent).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TMP = Path(tempfile.gettempdir())
PER_COPY = 4906  # chunks of one copy of the three trees (98,121 for 20 copies)
DIM = 384


def eval_dir() -> Path | None:
    base = Path(os.environ.get("RECALL_EVAL_DIR") or ROOT.parent / "shared" / "eval")
    return base if (base / "swebench-dev" / "trees.bundle").is_file() else None


def child(src: str, copies: int, home: Path, reuse: bool) -> None:
    """Build (or reuse) one index with the source tree `src` and print its figures as JSON."""
    sys.path.insert(0, src)
    import dsh_recall  # from `src` first: bench/scale.py puts this tree's src on the path

    assert Path(dsh_recall.__file__).resolve().is_relative_to(Path(src).resolve()), dsh_recall.__file__
    sys.path.insert(1, str(ROOT / "bench"))
    import numpy as np
    import scale  # bench/scale.py: the same workspaces

    scale.EVAL = Path(os.environ["RECALL_EVAL_DIR"]) / "swebench-dev"
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService
    from dsh_recall.services.vectors import sync_fingerprint, sync_vector_file
    from dsh_recall.stores.sqlite.embed_cache import EmbedCache

    ws = scale.build_workspace(copies)
    if not reuse:
        shutil.rmtree(home, ignore_errors=True)
    os.environ.update(DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake",
                      DSH_RECALL_EMBEDDER__DIM=str(DIM))
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "fake", "dim": DIM}})
    svc = CodeService(ws, cfg, home)
    store = svc.store
    t0 = time.monotonic()
    if not (reuse and store.chunk_count()):
        with svc._index_lock(None):
            svc.index_lexical()
    build_s = time.monotonic() - t0
    emb = svc.embedder()
    assert emb is not None
    sync_fingerprint(store, emb)
    cache = EmbedCache(home / "embed-cache-bench.sqlite")
    rng = np.random.default_rng(1)
    with svc._index_lock(None):
        while batch := store.pending(4096):
            v = rng.normal(size=(len(batch), DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            items = [(h, x) for (h, _), x in zip(batch, v)]
            store.put_vectors(items)
            cache.put(emb.fingerprint, items)
        sync_vector_file(store)
    chunks = store.chunk_count()
    total = store.size_bytes()
    conn = store.conn
    tables = {name: int(size) for name, size in conn.execute(
        "SELECT name, sum(pgsize) FROM dbstat GROUP BY name")}
    files = {"(wal)": Path(str(store.path) + "-wal"), "(score lists)": store.impacts_path}
    sizes = {k: p.stat().st_size for k, p in files.items() if p.exists()}
    if store.vector_dir.is_dir():
        for p in store.vector_dir.iterdir():
            if p.is_file():
                key = "(vector file .bits)" if p.name.endswith(".bits") else "(vector file)"
                sizes[key] = sizes.get(key, 0) + p.stat().st_size
    cache_entries = len(cache.get(emb.fingerprint, [h for (h,) in conn.execute("SELECT embed_hash FROM chunks")]))
    cache.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache_bytes = sum(p.stat().st_size for p in home.glob("embed-cache-bench.sqlite*"))
    print(json.dumps({"chunks": chunks, "total": total, "tables": tables, "files": sizes,
                      "cache_entries": cache_entries, "cache_bytes": cache_bytes,
                      "build_s": round(build_s, 1)}))


def quality(max_chunks: int) -> None:
    """Cosines and top 10 with float32 vectors against the codec's, on the shipped model."""
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(1, str(ROOT / "bench"))
    import numpy as np
    import scale

    from dsh_recall import chunkers
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code.prepare import embed_text
    from dsh_recall.services.vectors import load_embedder
    from dsh_recall.stores import vec_codec

    scale.EVAL = Path(os.environ["RECALL_EVAL_DIR"]) / "swebench-dev"
    texts: list[str] = []
    for tag in scale.TAGS:
        root = scale.tree(tag)
        for p in sorted(root.rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            for c in chunkers.chunk_file(rel, p.read_text(errors="replace")):
                texts.append(embed_text(rel, c.symbols, c.text))
    texts = texts[::max(1, len(texts) // max_chunks)][:max_chunks]  # spread over the three trees
    emb, why = load_embedder(load_config(workspace=root).embedder)
    if emb is None:
        print(f"skipped: the shipped model does not load ({why})")
        return
    qs = scale.queries(40)
    t0 = time.monotonic()
    docs = emb.embed(texts)
    qv = emb.embed(qs, query=True)
    exact = docs @ qv.T
    kept = vec_codec.decode_many([vec_codec.encode(v) for v in docs]) @ qv.T
    same_order = same_set = 0
    for j in range(len(qs)):
        a = list(np.argsort(-exact[:, j], kind="stable")[:10])
        b = list(np.argsort(-kept[:, j], kind="stable")[:10])
        same_order += a == b
        same_set += set(a) == set(b)
    print(f"{emb.fingerprint}: {len(texts)} code chunks of pytest, flask and requests, {len(qs)} queries "
          f"({time.monotonic() - t0:.0f} s to embed)")
    print(f"max |cosine change| {np.abs(kept - exact).max():.2e}, mean {np.abs(kept - exact).mean():.2e}; "
          f"blob {len(vec_codec.encode(docs[0]))} bytes (float32: {docs[0].nbytes})")
    print(f"top 10 identical in order: {same_order}/{len(qs)} queries; as a set: {same_set}/{len(qs)}")
    end_to_end(scale.tree(scale.TAGS[1]), qs)


def end_to_end(ws: Path, qs: list[str]) -> None:
    """The flask tree indexed once with the shipped model, its vectors written as float32
    (as the release before wrote them), searched (hybrid, top 10); then every vector
    rewritten as float16 and the vector file rebuilt from them, searched again."""
    from dsh_recall.core.config import load_config
    from dsh_recall.core.lazy import np
    from dsh_recall.services.code import CodeService
    from dsh_recall.services.vectors import VECTOR_FILE_META, sync_vector_file
    from dsh_recall.stores import vec_codec

    home = TMP / "dsh-recall-disk" / "quality-home"
    shutil.rmtree(home, ignore_errors=True)
    new_encode = vec_codec.encode
    vec_codec.encode = lambda v: np.asarray(v, dtype=np.float32).tobytes()  # the release before
    try:
        svc = CodeService(ws, load_config(workspace=ws), home)
        svc.index()
    finally:
        vec_codec.encode = new_encode
    store = svc.store

    def top() -> list[list[tuple]]:
        out = []
        for q in qs:
            res = svc.search(q, limit=10).get("results", [])
            out.append([(r["path"], r["start_line"], r["score"]) for r in res])
        return out

    before = top()
    rows = store.conn.execute("SELECT hash, vec FROM vectors").fetchall()
    assert all(len(v) % 4 == 0 for _, v in rows)
    store.conn.execute("BEGIN IMMEDIATE")
    store.conn.executemany("UPDATE vectors SET vec = ? WHERE hash = ?",
                           [(vec_codec.encode(vec_codec.decode(v)), h) for h, v in rows])
    store.conn.execute("DELETE FROM meta WHERE key = ?", (VECTOR_FILE_META,))
    store.conn.execute("COMMIT")
    shutil.rmtree(store.vector_dir, ignore_errors=True)
    sync_vector_file(store)
    svc.close()
    svc = CodeService(ws, load_config(workspace=ws), home)
    after = top()
    svc.close()
    same = sum([(p, s) for p, s, _ in a] == [(p, s) for p, s, _ in b] for a, b in zip(before, after))
    moved = max((abs(x[2] - y[2]) for a, b in zip(before, after) for x, y in zip(a, b)), default=0.0)
    print(f"end to end (flask tree, {len(rows)} vectors, hybrid search top 10): identical results "
          f"for {same}/{len(qs)} queries; largest shown-score change {moved:.4f}")


def measure(label: str, src: Path, copies: int, reuse: bool) -> dict:
    home = TMP / "dsh-recall-disk" / f"{label}-{copies}"
    home.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, __file__, "--child", str(src), "--copies", str(copies),
                          "--home", str(home)] + (["--reuse"] if reuse else []),
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(rows: dict[str, dict]) -> str:
    labels = list(rows)
    names: dict[str, None] = {}
    for r in rows.values():
        for k in sorted(r["tables"], key=lambda k: -r["tables"][k]):
            names.setdefault(k, None)
        for k in r["files"]:
            names.setdefault(k, None)

    def per(r: dict, k: str) -> str:
        b = r["tables"].get(k, r["files"].get(k))
        return "-" if b is None else f"{b / r['chunks']:,.0f}"

    head = "| bytes per chunk | " + " | ".join(labels) + " |"
    lines = [head, "|---|" + "---:|" * len(labels)]
    for k in names:
        cells = [per(rows[la], k) for la in labels]
        if any(c not in ("-", "0") for c in cells):
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append("| **total (size_bytes / chunks)** | " + " | ".join(
        f"**{rows[la]['total'] / rows[la]['chunks']:,.0f}**" for la in labels) + " |")
    lines.append("| embedding cache, per entry | " + " | ".join(
        f"{rows[la]['cache_bytes'] / max(1, rows[la]['cache_entries']):,.0f}" for la in labels) + " |")
    lines.append("| chunks | " + " | ".join(f"{rows[la]['chunks']:,}" for la in labels) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description="disk per code chunk, by table, against a baseline")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--baseline-src", default="", help="src folder of the release to compare with")
    ap.add_argument("--reuse", action="store_true", help="measure indexes an earlier run left")
    ap.add_argument("--reuse-baseline", action="store_true", help="reuse the baseline's index only")
    ap.add_argument("--quality", action="store_true", help="float16 against float32 on the shipped model")
    ap.add_argument("--quality-chunks", type=int, default=2000)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--copies", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--home", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.copies, Path(args.home), args.reuse)
        return
    ev = eval_dir()
    if ev is None:
        print("skipped: the SWE-bench dev trees are absent (set RECALL_EVAL_DIR or put them in "
              "../shared/eval/swebench-dev)")
        return
    os.environ["RECALL_EVAL_DIR"] = str(ev)
    if args.quality:
        quality(args.quality_chunks)
        return
    copies = max(1, round(args.chunks / PER_COPY))
    rows = {"this tree": measure("this", ROOT / "src", copies, args.reuse)}
    if args.baseline_src:
        rows = {"baseline": measure("base", Path(args.baseline_src).resolve(), copies,
                                        args.reuse or args.reuse_baseline), **rows}
    print(f"disk per chunk, {copies} copies of the dev trees, 384-dim vectors")
    print(table(rows))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

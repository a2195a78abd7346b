"""Embedder throughput on real chunks as the indexer cuts them: the text `index` embeds
(path, symbols, then the chunk), idle and with CPU hogs running, for the shipped int8 MiniLM
at the token limits given, the fake embedder for scale, and the fp32 export (if
scripts/export_minilm.py left it in build/minilm-fp32/) for fp32-vs-int8 cosine, and any
other model folders named with --model-dir (run through the `onnx` embedder at each token
limit, beside the shipped model), with the cosine of every pair at the same limit.

    python bench/embedders.py [--chunks 300] [--max-tokens 256,128] [--hogs 2] [--tree DIR]
                              [--model-dir LABEL=DIR ...] [--no-fake]

Chunks come from a SWE-bench dev tree (pytest, extracted once under /tmp like
bench/code_swebench.py does), else this repository's src/; sampled evenly over the tree.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dsh_recall import chunkers  # noqa: E402
from dsh_recall.core.config import EmbedderConfig  # noqa: E402
from dsh_recall.embedders.registry import create  # noqa: E402
from dsh_recall.readers.workspace import walk  # noqa: E402
from dsh_recall.services.code import embed_text  # noqa: E402

FP32_DIR = ROOT / "build" / "minilm-fp32"
EVAL = ROOT.parent / "shared" / "eval" / "swebench-dev"
TAG = "pytest-e856638ba086fcf5bebf1bebea32d5cf78de87b4"


def default_tree() -> Path:
    """The pytest tree of SWE-bench dev, extracted once; this repo's src/ without it."""
    dest = Path(tempfile.gettempdir()) / "swebench-trees" / TAG
    if dest.is_dir():
        return dest
    bare = Path(tempfile.gettempdir()) / "swebench-trees.git"
    try:
        if not bare.exists():
            subprocess.run(["git", "clone", "-q", "--bare", str(EVAL / "trees.bundle"), str(bare)],
                           check=True)
        dest.mkdir(parents=True)
        archive = subprocess.run(["git", "--git-dir", str(bare), "archive", TAG], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return dest
    except (OSError, subprocess.CalledProcessError):
        return ROOT / "src"


def indexer_chunks(tree: Path, n: int) -> list[str]:
    """The embed texts of the tree's chunks (what `index` embeds), n of them sampled evenly."""
    texts: list[str] = []
    for sf in walk(tree, [], max_file_bytes=1 << 20).files:
        try:
            text = Path(sf.abs_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for c in chunkers.chunk_file(sf.path, text):
            texts.append(embed_text(sf.path, c.symbols, c.text))
    if len(texts) <= n:
        return texts
    step = len(texts) / n
    return [texts[int(i * step)] for i in range(n)]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(configs: list[tuple[str, EmbedderConfig]], chunks: list[str], repeat: int,
        batch_size: int) -> list[tuple[tuple, np.ndarray]]:
    """Best of `repeat` passes per embedder, interleaved: every slice of the chunks (whole
    batches, so grouping is what one call would do) runs through each embedder in turn, so
    all see the same load on a shared machine. CPU seconds (this process, all threads) are
    summed beside wall time: chunks per CPU-second barely moves with other people's load."""
    embs, loads = [], []
    load_avg = os.getloadavg()[0]
    for _, cfg in configs:
        emb = create(cfg)
        t0 = time.perf_counter()
        emb.embed(["warm up"])
        loads.append(time.perf_counter() - t0)
        embs.append(emb)
    step = batch_size * max(1, 64 // batch_size)
    slices = [chunks[i:i + step] for i in range(0, len(chunks), step)]
    best = [(float("inf"), float("inf"))] * len(configs)
    vecs: list[list[np.ndarray]] = [[] for _ in configs]
    for _ in range(repeat):
        wall, cpu = [0.0] * len(configs), [0.0] * len(configs)
        for k in range(len(configs)):
            vecs[k] = []
        for sl in slices:
            for k, emb in enumerate(embs):
                t0, c0 = time.perf_counter(), time.process_time()
                vecs[k].append(emb.embed(sl))
                wall[k] += time.perf_counter() - t0
                cpu[k] += time.process_time() - c0
        best = [(min(b[0], w), min(b[1], c)) for b, w, c in zip(best, wall, cpu)]
    load_end = os.getloadavg()[0]
    return [((label, len(chunks), w, len(chunks) / w, len(chunks) / c, load, rss_mb(),
              f"{load_avg:.1f}-{load_end:.1f}"), np.concatenate(v))
            for (label, _), (w, c), load, v in zip(configs, best, loads, vecs)]


def hogs(n: int) -> list[subprocess.Popen]:
    """n busy processes, as other work on a shared machine would be."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description="embedder throughput on real indexer chunks")
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--max-tokens", default="256,128")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--hogs", type=int, default=2, help="CPU hogs for the loaded pass (0: skip)")
    ap.add_argument("--tree", type=Path, default=None)
    ap.add_argument("--model-dir", action="append", default=[], metavar="LABEL=DIR",
                    help="another model folder (model.onnx, tokenizer.json, config.json) to run "
                         "through the onnx embedder at each token limit; repeatable")
    ap.add_argument("--no-fake", action="store_true", help="skip the fake embedder row")
    args = ap.parse_args()

    tree = args.tree or default_tree()
    chunks = indexer_chunks(tree, args.chunks)
    lengths = [len(c) for c in chunks]
    print(f"{len(chunks)} chunks from {tree.name} as the indexer cuts them "
          f"(chars: median {int(np.median(lengths))}, p90 {int(np.percentile(lengths, 90))}); "
          f"batch {args.batch_size}, threads {args.threads or 'auto'}, {os.cpu_count()} cores")
    limits = [int(x) for x in args.max_tokens.split(",")]
    configs = [] if args.no_fake else [("fake (dim 64)", EmbedderConfig(name="fake", batch_size=args.batch_size))]
    extra = [(m.split("=", 1) if "=" in m else (Path(m).name, m)) for m in args.model_dir]
    for mt in limits:  # each limit's rows side by side, so they see the same load
        configs.append((f"minilm int8, {mt} tok", EmbedderConfig(
            name="minilm", max_tokens=mt, batch_size=args.batch_size, threads=args.threads)))
        for label, path in extra:
            configs.append((f"{label}, {mt} tok", EmbedderConfig(
                name="onnx", model_dir=str(path), max_tokens=mt, batch_size=args.batch_size,
                threads=args.threads)))
    if (FP32_DIR / "model.onnx").is_file():
        configs.append(("minilm fp32 (build/)", EmbedderConfig(
            name="onnx", model_dir=str(FP32_DIR), max_tokens=limits[0], batch_size=args.batch_size)))

    rows: list[tuple] = []
    vecs: dict[str, np.ndarray] = {}
    passes = [("idle", 0)] + ([(f"{args.hogs} hogs", args.hogs)] if args.hogs else [])
    for when, n in passes:
        procs = hogs(n)
        try:
            for mt in limits:  # one token limit at a time, its embedders interleaved
                group = [c for c in configs if c[0].endswith(f", {mt} tok")]
                if mt == limits[0]:
                    group += [c for c in configs if not c[0].endswith(" tok")]
                for row, v in run(group, chunks, args.repeat, args.batch_size):
                    rows.append((when, *row))
                    vecs.setdefault(row[0], v)
        finally:
            for p in procs:
                p.kill()
                p.wait()

    width = max(22, *(len(label) for label, _ in configs))
    print(f"{'load':<8} {'embedder':<{width}} {'chunks':>6} {'secs':>7} {'chunks/s':>9} "
          f"{'per CPU-s':>9} {'load s':>7} {'peak RSS MB*':>12} {'loadavg':>9}")
    for when, label, n, secs, rate, cpu_rate, load, rss, load_avg in rows:
        print(f"{when:<8} {label:<{width}} {n:>6} {secs:>7.2f} {rate:>9.1f} {cpu_rate:>9.1f} "
              f"{load:>7.2f} {rss:>12.0f} {load_avg:>9}")
    print("* peak RSS of this process so far; per CPU-s: chunks per CPU-second of this process; "
          "loadavg: 1-minute, at the start and end of the group")
    ref = vecs.get(f"minilm int8, {limits[0]} tok")
    for label, v in vecs.items():
        if ref is not None and label.startswith("minilm") and v is not ref:
            cos = (ref * v).sum(axis=1)
            print(f"{label} vs minilm int8 {limits[0]} tok, cosine: mean {cos.mean():.4f}, "
                  f"min {cos.min():.4f}")
    # Every pair of real models cut at the same limit (fp32 rows run at the first limit).
    for mt in limits:
        same = [(lb, v) for lb, v in vecs.items()
                if lb.endswith(f", {mt} tok") or (mt == limits[0] and lb.startswith("minilm fp32"))]
        for i, (la, va) in enumerate(same):
            for lb, vb in same[i + 1:]:
                cos = (va * vb).sum(axis=1)
                print(f"{mt} tok: {la} vs {lb}, cosine: mean {cos.mean():.4f}, min {cos.min():.4f}")


if __name__ == "__main__":
    main()

"""Embedder throughput on real code: the shipped int8 MiniLM, the fake embedder for scale,
and the fp32 export (if scripts/export_minilm.py left it in build/minilm-fp32/) for speed
and fp32-vs-int8 cosine.

    python bench/embedders.py [--chunks 200] [--lines 40] [--max-tokens 256]

Chunks are 40-line windows of the Python files in this interpreter's site-packages.
"""

from __future__ import annotations

import argparse
import resource
import sysconfig
import time
from pathlib import Path

import numpy as np

from dsh_recall.core.config import EmbedderConfig
from dsh_recall.embedders.registry import create

REPO = Path(__file__).resolve().parents[1]
FP32_DIR = REPO / "build" / "minilm-fp32"


def code_chunks(n: int, lines: int, per_file: int = 2) -> list[str]:
    """Up to `per_file` non-trivial windows from each file, in a stable order."""
    root = Path(sysconfig.get_paths()["purelib"])
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        taken = 0
        for start in range(0, len(text), lines):
            window = text[start:start + lines]
            if sum(1 for ln in window if ln.strip()) < lines // 2:
                continue
            out.append("\n".join(window))
            taken += 1
            if taken == per_file or len(out) == n:
                break
        if len(out) == n:
            break
    return out


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(label: str, cfg: EmbedderConfig, chunks: list[str], rows: list[tuple], repeat: int = 2) -> np.ndarray:
    """Best of `repeat` timed passes (a shared machine is noisy); the load is timed apart."""
    emb = create(cfg)
    t0 = time.perf_counter()
    emb.embed(["warm up"])
    load = time.perf_counter() - t0
    secs = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        vecs = emb.embed(chunks)
        secs = min(secs, time.perf_counter() - t0)
    rows.append((label, len(chunks), secs, len(chunks) / secs, load, rss_mb()))
    return vecs


def main() -> None:
    ap = argparse.ArgumentParser(description="embedder throughput on real code")
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--lines", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    chunks = code_chunks(args.chunks, args.lines)
    common = dict(max_tokens=args.max_tokens, batch_size=args.batch_size, threads=args.threads)
    rows: list[tuple] = []
    run("fake (dim 64)", EmbedderConfig(name="fake", batch_size=args.batch_size), chunks, rows, args.repeat)
    int8 = run("minilm int8 (shipped)", EmbedderConfig(name="minilm", **common), chunks, rows, args.repeat)
    fp32 = None
    if (FP32_DIR / "model.onnx").is_file():
        cfg = EmbedderConfig(name="onnx", model_dir=str(FP32_DIR), **common)
        fp32 = run("minilm fp32 (build/)", cfg, chunks, rows, args.repeat)

    print(f"{len(chunks)} chunks of {args.lines} lines, max_tokens {args.max_tokens}, "
          f"batch {args.batch_size}, threads {args.threads or 'default'}")
    print(f"{'embedder':<24} {'chunks':>6} {'secs':>7} {'chunks/s':>9} {'load s':>7} {'peak RSS MB*':>12}")
    for label, n, secs, rate, load, rss in rows:
        print(f"{label:<24} {n:>6} {secs:>7.2f} {rate:>9.1f} {load:>7.2f} {rss:>12.0f}")
    print("* peak RSS of this process so far; rows run top to bottom")
    if fp32 is not None:
        cos = (fp32 * int8).sum(axis=1)
        print(f"fp32 vs int8 cosine over the chunks: mean {cos.mean():.4f}, min {cos.min():.4f}, "
              f"p5 {np.percentile(cos, 5):.4f}")
    else:
        print("fp32 model not found (run scripts/export_minilm.py): no cosine comparison")


if __name__ == "__main__":
    main()

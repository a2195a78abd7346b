"""The secret scrubber's speed with its gates (each rule run only where its regex can match,
policy/scrub_gate.py) against the algorithm before them (every rule over the whole text),
in the same run: MB/s of `scrub` on the dev CI logs and on bench/scrub_corpus.py's seeded
corpus (each document alone, and all in one text), and an object put of the largest
failing log (`ObjectService.put`, which scrubs, then stores and indexes). Both must return
the same text; the bench stops if they do not.

    python bench/scrub_speed.py [--repeat 3] [--docs 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
EVAL = Path(os.environ.get("RECALL_EVAL_DIR") or ROOT.parent / "shared" / "eval")
CASES = EVAL / "ci-logs-dev" / "cases"
PUT_LOG = CASES / "assertj_1944" / "fail.log"

from dsh_recall.policy import scrub  # noqa: E402

Find = Callable[..., list[tuple[int, int, str]]]


def whole_find(text: str, keep: tuple[str, ...] = ()) -> list[tuple[int, int, str]]:
    """`scrub.find` before the gates: every rule searched over the whole text, the overlaps
    merged here rather than by `scrub._merge` (tests/test_scrub_gate.py checks the gated
    find against this, so it shares no more of the code under test than the rules)."""
    found: list[tuple[int, int, str]] = []
    for rule in scrub.rules():
        if rule.kind in keep:
            continue
        pos = 0
        memo = [0, 0]
        while (m := rule.pattern.search(text, pos)) is not None:
            span = scrub._span(rule, m, memo)
            pos = max(m.end(), m.start() + 1)
            if span is not None and not scrub.PLACEHOLDER.fullmatch(text[span[0]:span[1]]):
                found.append((span[0], span[1], rule.kind))
                pos = max(pos, span[1])
    found.sort(key=lambda f: (f[0], -f[1]))
    out: list[tuple[int, int, str]] = []
    for f in found:
        if out and f[0] < out[-1][1]:
            if f[1] > out[-1][1]:
                out[-1] = (out[-1][0], f[1], out[-1][2])
            continue
        out.append(f)
    return out


GATED: Find = scrub.find


def use(find: Find) -> None:
    scrub.find = find  # type: ignore[assignment]  # scrub() and every caller go through it


def timed(texts: list[str], find: Find, repeat: int) -> tuple[float, list[str]]:
    use(find)
    runs = []
    out: list[str] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = [scrub.scrub(t) for t in texts]
        runs.append(time.perf_counter() - t0)
    use(GATED)
    return statistics.median(runs), out


def put_ms(find: Find, text: str, repeat: int) -> float:
    from dsh_recall.services.objects import ObjectService

    use(find)
    runs = []
    for i in range(repeat):  # a new store each time: a stored text would not be indexed again
        with tempfile.TemporaryDirectory() as home:
            svc = ObjectService(path=Path(home) / "objects.sqlite")
            svc.put("warm up " * 1000, session="warm")
            t0 = time.perf_counter()
            svc.put(text, session=f"s{i}", tool="bash")
            runs.append(time.perf_counter() - t0)
    use(GATED)
    return statistics.median(runs) * 1000


def corpus_docs(n: int) -> list[str]:
    spec = importlib.util.spec_from_file_location("scrub_corpus", ROOT / "bench" / "scrub_corpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["scrub_corpus"] = mod
    spec.loader.exec_module(mod)
    return [d.text for d in mod.corpus(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per row (the median is shown)")
    ap.add_argument("--docs", type=int, default=1000, help="documents of the seeded corpus")
    args = ap.parse_args()
    logs = sorted(CASES.glob("*/*.log"))
    if not logs:
        sys.exit(f"no logs under {CASES} (set RECALL_EVAL_DIR)")
    scrub.rules()
    scrub.scrub("warm up password=x1y2z3w4 AKIAJ7Q3EXAMPLEZ4KQA")  # compile, parse, RE2 set
    docs = corpus_docs(args.docs)
    sets = [(f"dev CI logs ({len(logs)} files, each alone)",
             [p.read_text(encoding="utf-8", errors="replace") for p in logs]),
            (f"seeded corpus, {len(docs)} documents each alone", docs),
            ("seeded corpus in one text", ["\n".join(docs)])]
    print(f"rules: {len(scrub.rules())}; median of {args.repeat} runs; shared, loaded machine\n")
    print("| texts | MB | whole-text rules MB/s | gated MB/s | speed-up | same output |")
    print("|---|---|---|---|---|---|")
    for name, texts in sets:
        mb = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
        old, old_out = timed(texts, whole_find, args.repeat)
        new, new_out = timed(texts, GATED, args.repeat)
        same = old_out == new_out
        print(f"| {name} | {mb:.2f} | {mb / old:.2f} | {mb / new:.2f} | {old / new:.1f}x | {'yes' if same else 'NO'} |")
        if not same:
            sys.exit("the gated scrub returned another text")
    if PUT_LOG.is_file():
        text = PUT_LOG.read_text(encoding="utf-8", errors="replace")
        old_ms = put_ms(whole_find, text, args.repeat)
        new_ms = put_ms(GATED, text, args.repeat)
        print(f"\nObjectService.put of {PUT_LOG.parent.name}/{PUT_LOG.name} ({len(text.encode()) / 1e6:.2f} MB): "
              f"{old_ms:.0f} ms with whole-text rules, {new_ms:.0f} ms gated")


if __name__ == "__main__":
    main()

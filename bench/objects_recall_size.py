"""How many matching lines an `id` + `query` recall should return by default.

    python bench/objects_recall_size.py [CASES_DIR]

Offloads every CI `fail.log` of ci-logs-dev (as bench/objects_ci_logs.py does) and asks each
log the queries an agent tries (`error`, `FAILED`, `BUILD FAILURE`, the failing test's
name). For k = 1..20 it prints how many (log, query) pairs the first k lines answer (a line
inside a ground-truth error range), how many logs, and the characters sent, against the 20
lines returned before and `grep -n -i -F` (all its lines). The default is the smallest k that
answers every pair the 20 lines answer; chosen leave-one-log-out (k picked on the other
logs, checked on the one left out) to say whether it transfers.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from objects_ci_logs import DEFAULT_CASES, grep_numbers, hit_of, load_logs  # noqa: E402

from dsh_recall.core.config import ObjectsConfig  # noqa: E402
from dsh_recall.services.objects import ObjectService  # noqa: E402

KS = list(range(1, 21))


def first_hit(log, matches) -> int | None:
    for i, m in enumerate(matches):
        if hit_of(log, [m]):
            return i + 1
    return None


def pick_k(rows: list[tuple[str, int | None]]) -> int:
    """The smallest k that answers every pair the 20 lines answer."""
    ranks = [r for _, r in rows if r is not None]
    return max(ranks, default=1)


def main() -> None:
    cases_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_CASES
    cases = sorted(p for p in cases_dir.iterdir() if (p / "fail.log").is_file())
    home = Path(tempfile.mkdtemp(prefix="dsh-recall-size-"))
    svc = ObjectService(ObjectsConfig(), path=home / "objects.sqlite")
    logs, _, _ = load_logs(cases, svc)
    pairs: list[tuple[str, int | None, list[int]]] = []  # log, first hit rank, chars per k
    grep_chars: list[int] = []
    for log in logs:
        lines = log.text.split("\n")
        for q in log.queries:
            matches = svc.search_in(log.obj_id, q, limit=20, count=False).matches
            sizes = [len(m.text) + 12 for m in matches]  # + the line number and separators
            pairs.append((log.name, first_hit(log, matches),
                          [sum(sizes[:k]) for k in KS]))
            nums = grep_numbers(log.path, ["-i", "-F", "--", q])
            grep_chars.append(sum(len(lines[n - 1]) + 8 for n in nums if n <= len(lines)))
    svc.close()
    shutil.rmtree(home, ignore_errors=True)
    n_logs = len({p[0] for p in pairs})
    print(f"\n{len(pairs)} (log, query) pairs over {n_logs} logs\n")
    print("| lines returned | pairs answered | logs answered | right line first | chars p50 | chars mean |")
    print("|---|---|---|---|---|---|")
    for i, k in enumerate(KS):
        hit = [p for p in pairs if p[1] is not None and p[1] <= k]
        chars = [p[2][i] for p in pairs]
        print(f"| {k} | {len(hit)}/{len(pairs)} | {len({p[0] for p in hit})}/{n_logs} | "
              f"{sum(1 for p in pairs if p[1] == 1)} | {statistics.median(chars):,.0f} | "
              f"{statistics.mean(chars):,.0f} |")
    print(f"| grep -n -i -F (all lines) | - | - | - | {statistics.median(grep_chars):,.0f} | "
          f"{statistics.mean(grep_chars):,.0f} |")
    k_all = pick_k([(p[0], p[1]) for p in pairs])
    print(f"\nsmallest k answering every pair the 20 lines answer: {k_all}")
    print("\nleave one log out: k chosen on the other logs, pairs of the left-out log lost "
          "against 20 lines\n")
    print("| left out | k | its pairs answered at k / at 20 |")
    print("|---|---|---|")
    ks = []
    for name in sorted({p[0] for p in pairs}):
        k = pick_k([(p[0], p[1]) for p in pairs if p[0] != name])
        ks.append(k)
        mine = [p for p in pairs if p[0] == name]
        at_k = sum(1 for p in mine if p[1] is not None and p[1] <= k)
        at_20 = sum(1 for p in mine if p[1] is not None)
        print(f"| {name} | {k} | {at_k} / {at_20} |")
    print(f"\nk over the folds: {min(ks)}-{max(ks)}")


if __name__ == "__main__":
    main()

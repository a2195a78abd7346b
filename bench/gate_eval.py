"""Measure the auto-recall gate on the labelled set (bench/gate_set.jsonl).

    python bench/gate_eval.py [--set bench/gate_set.jsonl] [--locomo DIR] [--misses]

Each item is a user message labelled `fire` (recalling earlier conversation would help) or
`quiet`. LoCoMo items name a turn (`sample_id`, `dia_id`) of ../shared/eval/locomo-dev: its
older turns are every earlier turn of that conversation except the two most recent (still in
the model's context), its previous turn is the one right before. Own items name a `history`
record of the set. Prints coverage (fired / fire items) and false-positive rate
(fired / quiet items), for the gate and for a wording-only baseline that skips the referent
check, per source and language.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from dsh_recall.policy.gate import (
    GateState,
    gate,
    is_process_command,
    past_reference,
    referring_segments,
    vocabulary,
)

HERE = Path(__file__).resolve().parent
DEFAULT_LOCOMO = HERE.parents[1] / "shared" / "eval" / "locomo-dev"
RECENT_IN_CONTEXT = 2


def load(set_path: Path, locomo: Path) -> list[dict]:
    rows = [json.loads(l) for l in set_path.read_text(encoding="utf-8").splitlines() if l.strip()]
    histories = {r["id"]: r for r in rows if r.get("type") == "history"}
    turns: dict[str, list[dict]] = defaultdict(list)
    if any(r.get("source") == "locomo" for r in rows):
        for line in (locomo / "locomo_dev_turns.jsonl").read_text(encoding="utf-8").splitlines():
            t = json.loads(line)
            turns[t["sample_id"]].append(t)
    items = []
    for r in rows:
        if r.get("type") == "history":
            continue
        if r["source"] == "locomo":
            conv = turns[r["sample_id"]]
            idx = next(i for i, t in enumerate(conv) if t["dia_id"] == r["dia_id"])
            message = conv[idx]["text"]
            older = [t["text"] for t in conv[: max(0, idx - RECENT_IN_CONTEXT)]]
            previous = conv[idx - 1]["text"] if idx else ""
        else:
            h = histories[r["history"]]
            message, older, previous = r["message"], h["turns"], h["previous_turn"]
        items.append({**r, "message": message, "older": older, "previous": previous})
    return items


def wording_only(message: str) -> bool:
    """Baseline: fire on any process command or past-reference wording."""
    return is_process_command(message)[0] or past_reference(message) is not None


def evaluate(items: list[dict]) -> dict:
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    misses = []
    vocab_cache: dict[tuple, frozenset] = {}
    for it in items:
        key = (it.get("sample_id") or it.get("history"), len(it["older"]))
        if key not in vocab_cache:
            vocab_cache[key] = vocabulary(it["older"])
        d = gate(it["message"], vocab_cache[key], referring_segments(it["previous"]), GateState())
        base = wording_only(it["message"])
        for g in ("all", f"{it['source']}", f"{it['source']}-{it['lang']}"):
            c = groups[g]
            c[it["label"]] += 1
            c[f"{it['label']}_fired"] += int(d.fire)
            c[f"{it['label']}_base"] += int(base)
        if d.fire != (it["label"] == "fire"):
            misses.append({"id": it["id"], "label": it["label"], "reason": d.reason,
                           "message": it["message"][:120]})
    table = {}
    for g, c in groups.items():
        table[g] = {
            "fire_items": c["fire"], "quiet_items": c["quiet"],
            "coverage": round(c["fire_fired"] / c["fire"], 3) if c["fire"] else None,
            "fp_rate": round(c["quiet_fired"] / c["quiet"], 3) if c["quiet"] else None,
            "baseline_coverage": round(c["fire_base"] / c["fire"], 3) if c["fire"] else None,
            "baseline_fp_rate": round(c["quiet_base"] / c["quiet"], 3) if c["quiet"] else None,
        }
    return {"table": table, "misses": misses}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default=str(HERE / "gate_set.jsonl"))
    ap.add_argument("--locomo", default=str(DEFAULT_LOCOMO))
    ap.add_argument("--misses", action="store_true", help="List every wrong decision.")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = evaluate(load(Path(a.set), Path(a.locomo)))
    if a.json:
        json.dump(res, sys.stdout, ensure_ascii=False, indent=2)
        return
    print(f"{'group':<12} {'fire':>5} {'quiet':>6} {'coverage':>9} {'FP rate':>8} "
          f"{'| wording-only cov':>18} {'FP':>6}")
    for g in sorted(res["table"], key=lambda x: (x != "all", x)):
        r = res["table"][g]
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        print(f"{g:<12} {r['fire_items']:>5} {r['quiet_items']:>6} {fmt(r['coverage']):>9} "
              f"{fmt(r['fp_rate']):>8} {fmt(r['baseline_coverage']):>18} "
              f"{fmt(r['baseline_fp_rate']):>6}")
    if a.misses:
        for m in res["misses"]:
            print(f"  MISS {m['id']} ({m['label']}): {m['reason']} :: {m['message']}")


if __name__ == "__main__":
    main()

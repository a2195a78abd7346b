"""Inline forms per content type against the generic form, on real recorded outputs.

For every output of tests/fixtures/forms/ (and the dev CI logs' fail.log files when
RECALL_EVAL_DIR is set): its type as detected, chars of the output, chars inline with the
generic form (head + note + failure lines + tail: `render_inline`, forms off, default
config) and with its typed form (`plan_inline`, what `put` stores), and failure lines kept:

- fixtures: the failure lines are those matching the output's patterns in
  tests/fixtures/forms/failures.json (failing test names, error lines, summary);
- CI logs: the lines of the ground truth's `E` ranges (a range counts when one of its
  lines is kept);

`inline` counts failure lines (or ranges) shown; `named` adds those inside a left-out run
whose name counts them as failure lines ("… lines 40-52: 3 failure lines, ..."), which is
how a typed form keeps a failure over its budget. The generic form names no failure inside
its omitted range, so for it `named` = `inline`.

`decisive`: whether the line that says why the output failed is shown inline (not only
counted), generic / typed: for a fixture the first line matching its `decisive` pattern in
failures.json, for a CI log the first line of the ground truth's first `E` range; `first
hit`: the same for the failure finder's first line (`logrank.digest`, what a log form shows
first). With --budgets, the same per inline budget (the decisive line and the first hit
shown, generic and typed, over every output that has one). Then the time to plan each form given the search index (`put` builds it anyway), the
generic and the typed one side by side (typed: detection, marks, fit).

    python bench/objects_forms.py [--runs N] [--budgets 1000,1500,2000,3000]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import time
from pathlib import Path

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.policy import offload
from dsh_recall.policy.forms import registry
from dsh_recall.policy.forms.base import GAP_LINE
from dsh_recall.rank import logrank
from dsh_recall.rank.line_index import build_index

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "forms"
_NUM = re.compile(r"(\d+)\| ")
_FAILS = re.compile(r"[^:]*: ([\d,]+) failure lines?\b")


def lines_of(text: str, view: str) -> list[str]:
    lines = view.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def generic_shown(text: str, inline: offload.Inline | None, n: int) -> set[int]:
    if inline is None:
        return set(range(n))
    head = text.count("\n", 0, inline.head_end)
    tail = text.count("\n", 0, inline.tail_start)
    return set(range(head)) | {li - 1 for li in inline.region} | set(range(tail, n))


def typed_seen(plan: offload.FormPlan, n: int) -> tuple[set[int], list[tuple[int, int, int]]]:
    shown = set(range(plan.first - 1)) | set(range(plan.last, n))
    gaps = []
    for piece in plan.body:
        g = GAP_LINE.fullmatch(piece)
        if g is not None:
            f = _FAILS.match(piece)
            gaps.append((int(g[1]) - 1, int(g[2]) - 1, int(f[1].replace(",", "")) if f else 0))
        elif (m := _NUM.match(piece)) is not None:
            shown.add(int(m[1]) - 1)
    return shown, gaps


def kept(groups: list[set[int]], shown: set[int],
         gaps: list[tuple[int, int, int]]) -> tuple[int, int]:
    """(groups with a line shown, groups with a line shown or counted in a named run)."""
    inline = sum(1 for g in groups if g & shown)
    named = 0
    for g in groups:
        if g & shown or any(f and any(lo <= li <= hi for li in g) for lo, hi, f in gaps):
            named += 1
    return inline, named


def gt_groups(case: Path, text: str) -> list[set[int]]:
    """The case's `E` ranges as 0-based newline lines (ground truth counts a bare \\r as a
    line break too); tests/test_forms.py reads them through this too."""
    starts = [0] + [m.end() for m in re.finditer("\r\n|\r|\n", text)]
    at, pos = [], 0
    for piece in text.split("\n"):
        end = max(pos, pos + len(piece) - 1)
        at.append(set(range(bisect.bisect_right(starts, pos), bisect.bisect_right(starts, end) + 1)))
        pos += len(piece) + 1
    out = []
    for raw in (case / "groundtruth").read_text().splitlines():
        parts = raw.split()
        if len(parts) == 2 and parts[0] == "E":
            a, _, b = parts[1].partition("-")
            want = set(range(int(a), int(b or a) + 1))
            out.append({li for li, r in enumerate(at) if want & r})
    return out


def row(name: str, text: str, groups_of, decisive_of, cfg: ObjectsConfig, runs: int) -> dict:
    idx = build_index(text)
    lines = lines_of(text, idx.view)
    n = len(lines)
    groups = groups_of(lines)
    decisive = decisive_of(lines, groups)
    kind0 = registry.detect(lines)
    hits = logrank.digest(idx.view, idx.starts, idx.flags, 2 * offload.REGION_LIMIT) \
        if kind0 is None or registry.FORMS[kind0].log else []
    first_hit = hits[0] if hits else None
    t0 = time.perf_counter()
    for _ in range(runs):
        generic = offload.render_inline(text, "ab12cd34", "bash", cfg, idx=idx)
    g_ms = (time.perf_counter() - t0) * 1000 / max(1, runs)
    t0 = time.perf_counter()
    for _ in range(runs):
        plan = offload.plan_inline(text, cfg, idx=idx)
    ms = (time.perf_counter() - t0) * 1000 / max(1, runs)
    if runs == 0:
        generic = offload.render_inline(text, "ab12cd34", "bash", cfg, idx=idx)
        plan = offload.plan_inline(text, cfg, idx=idx)
    g_shown = generic_shown(text, generic, n)
    g_in, _ = kept(groups, g_shown, [])
    if isinstance(plan, offload.FormPlan):
        typed = plan.render("ab12cd34")
        assert typed is not None
        shown, gaps = typed_seen(plan, n)
        t_in, t_named = kept(groups, shown, gaps)
        kind, chars = plan.kind, len(typed.text)
    else:
        kind, chars = "(generic)", len(generic.text) if generic else len(text)
        t_in = t_named = g_in
        shown = g_shown

    def has(li: int | None, seen: set[int]) -> bool | None:
        return None if li is None else li in seen

    return {"name": name, "kind": kind, "chars": len(text),
            "generic": len(generic.text) if generic else len(text), "typed": chars,
            "fails": len(groups), "g_in": g_in, "t_in": t_in, "t_named": t_named, "ms": ms,
            "g_ms": g_ms, "decisive": decisive, "g_dec": has(decisive, g_shown),
            "t_dec": has(decisive, shown), "hit": first_hit, "g_hit": has(first_hit, g_shown),
            "t_hit": has(first_hit, shown)}


def mark(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else "**no**"


def outputs(cfg: ObjectsConfig, runs: int) -> list[dict]:
    expect = json.loads((FIX / "failures.json").read_text())
    rows = []
    for name, spec in sorted(expect.items()):
        text = (FIX / name).read_bytes().decode("utf-8", "replace")
        pats = [re.compile(p) for p in spec["failures"]]
        dec = re.compile(spec["decisive"]) if "decisive" in spec else None
        rows.append(row(name, text, lambda lines, pats=pats: [
            {li} for li, x in enumerate(lines) if any(p.search(x) for p in pats)],
            lambda lines, _g, dec=dec: None if dec is None else next(
                li for li, x in enumerate(lines) if dec.search(x.rstrip("\r"))),
            cfg, runs))
    ci = Path(os.environ["RECALL_EVAL_DIR"]) / "ci-logs-dev" / "cases" \
        if os.environ.get("RECALL_EVAL_DIR") else None
    if ci is not None and ci.is_dir():
        for case in sorted(p for p in ci.iterdir() if (p / "fail.log").exists()):
            text = (case / "fail.log").read_bytes().decode("utf-8", "replace")
            rows.append(row(f"ci-logs-dev/{case.name}", text,
                            lambda _lines, case=case, text=text: gt_groups(case, text),
                            lambda _lines, groups: min(groups[0]) if groups else None,
                            cfg, runs))
            if len(text) > registry.MAX_CHARS:
                # Over the typed forms' cap: also its last lines under it (what a harness
                # that keeps an output's tail would store), which get the typed form.
                cut = text.index("\n", len(text) - registry.MAX_CHARS) + 1
                drop = text.count("\n", 0, cut)
                groups = [{li - drop for li in g if li >= drop}
                          for g in gt_groups(case, text)]
                groups = [g for g in groups if g]
                rows.append(row(f"ci-logs-dev/{case.name} (last {len(text) - cut:,} chars)",
                                text[cut:], lambda _lines, groups=groups: groups,
                                lambda _lines, groups: min(groups[0]) if groups else None,
                                cfg, runs))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="plans per output, for the time")
    ap.add_argument("--budgets", default="", help="inline budgets to sweep (comma-separated)")
    args = ap.parse_args()
    cfg = ObjectsConfig()
    if not os.environ.get("RECALL_EVAL_DIR"):
        print("(RECALL_EVAL_DIR unset: the dev CI logs are left out)\n")
    rows = outputs(cfg, args.runs)
    print("| output | type | chars | generic inline | typed inline | failures | generic shows "
          "| typed shows | typed shows or names | decisive shown (generic / typed) "
          "| first hit shown (generic / typed) | generic ms | typed ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|:-:|:-:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['kind']} | {r['chars']:,} | {r['generic']:,} | "
              f"{r['typed']:,} | {r['fails']} | {r['g_in']} | {r['t_in']} | {r['t_named']} | "
              f"{mark(r['g_dec'])} / {mark(r['t_dec'])} | {mark(r['g_hit'])} / "
              f"{mark(r['t_hit'])} | {r['g_ms']:.1f} | {r['ms']:.1f} |")
    typed = [r for r in rows if r["kind"] != "(generic)"]
    tot = {k: sum(r[k] for r in typed) for k in ("chars", "generic", "typed", "fails", "g_in",
                                                  "t_in", "t_named")}
    dec = [r for r in typed if r["decisive"] is not None]
    hit = [r for r in typed if r["hit"] is not None]
    print(f"| **{len(typed)} typed outputs, {len({r['kind'] for r in typed})} types** | | "
          f"{tot['chars']:,} | {tot['generic']:,} | {tot['typed']:,} | {tot['fails']} | "
          f"{tot['g_in']} | {tot['t_in']} | {tot['t_named']} | "
          f"{sum(bool(r['g_dec']) for r in dec)} / {sum(bool(r['t_dec']) for r in dec)} of "
          f"{len(dec)} | {sum(bool(r['g_hit']) for r in hit)} / "
          f"{sum(bool(r['t_hit']) for r in hit)} of {len(hit)} | | |")
    missed = [r["name"] for r in typed if r["t_named"] < r["fails"]]
    print(f"\nfailures kept (inline or named) by every typed form: "
          f"{'all' if not missed else 'NOT ' + ', '.join(missed)}")
    if not args.budgets:
        return
    print("\n| inline budget | decisive shown, generic | decisive shown, typed "
          "| first hit shown, generic | first hit shown, typed | typed inline chars "
          "| typed forms missing the decisive line |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for b in (int(x) for x in args.budgets.split(",")):
        rs = outputs(cfg.model_copy(update={"inline_chars": b}), 0)
        dec = [r for r in rs if r["decisive"] is not None]
        hit = [r for r in rs if r["hit"] is not None]
        miss = [r["name"] for r in dec if r["kind"] != "(generic)" and not r["t_dec"]]
        print(f"| {b:,} | {sum(bool(r['g_dec']) for r in dec)}/{len(dec)} | "
              f"{sum(bool(r['t_dec']) for r in dec)}/{len(dec)} | "
              f"{sum(bool(r['g_hit']) for r in hit)}/{len(hit)} | "
              f"{sum(bool(r['t_hit']) for r in hit)}/{len(hit)} | "
              f"{sum(r['typed'] for r in rs if r['kind'] != '(generic)'):,} | "
              f"{', '.join(miss) or '-'} |")


if __name__ == "__main__":
    main()

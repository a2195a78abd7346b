"""Tokens per request in a real dsh session on a real tree, plain dsh against dsh-recall.

    python bench/dsh_real.py [--runs 3] [--quick] [--tree TAG] [--eval-dir DIR]
                             [--windows default,64k,32k] [--overflow] [--json OUT]
                             [--embedder fake|shipped] [--hogs N]

Runs the real DeepSeek Harness runtime (`deepseek-harness-runtime-bin`, the `test` extra)
offline against a loopback stand-in model (tests/dsh_standin.py) whose brain follows one
script in every arm (bench/dsh_script.py): a flask tree from the SWE-bench dev bundle, five
user turns, about 15-20 tool calls (grep, full reads of helpers.py/cli.py/app.py, a real
failing pytest run, three real CI logs up to 1 MB, an edit, a green re-run, a question about
the turn-1 decision, a question a note answers). Whenever a fact the model needs is not in
the request it received, the brain fetches it: with the recall tool(s) when the request's
`tools` list has them, otherwise with bash/grep/a ranged read as in plain dsh.

Arms: plain dsh (no patch), MCP only (`integrate dsh patch --no-native`), full
(`integrate dsh patch`). Windows: dsh's default, 64k and 32k tokens
(`llm-deepseek.defaultContextWindow`; the stand-in model id is not in dsh's catalog, so
that default applies). `--overflow`: also a 64k variant where the stand-in answers the
first request of turn 3 with a context-length error once, which makes dsh compact.

Figures per arm (medians over --runs): total input tokens (system + tools + messages of
every request, estimated like `estimate_tokens`) and uncached input tokens (each request
serialized in the provider's cache order -- tools, system, messages -- as compact JSON; the
tokens after the first byte that differs from the previous request's serialization; all of
the first request), requests, facts recovered, edit ok, wall time, recall calls, and the
worker calls dsh went on without (past the plugin's deadline: the plugin's own count in
`<recall home>/dsh/plugin-status.json`), per session.

`--embedder shipped` runs the worker with the shipped ONNX model instead of the fake
embedder (its idle embedding then costs real CPU); `--hogs N` keeps N CPU-bound processes
running beside every arm (a busy machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from dsh_script import READS, TURNS, Brain, build, iter_calls  # noqa: E402

from dsh_recall.core.text import estimate_tokens  # noqa: E402
from dsh_recall.frontends.cli.integrate import dsh_patch  # noqa: E402
from dsh_standin import dsh_session, recall_exe, runtime_available, with_usage  # noqa: E402

ARMS = ("plain", "mcp", "full")
ARM_TITLE = {"plain": "plain dsh", "mcp": "MCP only", "full": "full"}
WINDOWS = {"default": None, "64k": 65536, "32k": 32768}
DEFAULT_TAG = "flask-d8c37f43724cd9fb0870f77877b7c4c7e38a19e0"


def window_patch(window: int | None) -> str:
    """The cordis patch rows that set dsh's context window for a model it does not know.

    compaction-basic keeps 65,536 tokens of headroom by default: in a 64k window that leaves
    no pressure budget, so dsh logs a config error and never compacts. 4,096 of headroom
    and an 8,192-token output cap give thresholds of 52,428 (64k) and 20,480 (32k) tokens.
    """
    if window is None:
        return ""
    return ("- id: llm-deepseek\n  config:\n"
            f"    defaultContextWindow: {window}\n    maxTokens: 8192\n"
            "- id: compaction-basic\n  config:\n    headroomTokens: 4096\n    maxTokens: 4096\n")


def serialize(body: dict[str, Any]) -> str:
    """The request in the provider's cache order: tools, then system, then messages."""
    return json.dumps({k: body.get(k) for k in ("tools", "system", "messages")},
                      ensure_ascii=False, separators=(",", ":"))


def first_diff(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n  # binary search on prefix equality: the strings are megabytes long
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def token_figures(requests: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    total, uncached = [], []
    prev = ""
    for body in requests:
        s = serialize(body)
        total.append(estimate_tokens(s))
        uncached.append(estimate_tokens(s[first_diff(prev, s):]))
        prev = s
    return total, uncached


def categories(requests: list[dict[str, Any]]) -> dict[str, int]:
    """Where the input tokens go, summed over requests: tool schemas + system, file reads,
    bash outputs, recall answers, other tool results (grep, edit, ...), and turns and calls
    (user text, the runtime context, the model's tool calls and answers)."""
    out = {"schemas + system": 0, "file reads": 0, "bash outputs": 0, "recall answers": 0,
           "other results": 0, "turns and calls": 0}
    names: dict[str, str] = {}
    for body in requests:
        out["schemas + system"] += estimate_tokens(json.dumps(
            [body.get("tools"), body.get("system")], ensure_ascii=False, separators=(",", ":")))
        for m in body.get("messages") or []:
            content = m.get("content")
            if not isinstance(content, list):
                out["turns and calls"] += estimate_tokens(json.dumps(content, ensure_ascii=False))
                continue
            for b in content:
                text = json.dumps(b, ensure_ascii=False, separators=(",", ":"))
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    names[b["id"]] = b.get("name", "")
                kind = "turns and calls"
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    tool = names.get(b.get("tool_use_id", ""), "")
                    kind = ("file reads" if tool == "read" else "bash outputs" if tool == "bash"
                            else "recall answers" if tool.startswith("mcp__recall__")
                            else "other results")
                out[kind] += estimate_tokens(text)
    return out


def run_arm(arm: str, window: int | None, sc_args: tuple[Path, str, Path], overflow: bool,
            keep: Path | None, embedder: str = "fake") -> dict[str, Any]:
    bare, tag, eval_dir = sc_args
    tmp = Path(tempfile.mkdtemp(prefix=f"dsh-real-{arm}-"))
    started = time.monotonic()
    sc = build(tmp, bare, tag, eval_dir)
    env = {"DSH_RECALL_HOME": str(tmp / "recall-home"),
           "DSH_RECALL_EMBEDDER__NAME": "fake" if embedder == "fake" else "minilm",
           "DSH_RECALL_NOTES__ROOTS": json.dumps([str(sc.notes)])}
    patch = window_patch(window)
    if window is not None:
        # The ledger's model of plain dsh's compaction threshold: the request's max output
        # tokens + compaction-basic's headroom, as window_patch sets them.
        env["DSH_RECALL_DSH_COMPACT_RESERVE"] = str(8192 + 4096)
    if arm != "plain":
        patch = dsh_patch(command=recall_exe(), env=env, native=(arm == "full")) + patch
    brain = Brain(sc, tmp / "dsh-home", force_overflow=overflow)

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return with_usage(brain(body), estimate_tokens(serialize(body)))

    with dsh_session(tmp, answer, patch or None) as (session, standin, dsh_home):
        for message in TURNS:
            session.run(message)
        requests = list(standin.requests)
    wall = time.monotonic() - started
    try:
        late = json.loads((tmp / "recall-home" / "dsh" / "plugin-status.json").read_text()).get("late") or {}
    except (OSError, ValueError):
        late = {}  # plain dsh, or a plugin that never wrote its status
    total, uncached = token_figures(requests)
    # What the plugin's ledger counted (services/report/ledger.py), against the wire below.
    from dsh_recall.services.report.ledger import figures_from_log
    ledger = figures_from_log(tmp / "recall-home")["totals"] if arm == "full" else None
    messages = sum(estimate_tokens(json.dumps(b.get("messages"), ensure_ascii=False, separators=(",", ":")))
                   for b in requests)
    helpers = (sc.repo / READS[0]).read_text()
    edited = sc.facts["edit old text"] not in helpers and '"no", "off"' in helpers
    facts = brain.log.facts
    result = {
        "arm": arm, "window": window, "requests": len(requests), "total": sum(total),
        "uncached": sum(uncached), "per_request_total": total, "per_request_uncached": uncached,
        "facts_ok": sum(1 for f in sc.facts if facts.get(f, {}).get("recovered")),
        "facts_n": len(sc.facts), "facts": facts, "edit_ok": edited, "green": brain.log.green,
        "edit_result": brain.log.edit_result, "wall_s": round(wall, 1),
        "recall_calls": brain.log.recall_calls, "summaries": brain.log.summaries,
        "tool_calls": sum(1 for _ in iter_calls(requests)), "errors": brain.log.errors,
        "categories": categories(requests), "tools": [t.get("name") for t in requests[0].get("tools") or []],
        "schema_tokens": estimate_tokens(json.dumps(requests[0].get("tools"), separators=(",", ":"))),
        "system_tokens": estimate_tokens(json.dumps(requests[0].get("system"))),
        "read_sizes": sc.read_sizes, "late": late, "late_n": sum(late.values()),
        "messages": messages, "ledger": ledger,
    }
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        name = f"{arm}-{window or 'default'}{'-overflow' if overflow else ''}"
        (keep / f"{name}.requests.json").write_text(json.dumps(requests))
    for f in sc.facts:
        if not facts.get(f, {}).get("recovered"):
            print(f"  !! {arm}/{window or 'default'}: fact NOT recovered: {f} "
                  f"({sc.facts[f]!r}; tried: {', '.join(facts.get(f, {}).get('how', ['never checked']))})",
                  file=sys.stderr)
    if not edited:
        print(f"  !! {arm}/{window or 'default'}: the edit did not land: {brain.log.edit_result!r}",
              file=sys.stderr)
    for e in brain.log.errors:
        print(f"  !! {arm}/{window or 'default'}: brain error: {e}", file=sys.stderr)
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return result


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": "; ".join(r["error"] for r in runs)}
    keys = ("total", "uncached", "requests", "wall_s", "recall_calls", "facts_ok", "tool_calls")
    out_late = [r.get("late_n", 0) for r in ok]
    out = {k: median([r[k] for r in ok]) for k in keys}
    out["facts_n"] = ok[0]["facts_n"]
    out["edit_ok"] = f"{sum(r['edit_ok'] for r in ok)}/{len(ok)}"
    out["green"] = f"{sum(r['green'] for r in ok)}/{len(ok)}"
    out["runs"] = len(ok)
    out["late_sessions"] = f"{sum(1 for n in out_late if n)}/{len(ok)}"
    out["late_calls"] = sum(out_late)
    out["failed_runs"] = len(runs) - len(ok)
    out["categories"] = {k: median([r["categories"][k] for r in ok]) for k in ok[0]["categories"]}
    out["messages"] = median([r.get("messages", 0) for r in ok])
    kept = [r["ledger"]["tokens_kept_out"] for r in ok if r.get("ledger")]
    out["ledger_kept"] = median(kept) if kept else None
    out["ledger_cuts"] = next((f"{r['ledger'].get('plain_prunes', 0)}/{r['ledger'].get('plain_compactions', 0)}"
                               for r in ok if r.get("ledger")), "-")
    return out


def pct(x: float, base: float) -> str:
    return f"{x:,.0f} ({x / base:.0%})" if base else f"{x:,.0f}"


def print_tables(results: dict[str, dict[str, dict[str, Any]]]) -> None:
    for figure in ("total", "uncached"):
        print(f"\n{figure} input tokens (median), % of plain dsh\n")
        print("| window | plain dsh | MCP only | full |")
        print("|---|---|---|---|")
        for window, arms in results.items():
            base = arms.get("plain", {}).get(figure, 0) if "error" not in arms.get("plain", {}) else 0
            cells = []
            for arm in ARMS:
                a = arms.get(arm, {})
                cells.append("failed" if "error" in a or not a else pct(a[figure], base))
            print(f"| {window} | " + " | ".join(cells) + " |")
    print("\nper arm: requests, tool calls, facts recovered, edit ok, tests green, recall calls, wall\n")
    print("| window | arm | requests | tool calls | facts | edit ok | green | recall calls | wall s "
          "| sessions with a late call | late calls |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for window, arms in results.items():
        for arm in ARMS:
            a = arms.get(arm, {})
            if "error" in a or not a:
                print(f"| {window} | {ARM_TITLE[arm]} | failed: {a.get('error', 'not run')[:80]} |")
                continue
            print(f"| {window} | {ARM_TITLE[arm]} | {a['requests']:.0f} | {a['tool_calls']:.0f} | "
                  f"{a['facts_ok']:.0f}/{a['facts_n']} | {a['edit_ok']} | {a['green']} | "
                  f"{a['recall_calls']:.0f} | {a['wall_s']:.0f} | {a['late_sessions']} | "
                  f"{a['late_calls']} |")
    print("\nthe plugin's ledger (tokens kept out, every request) against the wire difference to plain dsh\n")
    print("| window | ledger | plain prunes / summaries (ledger's model) | plain - full, total "
          "| plain - full, messages only | ledger / messages difference | ledger / total difference |")
    print("|---|---|---|---|---|---|---|")
    for window, arms in results.items():
        p, f = arms.get("plain", {}), arms.get("full", {})
        if "error" in p or "error" in f or not p or not f or f.get("ledger_kept") is None:
            continue
        wire, msgs = p["total"] - f["total"], p["messages"] - f["messages"]
        print(f"| {window} | {f['ledger_kept']:,.0f} | {f['ledger_cuts']} | {wire:,.0f} | {msgs:,.0f} | "
              f"{f['ledger_kept'] / msgs:.1%} | {f['ledger_kept'] / wire:.1%} |" if msgs and wire
              else f"| {window} | {f['ledger_kept']:,.0f} | {f['ledger_cuts']} | {wire:,.0f} | {msgs:,.0f} | - | - |")
    print("\nwhere the input tokens go (median tokens summed over requests)\n")
    cats = list(next(iter(next(iter(results.values())).values())).get("categories", {}) or [])
    print("| window | arm | " + " | ".join(cats) + " |")
    print("|---|---|" + "---|" * len(cats))
    for window, arms in results.items():
        for arm in ARMS:
            a = arms.get(arm, {})
            if "categories" in a:
                print(f"| {window} | {ARM_TITLE[arm]} | "
                      + " | ".join(f"{a['categories'][c]:,.0f}" for c in cats) + " |")
    print_floor(results)


def print_floor(results: dict[str, dict[str, dict[str, Any]]]) -> None:
    """What an arm would still send with every tool result empty (its schemas, system
    prompt, turns and calls at its own request count), and what one more request costs
    there at the least (the schemas and system prompt of one request)."""
    print("\nthe floor: every tool result empty, at the arm's own request count\n")
    print("| window | arm | requests | schemas + system a request | floor | floor, % of plain dsh "
          "| tool results |")
    print("|---|---|---|---|---|---|---|")
    for window, arms in results.items():
        base = arms.get("plain", {}).get("total", 0) if "error" not in arms.get("plain", {}) else 0
        for arm in ARMS:
            a = arms.get(arm, {})
            if "categories" not in a:
                continue
            c = a["categories"]
            floor = c["schemas + system"] + c["turns and calls"]
            results_ = sum(v for k, v in c.items() if k not in ("schemas + system", "turns and calls"))
            print(f"| {window} | {ARM_TITLE[arm]} | {a['requests']:.0f} | "
                  f"{c['schemas + system'] / a['requests']:,.0f} | {floor:,.0f} | "
                  f"{f'{floor / base:.1%}' if base else '-'} | {results_:,.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="One run, dsh's default window only.")
    ap.add_argument("--tree", default=DEFAULT_TAG, help="A flask tag of the SWE-bench dev bundle.")
    ap.add_argument("--eval-dir", type=Path, default=Path(os.environ.get(
        "RECALL_EVAL_DIR", HERE.parent.parent / "shared" / "eval")))
    ap.add_argument("--windows", default="default,64k,32k")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--overflow", action="store_true",
                    help="Also run a 64k variant with one forced compaction (turn 3).")
    ap.add_argument("--keep", type=Path, default=None, help="Write every arm's request bodies here.")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--embedder", choices=("fake", "shipped"), default="fake")
    ap.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside every arm.")
    args = ap.parse_args()
    why = runtime_available()
    if why:
        sys.exit(why)
    bundle = args.eval_dir / "swebench-dev" / "trees.bundle"
    if not bundle.exists():
        sys.exit(f"{bundle} not found: pass --eval-dir or set RECALL_EVAL_DIR")
    runs = 1 if args.quick else args.runs
    windows = ["default"] if args.quick else args.windows.split(",")
    variants = [(w, WINDOWS[w], False) for w in windows]
    if args.overflow:
        variants.append(("64k + forced compaction", 65536, True))
    arms = args.arms.split(",")
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.hogs)]
    try:
        run_all(args, runs, variants, arms, raw)
    finally:
        for h in hogs:
            h.kill()
    results = {label: {arm: summarise(rs) for arm, rs in arms_.items()} for label, arms_ in raw.items()}
    print(f"\ntree {args.tree}, {runs} run(s) per cell, embedder {args.embedder}, "
          f"{args.hogs} CPU hogs on {os.cpu_count()} cores")
    print_tables(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"tree": args.tree, "runs": runs, "summary": results,
                                         "raw": raw}, indent=1, default=str))


def run_all(args: argparse.Namespace, runs: int, variants: list[tuple[str, int | None, bool]],
            arms: list[str], raw: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-real-tree-") as t:
        bare = Path(t) / "trees.git"
        bundle = args.eval_dir / "swebench-dev" / "trees.bundle"
        subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(bare)], check=True)
        tags = subprocess.run(["git", "--git-dir", str(bare), "tag"], capture_output=True,
                              text=True, check=True).stdout.split()
        if args.tree not in tags:
            sys.exit(f"no tree {args.tree}; flask trees: {', '.join(x for x in tags if 'flask' in x)}")
        for i in range(runs):
            for label, window, overflow in variants:
                for arm in arms:
                    print(f"run {i + 1}/{runs}: {label} / {ARM_TITLE[arm]} ...", file=sys.stderr, flush=True)
                    try:
                        r = run_arm(arm, window, (bare, args.tree, args.eval_dir), overflow, args.keep,
                                    args.embedder)
                        print(f"  {r['requests']} requests, {r['total']:,} tokens, {r['uncached']:,} uncached, "
                              f"facts {r['facts_ok']}/{r['facts_n']}, edit {'ok' if r['edit_ok'] else 'FAILED'}, "
                              f"{r['wall_s']} s", file=sys.stderr, flush=True)
                    except Exception as e:  # one arm failing must not stop the others
                        traceback.print_exc()
                        r = {"error": f"{type(e).__name__}: {e}"}
                        print(f"  !! {label} / {ARM_TITLE[arm]} failed: {r['error']}", file=sys.stderr)
                    raw.setdefault(label, {}).setdefault(arm, []).append(r)


if __name__ == "__main__":
    main()

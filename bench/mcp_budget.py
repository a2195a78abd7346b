"""Every answer of every MCP tool under the token budget, on the dev data sets.

Builds real data in a temporary recall home, spawns `dsh-recall mcp` and calls every tool
through the official MCP client (stdio), as a harness would:

- code: one flask tree and one pytest tree from swebench-dev (extracted from the bundle,
  cached under the temp dir); the issue texts of those repos as `code_search` queries
  (flask's 4 plus pytest's first 26 by default), `code_index` with a wait, and `configure`
  switching the workspace between the two trees;
- history: the locomo-dev conversations imported as generic JSONL (converted as
  bench/history_locomo.py does); 50 questions spread over the set for `history_search`
  (scope all, plain and detail) and `history_detail` around each top hit (window 3 and 20);
- objects: every ci-logs-dev fail.log offloaded (the threshold is lowered so the 4 KB logs
  are objects too); `object_recall` by id, by a range from the middle, at the maximum count,
  following next_start once, and by query (the first ground-truth error line, "error",
  "FAILED");
- notes: the qmd-docs folder as a notes root; the queries of eval_queries.json and
  eval-deep-research.jsonl for `notes_search`;
- `status` and `configure` along the way.

Then a second server with `--tools compact` answers the same kinds of call through its one
`recall` tool (a search per code query, history question and notes query; each object by
id alone, by lines, by query and failures=true; the history hits by session#seq), counted
the same way, one row per mode (history by id: `session#seq` and a query within the session,
on the sessions the full run found, since locomo's sessions are not in the server's
workspace that `source="history"` searches).

Before the answers, the per-request cost of each tool profile: what a harness sends with
every model request (each tool's name, description and input schema, plus the server's
instructions, at one token per 4 chars), listed through the MCP client; with --dsh, also as
measured in the request body a real dsh runtime sends (tests/dsh_standin.py, offline),
including the three resource tools and system prompt section dsh adds for any MCP server.

Every list answer's next_cursor is followed for up to --pages more pages. An answer is
counted the way the server budgets it (frontends/mcp/budget.answer_tokens: the compact
JSON of the structured content plus the text rendering plus the envelope allowance);
"wire" is the estimate for the whole JSON-RPC result as the client received it.

The embedder is "fake" (deterministic hashing, no model) so the run takes a few minutes:
answer sizes depend on what is ranked, not on how well, so the budget check holds for the
real model too, while ranking quality is measured by the other benches.

    python bench/mcp_budget.py [--budget N] [--pages N] [--code-queries N] [--questions N]
                               [--dsh] [--schemas-only]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"
EXE = shutil.which("dsh-recall", path=str(Path(sys.executable).parent)) or "dsh-recall"
LIST_TOOLS = {"code_search", "history_search", "history_detail", "notes_search"}


def _bench_module(name: str) -> Any:
    """Import a sibling bench script (not a package) to reuse its helpers."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def swebench_trees(n_code: int) -> list[tuple[Path, list[str]]]:
    """[(tree, issue texts)] for one flask and one pytest base commit."""
    code_bench = _bench_module("code_swebench")
    qs = [json.loads(line) for line in
          (EVAL / "swebench-dev" / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    out = []
    left = n_code
    for repo in ("pallets/flask", "pytest-dev/pytest"):
        mine = [q for q in qs if q["repo"] == repo]
        texts = [q["query"] for q in mine][:left]
        left -= len(texts)
        out.append((code_bench.tree(mine[0]["tree_tag"]), texts))
    return out


def import_history(home: Path, cfg: Any, n_questions: int) -> list[dict[str, Any]]:
    """Import locomo-dev as history; return n questions spread over the whole set."""
    locomo = _bench_module("history_locomo")
    from dsh_recall.services import history

    files, _ = locomo.convert(EVAL / "locomo-dev", home)
    history.import_paths([str(f) for f in files], "generic", cfg)
    qs = locomo.questions(EVAL / "locomo-dev")
    step = max(1, len(qs) // max(1, n_questions))
    return qs[::step][:n_questions]


def offload_logs(cfg: Any) -> list[dict[str, Any]]:
    """Offload every fail.log; [{id, case, total, error_line}]."""
    from dsh_recall.services.objects import ObjectService

    out = []
    svc = ObjectService(cfg.objects)
    try:
        cases = sorted((EVAL / "ci-logs-dev" / "cases").glob("*/fail.log"))
        for seq, log in enumerate(cases):
            text = log.read_text(encoding="utf-8", errors="replace")
            put = svc.put(text, session="bench-ci", seq=seq, tool="bash")
            if not put.offloaded:
                print(f"  note: {log.parent.name} ({len(text)} chars) was not offloaded")
                continue
            first_error = ""
            gt = (log.parent / "groundtruth").read_text().split()
            if len(gt) >= 3 and gt[1] == "E":
                start = int(gt[2].split("-")[0])
                lines = text.splitlines()
                first_error = next((ln.strip() for ln in lines[start - 1:start + 20]
                                    if ln.strip()), "")[:200]
            out.append({"id": put.id, "case": log.parent.name, "total": len(text),
                        "error_line": first_error})
    finally:
        svc.close()
    return out


def notes_queries() -> list[str]:
    qmd = EVAL / "qmd-docs"
    qs = [q["query"] for q in json.loads((qmd / "eval_queries.json").read_text())]
    qs += [json.loads(line)["query"] for line in
           (qmd / "eval-deep-research.jsonl").read_text().splitlines() if line.strip()]
    return qs


def measure(res: Any) -> tuple[int, int, int]:
    """(tokens as the server budgets the answer, tokens of the whole result on the wire,
    tokens of its text alone: what dsh shows the model)."""
    from dsh_recall.core.text import estimate_tokens
    from dsh_recall.frontends.mcp.budget import answer_tokens

    text = "".join(getattr(c, "text", "") for c in res.content)
    budgeted = answer_tokens(res.structured_content or {}, lambda _: text)
    wire = estimate_tokens(res.model_dump_json(by_alias=True, exclude_none=True))
    return budgeted, wire, estimate_tokens(text)


class Recorder:
    """Calls tools, follows cursors, and keeps one row per answer."""

    def __init__(self, session: Any, pages: int):
        self.session, self.pages = session, pages
        self.rows: list[dict[str, Any]] = []

    async def call(self, tool: str, args: dict[str, Any], label: str | None = None) -> Any:
        """Call `tool` (following next_cursor for up to `pages` more pages of a list tool or
        of recall); each answer is a row under `label` (default: the tool's name)."""
        first = None
        cursor = None
        follow = tool in LIST_TOOLS or tool == "recall"
        for page in range(1 + (self.pages if follow else 0)):
            a = dict(args, cursor=cursor) if cursor else args
            res = await self.session.call_tool(tool, a)
            budgeted, wire, text_tok = measure(res)
            sc = res.structured_content or {}
            self.rows.append({"tool": label or tool, "tokens": budgeted, "wire": wire,
                              "text": text_tok, "error": bool(res.is_error), "page": page,
                              "truncated": bool(sc.get("truncated")),
                              "msg": res.content[0].text[:160] if res.is_error else ""})
            first = first or res
            cursor = sc.get("next_cursor")
            if res.is_error or not cursor:
                break
        return first


async def run_calls(world: dict[str, Any], pages: int) -> list[dict[str, Any]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    (flask, flask_qs), (pytest_tree, pytest_qs) = world["trees"]
    # The pytest tree is not below the flask one: the user allows it, as a user would.
    params = StdioServerParameters(command=EXE, args=["mcp", "--allow-workspace", str(pytest_tree)],
                                   env=world["env"], cwd=str(flask))
    with open(world["tmp"] / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                rec = Recorder(session, pages)
                await rec.call("status", {})
                await rec.call("configure", {"token_budget": world["budget"]})
                for tree, qs in ((flask, flask_qs), (pytest_tree, pytest_qs)):
                    await rec.call("configure", {"workspace": str(tree)})
                    await rec.call("code_index", {"wait_s": 50})
                    await rec.call("status", {})
                    for i, q in enumerate(qs):
                        args: dict[str, Any] = {"query": q}
                        if i % 3 == 1:
                            args["limit"] = 20
                        elif i % 3 == 2:
                            args["files"] = True
                        await rec.call("code_search", args)
                for i, q in enumerate(world["questions"]):
                    args = {"query": q["question"], "scope": "all"}
                    if i % 2:
                        args.update(detail=True, limit=20)
                    res = await rec.call("history_search", args)
                    hits = (res.structured_content or {}).get("hits") or []
                    if hits:
                        h = hits[0]
                        around = h.get("start_seq", h.get("seq", 0))
                        world["history_hits"].append((q["question"], h["session"], around))
                        await rec.call("history_detail", {"session": h["session"],
                                                          "around": around,
                                                          "window": 20 if i % 5 == 0 else 3})
                    if i % 10 == 0 and hits:
                        await rec.call("configure", {"session": hits[0]["session"]})
                        await rec.call("history_detail", {"page": 1})
                        await rec.call("history_search", {"query": q["question"]})
                for obj in world["objects"]:
                    oid, total = obj["id"], obj["total"]
                    res = await rec.call("object_recall", {"id": oid})
                    nxt = (res.structured_content or {}).get("next_start")
                    if nxt:
                        await rec.call("object_recall", {"id": oid, "start": nxt})
                    await rec.call("object_recall", {"id": oid, "start": total // 2,
                                                     "count": 4000})
                    await rec.call("object_recall", {"id": oid, "start": 0, "count": 24000})
                    for q in filter(None, (obj["error_line"], "error", "FAILED")):
                        await rec.call("object_recall", {"id": oid, "query": q})
                for q in world["notes_queries"]:
                    await rec.call("notes_search", {"query": q})
                await rec.call("status", {})
                await rec.call("configure", {})
                return rec.rows


async def run_recall(world: dict[str, Any], pages: int) -> list[dict[str, Any]]:
    """The compact profile: the same kinds of call through `recall`, one row per mode."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    (flask, flask_qs), (pytest_tree, pytest_qs) = world["trees"]
    params = StdioServerParameters(command=EXE, args=["mcp", "--tools", "compact"],
                                   env=world["env"], cwd=str(flask))
    with open(world["tmp"] / "server-compact.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                rec = Recorder(session, pages)

                async def recall(mode: str, args: dict[str, Any]) -> Any:
                    return await rec.call("recall", args, label=f"recall {mode}")

                for q in flask_qs + pytest_qs[:10]:
                    await recall("all", {"query": q})
                    await recall("code", {"query": q, "source": "code", "k": 20})
                # source="history" searches the server's workspace, and locomo's sessions
                # belong to workspaces of their own: the history modes here are the ones by
                # id, on the sessions the full run's searches found.
                for question, sid, seq in world["history_hits"]:
                    await recall("session+query", {"id": sid, "query": question})
                    await recall("session#seq", {"id": f"{sid}#{seq}"})
                for obj in world["objects"]:
                    oid = obj["id"]
                    await recall("id", {"id": oid})
                    await recall("lines", {"id": oid, "lines": "1-400"})
                    await recall("failures", {"id": oid, "failures": True})
                    for q in filter(None, (obj["error_line"], "error")):
                        await recall("id+query", {"id": oid, "query": q})
                for q in world["notes_queries"]:
                    await recall("notes", {"query": q, "source": "notes"})
                return rec.rows


def schema_costs(tmp: Path) -> dict[str, dict[str, int]]:
    """Per profile: {tools, chars, tokens} of the tool list + instructions as listed, counted
    as dsh sends them (tests/dsh_standin.listed_chars)."""
    from mcp import Client

    from dsh_recall.core.config import load_config
    from dsh_recall.frontends.mcp.handlers import PROFILES, RecallApp
    from dsh_recall.frontends.mcp.server import build_server

    ds = _standin()
    out = {}
    for profile in PROFILES:
        app = RecallApp(tmp, load_config(workspace=tmp, overrides={"embedder": {"name": "fake"}}),
                        tools=profile)

        async def listing() -> tuple[list[Any], str | None]:
            async with Client(build_server(app)) as c:
                return (await c.list_tools()).tools, c.instructions
        try:
            tools, instructions = asyncio.run(listing())
        finally:
            app.close()
        chars = ds.listed_chars(tools, instructions)
        out[profile] = {"tools": len(tools), "chars": chars, "tokens": -(-chars // 4)}
    return out


def _standin() -> Any:
    """tests/dsh_standin.py (the offline dsh model endpoint and how dsh counts tools)."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    import dsh_standin

    return dsh_standin


def dsh_costs(tmp: Path) -> dict[str, dict[str, int]]:
    """Per arm (stock dsh, full, compact): what the first request body carries, measured in
    the real dsh runtime against the offline stand-in."""
    from dsh_recall.frontends.cli.integrate import dsh_patch

    ds = _standin()

    why = ds.runtime_available()
    if why:
        print(f"  --dsh skipped: {why}")
        return {}
    out = {}
    for arm in ("stock", "full", "compact"):
        patch = None if arm == "stock" else dsh_patch(
            command=ds.recall_exe(), tools=arm, env={"DSH_RECALL_HOME": str(tmp / f"dsh-{arm}"),
                                                     "DSH_RECALL_EMBEDDER__NAME": "fake"})
        with ds.dsh_session(tmp / f"dsh-{arm}", lambda b: ds.say("ok"), patch) as (sess, st, _):
            sess.run("hello")
        body = st.requests[0]
        tools = body.get("tools") or []
        out[arm] = {"tools": len(tools),
                    "ours": sum(t["name"].startswith("mcp__recall__") for t in tools),
                    "tool_chars": len(json.dumps(tools, ensure_ascii=False, separators=(",", ":"))),
                    "system_chars": len(ds.system_text(body))}
    return out


def print_schema_table(listed: dict[str, dict[str, int]], dsh: dict[str, dict[str, int]]) -> None:
    print("per-request cost of the tool list (1 token ~ 4 chars)")
    print(f"{'profile':10}{'tools':>6}{'listed chars':>14}{'listed tok':>12}"
          + (f"{'dsh +tools':>12}{'dsh +system':>13}{'dsh +tok':>10}" if dsh else ""))
    for profile, c in listed.items():
        line = f"{profile:10}{c['tools']:6d}{c['chars']:14d}{c['tokens']:12d}"
        if dsh and profile in dsh and "stock" in dsh:
            dt = dsh[profile]["tool_chars"] - dsh["stock"]["tool_chars"]
            dsys = dsh[profile]["system_chars"] - dsh["stock"]["system_chars"]
            line += f"{dt:12d}{dsys:13d}{-(-(dt + dsys) // 4):10d}"
        print(line)
    if dsh:
        print("dsh + = added to the first request body over stock dsh (the recall server's tools, "
              "its instructions section, and the 3 resource tools + section dsh adds for any "
              "MCP server)")


def p95(values: list[int]) -> int:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))] if s else 0


def print_table(rows: list[dict[str, Any]], budget: int) -> int:
    order = ["code_search", "code_index", "history_search", "history_detail",
             "object_recall", "notes_search", "status", "configure",
             "recall all", "recall code", "recall session+query", "recall session#seq",
             "recall notes", "recall id", "recall lines", "recall id+query", "recall failures"]
    head = (f"{'tool':20}{'calls':>6}{'pages>1':>8}{'errors':>7}{'cut':>5}{'max tok':>9}"
            f"{'p95 tok':>9}{'max wire':>9}{'p95 text':>9}{'budget':>8}{'over':>6}")
    print(head)
    over_total = 0
    for tool in order + sorted({r["tool"] for r in rows} - set(order)):
        rs = [r for r in rows if r["tool"] == tool]
        if not rs:
            continue
        toks = [r["tokens"] for r in rs]
        over = sum(t > budget for t in toks)
        over_total += over
        print(f"{tool:20}{len(rs):6d}{sum(r['page'] > 0 for r in rs):8d}"
              f"{sum(r['error'] for r in rs):7d}{sum(r['truncated'] for r in rs):5d}"
              f"{max(toks):9d}{p95(toks):9d}{max(r['wire'] for r in rs):9d}"
              f"{p95([r['text'] for r in rs]):9d}{budget:8d}{over:6d}")
    errs = [r for r in rows if r["error"]]
    for r in errs[:5]:
        print(f"  error in {r['tool']}: {r['msg']}")
    return over_total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=6000, help="mcp.token_budget (default 6000)")
    ap.add_argument("--pages", type=int, default=2, help="extra pages followed per list answer")
    ap.add_argument("--code-queries", type=int, default=30)
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--keep", action="store_true", help="keep the temporary recall home")
    ap.add_argument("--dsh", action="store_true",
                    help="also measure the tool list in a real dsh request (needs the runtime)")
    ap.add_argument("--schemas-only", action="store_true",
                    help="print the per-request cost of the tool profiles and stop")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="mcp-budget-"))
    home = tmp / "home"
    env = {"DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake",
           # 4 KB logs are objects too: every fail.log is offloaded.
           "DSH_RECALL_OBJECTS__THRESHOLD_CHARS": "1000",
           "DSH_RECALL_NOTES__ROOTS": json.dumps([str(EVAL / "qmd-docs" / "eval-docs")]),
           "DSH_RECALL_MCP__TOKEN_BUDGET": str(args.budget),
           "PATH": os.environ.get("PATH", "")}
    os.environ.update(env)
    (tmp / "ws").mkdir()
    print_schema_table(schema_costs(tmp / "ws"), dsh_costs(tmp) if args.dsh else {})
    if args.schemas_only:
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    print()
    t0 = time.perf_counter()
    from dsh_recall.core.config import load_config

    cfg = load_config()
    world: dict[str, Any] = {"tmp": tmp, "env": env, "budget": args.budget, "history_hits": []}
    world["trees"] = swebench_trees(args.code_queries)
    world["questions"] = import_history(tmp, cfg, args.questions)
    world["objects"] = offload_logs(cfg)
    world["notes_queries"] = notes_queries()
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        rows = asyncio.run(run_calls(world, args.pages))
        rows += asyncio.run(run_recall(world, args.pages))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    t_calls = time.perf_counter() - t0
    (flask, fq), (pyt, pq) = world["trees"]
    print(f"data: {flask.name} + {pyt.name} ({len(fq) + len(pq)} issue texts), locomo-dev "
          f"({len(world['questions'])} questions), {len(world['objects'])} ci logs, qmd-docs "
          f"({len(world['notes_queries'])} queries); embedder fake; build {t_build:.0f}s, "
          f"calls {t_calls:.0f}s")
    over = print_table(rows, args.budget)
    from dsh_recall.frontends.mcp.budget import ENVELOPE_TOKENS as ENVELOPE
    print(f"tok = the server's count (compact JSON + JSON-quoted text rendering + {ENVELOPE} "
          "envelope); wire = the whole result as received; text = its text content alone (what "
          "dsh shows the model); cut = answers with truncated text")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

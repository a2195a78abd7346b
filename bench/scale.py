"""Code recall at scale: indexes of about 10k, 100k and 300k chunks built from the real
SWE-bench dev trees (pytest, flask, requests) plus copies of them, side by side:

- index time: first (lexical, then vectors), unchanged, one file edited; CPU per chunk
- warm query p50 / p95 through the API (one process, as the MCP server runs), an MCP call
  and the CLI (a new process per call, as an agent's shell runs it), interleaved with
  `rg -i -l` over the same terms; how often the CLI's vector layer answered within the
  deadline; and the CLI again with `dsh-recall daemon` running (frontends/daemon.py). "Warm" means the query's per-term score lists exist (stores/sqlite/impacts.py); the
  API's first-sight column is each query with every list emptied before the run
- peak RSS of the API process, the MCP server, the daemon and a CLI call (each its own: see
  timed_child); disk per chunk (SQLite + vector file)
- pasted issues: the shipped path on first sight and with score lists, against the exact
  full FTS5 query (same top 10?)
- `--first-index DIR`: a first lexical index of a real tree in one process and with
  worker processes, in turn
- embedding chunks/s of the shipped MiniLM on real chunks, idle and with two CPU hogs
- `--hogs N`: the whole run with N CPU-bound processes beside it (a shared machine)

Query timing uses the deterministic fake embedder at MiniLM's 384 dimensions: it is fast,
so the figures show the index, not the model (a MiniLM query embedding adds a few ms, shown
apart). Copies live under /tmp; each size gets a fresh recall home.

    python bench/scale.py [--sizes 10000,100000,300000] [--queries 20] [--no-embed-bench]
                          [--reuse] [--first-index DIR] [--hogs N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from dsh_recall.core.config import load_config  # noqa: E402
from dsh_recall.rank.lexical import query_terms  # noqa: E402
from dsh_recall.services.code import CodeService  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval" / "swebench-dev"
TMP = Path(tempfile.gettempdir())
TAGS = ("pytest-e856638ba086fcf5bebf1bebea32d5cf78de87b4",
        "flask-4c288bc97ea371817199908d0d9b12de9dae327e",
        "requests-fe693c492242ae532211e0c173324f09ca8cf227")
DIM = 384
KEYWORD_QUERIES = ["fixture teardown order", "parse_args", "register_blueprint", "session cookie",
                   "assertion rewrite", "HTTPAdapter retries", "tmp_path factory",
                   "json provider dumps", "url_for external", "monkeypatch setenv"]


def tree(tag: str) -> Path:
    """One SWE-bench dev tree, extracted once (as bench/code_swebench.py does)."""
    dest = TMP / "swebench-trees" / tag
    if not dest.is_dir():
        bare = TMP / "swebench-trees.git"
        if not bare.exists():
            subprocess.run(["git", "clone", "-q", "--bare", str(EVAL / "trees.bundle"), str(bare)],
                           check=True)
        dest.mkdir(parents=True)
        data = subprocess.run(["git", "--git-dir", str(bare), "archive", tag], check=True,
                              capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=data, check=True)
    return dest


def build_workspace(copies: int) -> Path:
    """`copies` copies of the three trees under one workspace (made once, then reused)."""
    ws = TMP / "dsh-recall-scale" / f"ws-{copies}"
    done = ws / ".complete"
    if done.exists():
        return ws
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir(parents=True)
    for i in range(copies):
        for tag in TAGS:
            shutil.copytree(tree(tag), ws / f"copy{i:03d}" / tag.split("-")[0])
    done.write_text("ok")
    return ws


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def cpu() -> float:
    """CPU seconds of this process and its finished children (the indexer's worker processes
    are children; measured around the lexical index, where no other child ends)."""
    r, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def long_query_check(svc: CodeService) -> dict:
    """Every SWE-bench dev issue text as a query through the API, three ways: the exact
    full FTS5 query; the shipped path on first sight of its terms (cached single-term
    scores emptied: FTS5 from the rarest rows past 20k chunks, stores/sqlite/chunks.py
    LONG_RARE_ROWS, while the long-lived process computes the lists behind it); and the
    shipped path once the lists exist. How many top 10 answers agree with the exact one,
    each way's p50."""
    from dsh_recall.stores.sqlite import split

    issues = [json.loads(line)["query"] for line in open(EVAL / "queries.jsonl")]
    store, shipped = svc.store, split.LONG_RARE_ROWS
    same_first = same_warm = 0
    exact_ms, first_ms, warm_ms = [], [], []

    def run(q: str, out: list) -> list:
        t0 = time.perf_counter()
        res = svc.search(q, limit=10)["results"]
        out.append((time.perf_counter() - t0) * 1000)
        return [(r["path"], r["start_line"]) for r in res]

    try:
        for q in issues:
            store.use_impacts, split.LONG_RARE_ROWS = False, 10**12
            exact = run(q, exact_ms)
            store.use_impacts, split.LONG_RARE_ROWS = True, shipped
            store.impacts.clear()
            same_first += run(q, first_ms) == exact
            store.impacts.wait_idle(300)
            same_warm += run(q, warm_ms) == exact
    finally:
        store.use_impacts, split.LONG_RARE_ROWS = True, shipped
    return {"paste_same_first": f"{same_first}/{len(issues)}",
            "paste_same": f"{same_warm}/{len(issues)}", "paste_exact_p50": pct(exact_ms, 50),
            "paste_first_p50": pct(first_ms, 50), "paste_p50": pct(warm_ms, 50)}


# A child's ru_maxrss counts its parent's peak: exec folds the address space it replaces into
# the new program's high-water mark, and a child spawned by vfork (as subprocess does) execs
# from its parent's. A CLI started from this bench, which holds a 1M-chunk index, reported the
# bench's RSS, not its own. So each timed child is started by a small launcher, which reports
# that child's own wall time, CPU and peak RSS (plus the launcher's own 10 MB or so).
_LAUNCH = """
import os, sys, time
t0 = time.perf_counter()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ,
                      file_actions=[(os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
_, status, ru = os.wait4(pid, 0)
print(time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def timed_child(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of one child process, by the launcher above."""
    proc = subprocess.run([sys.executable, "-S", "-c", _LAUNCH, *cmd], env=env, cwd=cwd, capture_output=True)
    wall, cpu, maxrss = proc.stderr.decode().split()[-3:]
    return float(wall), float(cpu), int(maxrss) / 1024, proc.stdout.decode("utf-8", "replace")


def children(cmdline_part: str) -> list[int]:
    """Pids of this process's children whose command line holds `cmdline_part` (NUL between
    arguments, as /proc writes it)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) != os.getpid():
                continue
            if cmdline_part in (d / "cmdline").read_bytes().decode("utf-8", "replace"):
                out.append(int(d.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def proc_rss_mb(pid: int, key: str = "VmHWM") -> float:
    """A running process's peak RSS (VmHWM), or its RSS now (key VmRSS), MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


class McpClient:
    """`dsh-recall mcp` over stdio with the official MCP client, held open in a thread of its
    own so the synchronous bench loop can time one `code_search` call at a time."""

    def __init__(self, env: dict[str, str], ws: Path):
        import asyncio
        import threading

        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._ready = asyncio.run_coroutine_threadsafe(self._open(env, ws), self._loop)
        self._ready.result(timeout=120)

    async def _open(self, env: dict[str, str], ws: Path) -> None:
        import contextlib

        from mcp import ClientSession, StdioServerParameters, stdio_client

        self._stack = contextlib.AsyncExitStack()
        params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_recall", "mcp"],
                                       env=env, cwd=str(ws))
        read, write = await self._stack.enter_async_context(
            stdio_client(params, errlog=open(os.devnull, "w")))
        self.session = await self._stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()

    def search(self, query: str) -> dict:
        import asyncio

        res = asyncio.run_coroutine_threadsafe(
            self.session.call_tool("code_search", {"query": query}), self._loop).result(timeout=120)
        return res.structured_content or {}

    def close(self) -> None:
        import asyncio

        try:
            asyncio.run_coroutine_threadsafe(self._stack.aclose(), self._loop).result(timeout=30)
        except Exception:  # noqa: BLE001 - the server may already be gone
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)


RANDOM_VECTORS = False  # --random-vectors


def fill_random_vectors(svc: CodeService) -> None:
    """Random unit vectors for every chunk still without one, written as the indexer writes
    vectors (batches by text hash, the vector file synced as it goes) under the fake
    embedder's fingerprint, so queries embedded by it are scored against them: the vector
    layer's cost at this size, without the fake embedder's Python loop over a million
    texts (about 300 texts/s of real code here)."""
    import numpy as np

    from dsh_recall.services.vectors import SYNC_EVERY, sync_fingerprint, sync_vector_file

    emb = svc.embedder()
    assert emb is not None
    store = svc.store
    sync_fingerprint(store, emb)
    rng = np.random.default_rng(1)
    since = 0
    with svc._index_lock(None):
        while batch := store.pending(4096):
            v = rng.normal(size=(len(batch), DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            store.put_vectors([(h, x) for (h, _), x in zip(batch, v)])
            since += len(batch)
            if since >= 8 * SYNC_EVERY:
                sync_vector_file(store)
                since = 0
        sync_vector_file(store)


def queries(n: int) -> list[str]:
    """Half keyword queries, half SWE-bench issue texts (long pasted text)."""
    issues = [json.loads(line)["query"] for line in open(EVAL / "queries.jsonl")]
    out: list[str] = []
    for i in range(n):
        out.append(KEYWORD_QUERIES[i % len(KEYWORD_QUERIES)] if i % 2 == 0 else issues[i % len(issues)])
    return out


def run_size(target: int, base_chunks: int, n_queries: int, reuse: bool = False) -> dict:
    copies = max(1, round(target / base_chunks))
    ws = build_workspace(copies)
    home = TMP / "dsh-recall-scale" / f"home-{copies}"
    reuse = reuse and home.exists()
    if not reuse:
        shutil.rmtree(home, ignore_errors=True)
    env = dict(os.environ, DSH_RECALL_HOME=str(home), DSH_RECALL_EMBEDDER__NAME="fake",
               DSH_RECALL_EMBEDDER__DIM=str(DIM))
    os.environ.update({k: env[k] for k in ("DSH_RECALL_HOME", "DSH_RECALL_EMBEDDER__NAME",
                                           "DSH_RECALL_EMBEDDER__DIM")})
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "fake", "dim": DIM}})
    svc = CodeService(ws, cfg, home)
    row: dict = {"copies": copies}

    c0, t0 = cpu(), time.perf_counter()
    with svc._index_lock(None):
        rep = svc.index_lexical()
    row["lex_s"], row["lex_cpu_ms_chunk"] = time.perf_counter() - t0, (cpu() - c0) * 1000 / rep.chunks
    row["chunks"] = rep.chunks
    t0 = time.perf_counter()
    if RANDOM_VECTORS:
        fill_random_vectors(svc)
    svc.index()
    row["embed_s"] = time.perf_counter() - t0
    if reuse:  # an index from an earlier run: its build times are not this run's
        row.update(lex_s=None, lex_cpu_ms_chunk=None, embed_s=None)
    t0 = time.perf_counter()
    svc.index()
    row["unchanged_s"] = time.perf_counter() - t0
    victim = ws / "copy000" / "flask" / "src" / "flask" / "helpers.py"
    original = victim.read_bytes()
    try:
        victim.write_bytes(original + b"\n# scale bench edit\n")
        t0 = time.perf_counter()
        svc.index()
        row["edit_s"] = time.perf_counter() - t0
    finally:
        victim.write_bytes(original)
        svc.index()

    qs = queries(n_queries)
    svc.keep_warm()  # the API process lives on, as the MCP server does
    svc.store.impacts.clear()
    first = []
    for q in qs:  # first sight of every query's terms: FTS5 answers, the lists follow
        t0 = time.perf_counter()
        svc.search(q)
        first.append((time.perf_counter() - t0) * 1000)
        svc.store.impacts.wait_idle(300)
    row.update(api_first_p50=pct(first, 50), api_first_p95=pct(first, 95))
    api, cli, cli_cpu, rg, mcp_ms, vec_ok, warm_cli = [], [], [], [], [], 0, []
    cli_rss = 0.0
    cmd = [sys.executable, "-m", "dsh_recall", "search", "--json", "--workspace", str(ws)]
    alone_env = dict(env, DSH_RECALL_DAEMON="0")  # the cold CLI column never uses the daemon
    mcp = McpClient(env, ws)
    daemon = subprocess.Popen([sys.executable, "-m", "dsh_recall", "daemon"], env=env,
                              stderr=subprocess.PIPE, text=True)
    assert "listening on" in daemon.stderr.readline()
    for q in qs[:3]:
        timed_child(cmd + ["--", q], env, ws)  # warm the daemon as the server was warmed
    for q in qs[:3]:
        mcp.search(q)  # warm the server as the API process was warmed
    for q in qs:  # interleaved, so a noisy neighbour hits every column alike
        t0 = time.perf_counter()
        svc.search(q)
        api.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        mcp.search(q)
        mcp_ms.append((time.perf_counter() - t0) * 1000)
        wall, c, r, out = timed_child(cmd + ["--", q], alone_env, ws)
        cli.append(wall * 1000)
        cli_cpu.append(c * 1000)
        if r > cli_rss:
            cli_rss, row["cli_rss_query"] = r, len(cli)  # which call peaked (1-based)
        try:
            vec_ok += "vector" in json.loads(out)["layers"]
        except (ValueError, KeyError):
            pass
        warm_cli.append(timed_child(cmd + ["--", q], env, ws)[0] * 1000)
        terms = query_terms(q)[:48]
        if shutil.which("rg") and terms:
            rg_cmd = ["rg", "-i", "-l", "-F"] + [a for t in terms for a in ("-e", t)] + [str(ws)]
            wall, _, _, _ = timed_child(rg_cmd, env, ws)
            rg.append(wall * 1000)
    row.update(daemon_rss=proc_rss_mb(daemon.pid), mcp_rss=max(
        (proc_rss_mb(pid) for pid in children("dsh_recall\0mcp")), default=0.0))
    mcp.close()
    daemon.send_signal(signal.SIGTERM)  # a background job may ignore SIGINT
    daemon.communicate(timeout=60)
    row.update(daemon_p50=pct(warm_cli, 50), daemon_p95=pct(warm_cli, 95))
    # the API's peak before the pasted-issue check, whose exact FTS5 baseline is no search
    # path of the product (at 1M it added about 120 MB to the peak)
    row["api_peak"] = proc_rss_mb(os.getpid())
    row.update(long_query_check(svc))
    row.update(mcp_p50=pct(mcp_ms, 50), mcp_p95=pct(mcp_ms, 95))
    row.update(api_p50=pct(api, 50), api_p95=pct(api, 95), cli_p50=pct(cli, 50),
               cli_p95=pct(cli, 95), cli_cpu_p50=pct(cli_cpu, 50), cli_rss=cli_rss,
               rg_p50=pct(rg, 50) if rg else None, rg_p95=pct(rg, 95) if rg else None,
               vec_ok=f"{vec_ok}/{len(qs)}", api_rss=proc_rss_mb(os.getpid(), "VmRSS"),
               api_peak_all=proc_rss_mb(os.getpid()),
               disk_b_chunk=svc.store.size_bytes() / max(1, rep.chunks))
    svc.close()
    return row


def first_index(tree: Path, rounds: int = 2) -> list[tuple[str, int, float, float]]:
    """A first lexical index of `tree` in one process and with two worker processes (fixed:
    the shipped default picks by idle cores, which a bench's own load would sway), in turn:
    (label, chunks, wall s, CPU ms per chunk incl. workers), the best of `rounds`."""
    best: dict[str, tuple[int, float, float]] = {}
    for _ in range(rounds):
        for label, workers in (("one process", 1), ("2 worker processes", 2)):
            home = TMP / "dsh-recall-scale" / "first-index-home"
            shutil.rmtree(home, ignore_errors=True)
            cfg = load_config(workspace=tree, overrides={"embedder": {"name": "fake"},
                                                         "index_workers": workers})
            svc = CodeService(tree, cfg, home)
            c0, t0 = cpu(), time.perf_counter()
            with svc._index_lock(None):
                rep = svc.index_lexical()
            wall, per = time.perf_counter() - t0, (cpu() - c0) * 1000 / max(1, rep.chunks)
            svc.close()
            if label not in best or wall < best[label][1]:
                best[label] = (rep.chunks, wall, per)
    return [(label, *v) for label, v in best.items()]


def embed_rates(n_chunks: int) -> list[tuple[str, float]]:
    """MiniLM on real indexer chunks, idle then with two CPU hogs (bench/embedders.py)."""
    from embedders import default_tree, hogs, indexer_chunks
    from embedders import run as run_embed

    from dsh_recall.core.config import EmbedderConfig

    chunks = indexer_chunks(default_tree(), n_chunks)
    out = []
    for when, n in (("idle", 0), ("2 CPU hogs", 2)):
        procs = hogs(n)
        try:
            (row, _), = run_embed([("minilm", EmbedderConfig(name="minilm"))], chunks, 1, 32)
            out.append((when, row[3]))
        finally:
            for p in procs:
                p.kill()
                p.wait()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="code recall at 10k / 100k / 300k chunks")
    ap.add_argument("--sizes", default="10000,100000,300000")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--embed-chunks", type=int, default=150)
    ap.add_argument("--no-embed-bench", action="store_true")
    ap.add_argument("--first-index", default="", metavar="DIR",
                    help="also time a first lexical index of DIR (e.g. sympy's source: "
                         "pip download sympy==1.13.3 --no-deps, unzip the wheel)")
    ap.add_argument("--reuse", action="store_true",
                    help="query an index an earlier run left (no index timings then)")
    ap.add_argument("--random-vectors", action="store_true",
                    help="give chunks random unit vectors instead of the fake embedder's "
                         "(a 1M-chunk index: the fake embeds about 300 real chunks/s)")
    ap.add_argument("--hogs", type=int, default=0,
                    help="CPU-bound processes running through the whole run (a shared machine)")
    args = ap.parse_args()
    global RANDOM_VECTORS
    RANDOM_VECTORS = args.random_vectors
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        run_all(args)
    finally:
        for p in busy:
            p.kill()
            p.wait()


def run_all(args: argparse.Namespace) -> None:

    probe_home = TMP / "dsh-recall-scale" / "probe-home"
    shutil.rmtree(probe_home, ignore_errors=True)
    base = build_workspace(1)
    svc = CodeService(base, load_config(workspace=base, overrides={"embedder": {"name": "fake"}}),
                      probe_home)
    base_chunks = svc.index(embed=False).chunks
    svc.close()
    print(f"base: pytest + flask + requests = {base_chunks} chunks; "
          f"{os.cpu_count()} cores, {args.hogs} CPU hogs running, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)

    rows = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        row = run_size(size, base_chunks, args.queries, args.reuse)
        rows.append(row)
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}),
              flush=True)

    def f(v, nd=0):
        return "-" if v is None else f"{v:,.{nd}f}"

    print()
    print(f"| chunks | first index: lexical / + vectors ({'random' if RANDOM_VECTORS else 'fake'}) | lexical CPU per chunk | unchanged "
          "| one file edited | API p50 / p95 (first sight) | MCP call p50 / p95 "
          "| CLI p50 / p95 (CPU p50) | CLI with `dsh-recall daemon` p50 / p95 | vector layer in CLI "
          "| `rg -i -l` p50 / p95 | RSS API now (peak) / peak MCP / daemon / CLI | disk per chunk |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['chunks']:,} | {f(r['lex_s'], 1)} s / {f(r['embed_s'], 1)} s "
              f"| {f(r['lex_cpu_ms_chunk'], 2)} ms | {f(r['unchanged_s'], 2)} s | {f(r['edit_s'], 2)} s "
              f"| {f(r['api_p50'])} / {f(r['api_p95'])} ms "
              f"({f(r['api_first_p50'])} / {f(r['api_first_p95'])} ms) "
              f"| {f(r['mcp_p50'])} / {f(r['mcp_p95'])} ms "
              f"| {f(r['cli_p50'])} / {f(r['cli_p95'])} ms ({f(r['cli_cpu_p50'])} ms) "
              f"| {f(r['daemon_p50'])} / {f(r['daemon_p95'])} ms | {r['vec_ok']} | {f(r['rg_p50'])} / {f(r['rg_p95'])} ms "
              f"| {f(r['api_rss'])} ({f(r.get('api_peak'))}) / {f(r.get('mcp_rss'))} / {f(r.get('daemon_rss'))} / "
              f"{f(r['cli_rss'])} MB | {f(r['disk_b_chunk'])} B |")
    print()
    print("Pasted issues (51 SWE-bench dev texts, API, limit 10): the shipped path on first "
          "sight of the terms and with their score lists cached, against the exact full FTS5 query")
    print("| chunks | same top 10: first sight / cached | p50 first sight | p50 cached "
          "| p50 exact FTS5 |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['chunks']:,} | {r['paste_same_first']} / {r['paste_same']} "
              f"| {f(r['paste_first_p50'])} ms | {f(r['paste_p50'])} ms "
              f"| {f(r['paste_exact_p50'])} ms |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.first_index:
        print()
        print(f"First lexical index of {args.first_index}, load average {os.getloadavg()[0]:.1f}:")
        print("| | chunks | wall | CPU per chunk |")
        print("|---|---|---|---|")
        for label, chunks, wall, per in first_index(Path(args.first_index)):
            print(f"| {label} | {chunks:,} | {wall:.1f} s | {per:.2f} ms |")
    if not args.no_embed_bench:
        for when, rate in embed_rates(args.embed_chunks):
            print(f"MiniLM int8 on real chunks ({when}): {rate:.1f} chunks/s")


if __name__ == "__main__":
    main()

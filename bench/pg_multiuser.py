"""Many users on one PostgreSQL store: real MCP servers (`dsh-recall mcp --channel KEY`
over stdio) and CLIs of different users (each its own recall home) on one database at once.

Each client is one user with one access channel: two group channels (two users share
`group:alpha`), another group and the owner. Its MCP server answers `history_search` over the
shared history namespace and `code_search` over the shared code namespace; every tenth
operation is a write, a CLI `history import --channel KEY` of a new session. A search
result holding a session its channel may not see is a leak; a failed call is an error.
Printed: per operation kind, p50 / p95 of N clients at once against one client alone (the
baseline, same run), errors and leaks.

    python bench/pg_multiuser.py [--clients 8] [--ops 500] [--store pg|URL]

tests/test_pg_multiuser.py runs the same harness at a reduced size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

CHANNELS = ("group:alpha", "group:beta", "group:alpha", "owner-key")
WRITE_EVERY = 10
MARK = "quince"


@dataclass
class World:
    """One database, the users' homes, a shared repository and the seeded sessions."""

    url: str
    root: Path
    repo: Path
    homes: list[Path]
    channels: list[str]
    tag: str  # words unique to this run: the database may hold other runs' sessions


@dataclass
class Result:
    times: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # sessions this client's searches returned


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_RECALL_")}
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_DAEMON="0",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]))
    return env


def _session_file(path: Path, session: str, text: str) -> Path:
    rows = [{"session": session, "seq": 0, "role": "user", "text": text, "id": session + "-0"},
            {"session": session, "seq": 1, "role": "assistant", "text": f"noted: {text}",
             "id": session + "-1"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _import(world: World, i: int, session: str, text: str) -> None:
    f = _session_file(world.homes[i] / f"{session}.jsonl", session, text)
    proc = subprocess.run([sys.executable, "-m", "dsh_recall", "history", "import", str(f),
                           "--format", "generic", "--channel", world.channels[i], "--json"],
                          env=_env(world.homes[i]), cwd=world.repo, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"history import failed: {proc.stderr.strip()[-300:]}")


def make_world(url: str, root: Path, clients: int) -> World:
    """Homes with the user's config (the shared store, the fake embedder, one session map
    naming the owner), a repository indexed once, and one session per channel."""
    tag = "t" + uuid.uuid4().hex[:8]
    smap = root / "session-map.json"
    smap.write_text(json.dumps({"owner-key": "owner-id"}))
    repo = root / "repo"
    for n in range(12):
        p = repo / "pkg" / f"mod_{n}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"def handle_request_{n}(req):\n    \"\"\"Route {tag} request {n}.\"\"\"\n"
                     f"    return req.{tag}_{n}\n")
    homes, channels = [], []
    for i in range(clients):
        home = root / f"user{i}"
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(
            f'store = "{url}"\n[embedder]\nname = "fake"\n'
            f'[notes]\nsession_map = "{smap}"\nowner_ids = ["owner-id"]\n')
        homes.append(home)
        channels.append(CHANNELS[i % len(CHANNELS)])
    world = World(url, root, repo, homes, channels, tag)
    subprocess.run([sys.executable, "-m", "dsh_recall", "index", "--wait", "--json"],
                   env=_env(homes[0]), cwd=repo, check=True, capture_output=True, timeout=600)
    for i, key in enumerate(channels):
        if key not in channels[:i]:
            _import(world, i, f"{tag}-{key.replace(':', '-')}-seed", f"{MARK} {tag} seed of {key}")
    return world


def may_see(viewer: str, producer: str | None) -> bool:
    """docs/security.md: the owner sees every session; a group key only its own (a session
    recorded without a channel is the owner's)."""
    return viewer == "owner-key" or (producer is not None and viewer == producer)


def producer_of(session: str, tag: str) -> str | None:
    """The channel a session of this run was written by (its id says), else None."""
    if not session.startswith(tag + "-"):
        return None
    body = session[len(tag) + 1:]
    for key in set(CHANNELS):
        if body.startswith(key.replace(":", "-") + "-"):
            return key
    return None


async def _client(world: World, i: int, ops: int, res: Result) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    key = world.channels[i]
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_recall", "mcp", "--channel", key],
                                   env=_env(world.homes[i]), cwd=str(world.repo))
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for n in range(ops):
                kind = "write" if n % WRITE_EVERY == WRITE_EVERY - 1 else ("history" if n % 2 else "code")
                t0 = time.perf_counter()
                try:
                    if kind == "write":
                        sid = f"{world.tag}-{key.replace(':', '-')}-u{i}-w{n}"
                        await asyncio.to_thread(_import, world, i, sid, f"{MARK} {world.tag} write {n}")
                    elif kind == "history":
                        out = await session.call_tool("history_search", {
                            "query": f"{MARK} {world.tag}", "scope": "all", "detail": True, "limit": 50})
                        if out.is_error:
                            raise RuntimeError(str(out.content)[:300])
                        for hit in (out.structured_content or {}).get("hits", []):
                            s = hit.get("session", "")
                            res.seen.add(s)
                            prod = producer_of(s, world.tag)  # this run's: its id says
                            if prod is not None and not may_see(key, prod):
                                res.leaks.append(f"{key} saw {s}")
                    else:
                        out = await session.call_tool("code_search", {"query": f"handle request {world.tag}"})
                        if out.is_error or not (out.structured_content or {}).get("results"):
                            raise RuntimeError(f"code_search: {str(out.content)[:300]}")
                except Exception as e:  # noqa: BLE001 - every failure is counted, the run goes on
                    res.errors.append(f"{key} op {n} ({kind}): {e}")
                res.times.setdefault(kind, []).append((time.perf_counter() - t0) * 1000)


def run(world: World, clients: int, ops: int) -> list[Result]:
    """`clients` users at once (the first `clients` homes), `ops` operations each."""
    results = [Result() for _ in range(clients)]

    def one(i: int) -> None:
        try:
            asyncio.run(_client(world, i, ops, results[i]))
        except Exception as e:  # noqa: BLE001 - a server that would not start is an error too
            results[i].errors.append(f"client {i}: {e!r}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check_recorded(world, results)
    return results


def check_recorded(world: World, results: list[Result]) -> None:
    """Every session a client saw, checked against the channel the store recorded for it
    (the database may hold other runs' sessions, which the owner may see too)."""
    from dsh_recall.stores.postgres.history import PgHistoryStore

    seen = sorted({s for r in results for s in r.seen})
    if not seen:
        return
    store = PgHistoryStore(world.url, "history")
    try:
        recorded = {row["id"]: row.get("channel") for row in store.sessions(seen)}
    finally:
        store.close()
    for i, r in enumerate(results):
        key = world.channels[i]
        r.leaks.extend(f"{key} saw {s} (recorded for {recorded.get(s)})" for s in sorted(r.seen)
                       if not may_see(key, recorded.get(s)) and f"{key} saw {s}" not in r.leaks)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else float("nan")


def summary(results: list[Result]) -> dict[str, tuple[int, float, float]]:
    merged: dict[str, list[float]] = {}
    for r in results:
        for k, xs in r.times.items():
            merged.setdefault(k, []).extend(xs)
    return {k: (len(xs), statistics.median(xs), pct(xs, 0.95)) for k, xs in sorted(merged.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--ops", type=int, default=500)
    ap.add_argument("--store", default="pg", help="pg (throwaway cluster) or a postgresql:// URL")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    import pg_store

    url = pg_store.resolve(args.store)
    root = Path(tempfile.mkdtemp(prefix="pg-multiuser-"))
    world = make_world(url, root, args.clients)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    rows = []
    for label, n in (("1 client (baseline)", 1), (f"{args.clients} clients at once", args.clients)):
        t0 = time.perf_counter()
        results = run(world, n, args.ops)
        wall = time.perf_counter() - t0
        errors = [e for r in results for e in r.errors]
        leaks = [x for r in results for x in r.leaks]
        rows.append((label, wall, summary(results), errors, leaks))
        for e in (errors + leaks)[:5]:
            print("  " + e, file=sys.stderr)
    print("| run | wall s | code_search p50 / p95 ms | history_search p50 / p95 ms "
          "| write (CLI import) p50 / p95 ms | ops | errors | leaks |")
    print("|---|---|---|---|---|---|---|---|")
    for label, wall, s, errors, leaks in rows:
        def cell(k: str) -> str:
            return f"{s[k][1]:.0f} / {s[k][2]:.0f}" if k in s else "-"
        total = sum(v[0] for v in s.values())
        print(f"| {label} | {wall:.0f} | {cell('code')} | {cell('history')} | {cell('write')} "
              f"| {total} | {len(errors)} | {len(leaks)} |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

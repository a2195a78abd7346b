"""One ledger in the real dsh runtime: every model request counted, against plain dsh.

The same scripted session runs twice in the real runtime (sdk profile) against a loopback
stand-in model: plain dsh, and dsh with `integrate dsh patch` (the native plugin and its
worker). The stand-in records every request body, so the wire difference of the messages
(what the plugin changes; the recall server's tool schemas are apart) is measured from
outside, request by request, and compared with what the ledger counted. Then every surface
is read for the same session: the worker's status file (MCP `status`), MCP `status` through
a real MCP client, `report --json`, `object stats --json`, and the browser half's stats route
(plugin.mjs under Node with the real worker: what the chip, the strip and the Recall tab read).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from dsh_standin import (  # noqa: E402
    blocks,
    dsh_session,
    last_user_text,
    recall_exe,
    runtime_available,
    say,
    use,
    with_usage,
)

pytestmark = pytest.mark.slow

BUILD = ("python3 -c \"import sys\nfor i in range(3000): "
         "print(f'step {i:04d}: compiled module_{i}.c in 0.{i % 97:02d}s, 0 warnings')\"")
SCRIPT = {  # user turn -> the tool calls of that turn, in order; then a final answer
    "build it please": [("bash", {"command": BUILD, "description": "build"}),
                        ("bash", {"command": "echo small one", "description": "echo"}),
                        ("read", {"file_path": "big.py"}),
                        ("bash", {"command": "echo small two", "description": "echo"})],
    "anything else?": [("bash", {"command": "echo small three", "description": "echo"})],
}


def _brain(body: dict[str, Any]) -> dict[str, Any]:
    turn = last_user_text(body)
    calls = SCRIPT.get(turn, [])
    ids = {b["id"] for b in blocks(body, "tool_use")}
    done = sum(1 for i in range(len(calls)) if f"toolu_{turn[:5]}_{i}" in ids)
    if done < len(calls):
        name, args = calls[done]
        reply = use(name, args, f"toolu_{turn[:5]}_{done}")
    else:
        reply = say(f"Done with: {turn}")
    return with_usage(reply, _chars(body) // 4)


def _big_py() -> str:
    return "\n".join(textwrap.dedent(f'''
        def handler_{i}(request, config):
            """Handle route {i}: validate, look up, render."""
            value = config.get("key_{i}", {i})
            return render(request, value * {i} + len(request.path))
        ''') for i in range(500))


def _run(tmp: Path, patch: str | None) -> tuple[list[dict[str, Any]], Path]:
    (tmp / "repo").mkdir(parents=True)
    (tmp / "repo" / "big.py").write_text(_big_py())
    with dsh_session(tmp, _brain, patch) as (session, standin, dsh_home):
        for message in SCRIPT:
            session.run(message)
        return list(standin.requests), dsh_home


def _chars(body: dict[str, Any]) -> int:
    return len(json.dumps(body.get("messages"), ensure_ascii=False, separators=(",", ":")))


def _route(home: Path) -> dict[str, Any]:
    """The stats route of plugin.mjs under Node, its worker the real one over `home`."""
    from dsh_recall.frontends.dsh import PLUGIN_PATH

    script = """
const [plugin, config] = process.argv.slice(1)
const { apply } = await import(plugin)
setInterval(() => {}, 1000) // the worker's pipes and timers are unref'd: keep Node up
let route = null
const ctx = { on () {}, logger: { warn () {} }, get: () => undefined, effect () {},
  inject (names, fn) { fn({ connection: { fetch: { register: (r) => { if (r.path === '/api/dsh-recall/stats') route = r } } } }) } }
apply(ctx, JSON.parse(config))
for (let i = 0; i < 600; i++) {
  const body = await (await route.fetch({ url: 'http://x/api/dsh-recall/stats' })).json()
  if (body.at > 0) { console.log(JSON.stringify(body)); process.exit(0) }
  await new Promise((resolve) => setTimeout(resolve, 100))
}
process.exit(3)
"""
    config = {"command": recall_exe(), "args": ["worker"], "startTimeoutMs": 60000, "callTimeoutMs": 60000,
              "env": {"DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake"}}
    out = subprocess.run([shutil.which("node") or "node", "--input-type=module", "-e", script,
                          PLUGIN_PATH.as_uri(), json.dumps(config)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mcp_status(home: Path) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def run() -> dict[str, Any]:
        params = StdioServerParameters(command=recall_exe(), args=["mcp", "--tools", "full"], env={
            "DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake",
            "PATH": os.environ.get("PATH", "")})
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("status", {})
            assert res.structured_content is not None
            return dict(res.structured_content["sources"])
    return anyio.run(run)


def test_the_ledger_counts_every_request_and_every_surface_shows_it(tmp_path, monkeypatch):
    why = runtime_available()
    if why:
        pytest.skip(why)
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH (the stats route runs under Node: apt-get install nodejs)")
    from dsh_recall.frontends.cli.integrate import dsh_patch

    home = tmp_path / "recall-home"
    env = {"DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake"}
    plain, _ = _run(tmp_path / "a", None)
    full, _ = _run(tmp_path / "b", dsh_patch(command=recall_exe(), env=env, native=True))
    assert len(plain) == len(full) == 7
    # The plugin changed what the model read: the build log offloaded, big.py shortened.
    assert _chars(full[-1]) < _chars(plain[-1]) - 50_000

    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    from dsh_recall.frontends.dsh.worker import last_status
    from dsh_recall.services.report import summary
    from dsh_recall.services.report.ledger import figures_from_log, tokens

    status = last_status()
    assert status is not None
    (sid, fig), = status["ledger"]["sessions"].items()
    # Every request counted (the old count: once per user turn, 2 here), each with what it
    # carried: within 1% of the wire difference measured on the stand-in's side.
    assert fig["requests"] == 7 and (fig["offloads"], fig["reads_shortened"]) == (1, 1)
    wire = sum(tokens(_chars(p) - _chars(f)) for p, f in zip(plain, full, strict=True))
    assert abs(fig["tokens_kept_out"] - wire) <= 0.01 * wire, (fig, wire)
    # The provider's usage (the stand-in reports messages JSON / 4) is the sent side.
    assert fig["tokens_sent"] == sum(_chars(f) // 4 for f in full)

    # One figure everywhere, for the same session.
    assert figures_from_log(home)["sessions"][sid] == fig
    report = summary.build(home, days=None, tokens="chars/4", baseline=False)
    assert report["per_request"] == status["ledger"]["totals"]
    cli = subprocess.run([recall_exe(), "object", "stats", "--json"], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)
    objects = json.loads(cli.stdout)
    assert (objects["tokens_kept_out"], objects["requests_counted"]) == (fig["tokens_kept_out"], 7)
    mcp = _mcp_status(home)
    assert mcp["objects"]["tokens_kept_out"] == fig["tokens_kept_out"]
    assert mcp["dsh_plugin"]["ledger"]["sessions"][sid] == fig
    route = _route(home)
    assert route["sessions"][sid] == fig  # the chip and the Recall tab
    assert route["objects"]["tokens_kept_out"] == fig["tokens_kept_out"]  # the strip
    assert route["totals"] == status["ledger"]["totals"]


def test_right_after_an_offload_chip_and_strip_figures_come_from_one_answer(tmp_path):
    # D12: the chip counted the offload in the plugin while the strip waited for the next
    # background refresh ("Recall 1" beside "0 offloads"). Both now come from one worker
    # answer, fetched before the poll is answered: the first poll after the offload has it.
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH (apt-get install nodejs)")
    from dsh_recall.frontends.dsh import PLUGIN_PATH

    script = """
const [plugin, config] = process.argv.slice(1)
const { apply } = await import(plugin)
setInterval(() => {}, 1000)
const on = new Map()
let route = null
const ctx = { on (n, fn) { on.set(n, fn) }, logger: { warn () {} }, get: () => undefined, effect () {},
  inject (names, fn) { fn({ connection: { fetch: { register: (r) => { if (r.path === '/api/dsh-recall/stats') route = r } } } }) } }
apply(ctx, JSON.parse(config))
const result = { type: 'tool/result', data: { message: { role: 'tool', toolCallId: 'call-1', content: [] } } }
const session = { id: 'sess-d12', header: { cwd: process.cwd() }, surface: { nodes: [7] }, eventAt: (seq) => seq === 7 ? result : null }
const read = async () => (await route.fetch({ url: 'http://x/api/dsh-recall/stats' })).json()
for (let i = 0; i < 600 && !((await read()).at > 0); i++) await new Promise((r) => setTimeout(r, 100))
const text = Array.from({ length: 4000 }, (_, i) => `line ${i} build step ${i % 13} ok`).join('\\n')
const decision = await on.get('tools/post-execute')({ name: 'bash', callId: 'call-1', agent: { session } },
  { content: [{ type: 'text', text }] }, async () => ({ kind: 'accept' }))
const afterOffload = await read()
on.get('session/event')(session, { type: 'assistant/message', data: { usage: { inputTokens: 900 } } })
await new Promise((r) => setTimeout(r, 300))
console.log(JSON.stringify({ shortened: decision.content[0].text.length < text.length, afterOffload, afterRequest: await read() }))
process.exit(0)
"""
    home = tmp_path / "recall-home"
    config = {"command": recall_exe(), "args": ["worker"], "startTimeoutMs": 60000, "callTimeoutMs": 60000,
              "env": {"DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake"}}
    out = subprocess.run([shutil.which("node") or "node", "--input-type=module", "-e", script,
                          PLUGIN_PATH.as_uri(), json.dumps(config)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["shortened"]
    first = r["afterOffload"]  # the first poll after the offload: chip and strip agree
    assert first["sessions"]["sess-d12"]["offloads"] == 1 and first["objects"]["offloaded"] == 1
    later = r["afterRequest"]  # one model request carried it: the ledger counted it once
    s = later["sessions"]["sess-d12"]
    assert s["requests"] == 1 and s["tokens_kept_out"] > 5000 and s["tokens_sent"] == 900
    assert later["objects"]["tokens_kept_out"] == s["tokens_kept_out"] == later["totals"]["tokens_kept_out"]


def test_plain_dshs_compaction_is_replayed_prune_first_then_a_summarization_request(tmp_path, monkeypatch):
    # Where plain dsh would cross compaction-basic's threshold, it first prunes every tool
    # result over 8,192 code points to head + marker + tail (its requests still carry that,
    # more than the plugin's pointer), and only when that is not enough sends one
    # summarization request replaying its whole transcript, after which the entries are
    # gone from its requests. The old rule dropped every entry at the first crossing.
    from dsh_recall.services.report import ledger as L

    monkeypatch.setattr(L, "COMPACT_RESERVE", 8192 + 4096)
    window = 32768
    assert L.compact_threshold(window) == 20480  # min(0.8 x 32,768, 32,768 - 12,288)
    assert L.compact_threshold(window, reserve=65536 + 8192) == 0  # no budget: dsh never compacts
    log = "\n".join(f"[{i:05d}] INFO step {i} ok, checksum {i * 7919 % 10007}" for i in range(2000))
    assert len(log) > 50_000
    pruned = L.dsh_pruned_chars(log)
    assert L.json_chars(log[:4096]) < pruned < 6_000 < L.dsh_sent_chars(log)
    book = L.Ledger(tmp_path, clock=lambda: 1000.0)
    sid = "sess-compact"
    book.change(sid, "call-a", "offload", L.dsh_sent_chars(log), 1_000, pruned)
    # Under the threshold: the whole of plain's side counts.
    assert book.request(sid, ["call-a"], 2_000, window=window) == L.tokens(L.dsh_sent_chars(log) - 1_000)
    # Over it (tin + kept > 20,480): plain dsh prunes; its result still outweighs the pointer.
    kept = book.request(sid, ["call-a"], 9_000, window=window)
    assert kept == L.tokens(pruned - 1_000) > 0
    book.change(sid, "call-b", "offload", L.dsh_sent_chars(log), 1_000, pruned)
    # Over it again, and pruning call-b is not enough (19,500 + both pruned results): one
    # summarization request of plain's whole transcript, then nothing of them is carried.
    kept = book.request(sid, ["call-a", "call-b"], 19_500, window=window)
    assert kept == 19_500 + L.tokens(2 * (pruned - 1_000))
    assert book.request(sid, ["call-a", "call-b"], 20_000, window=window) == 0
    # A read-back after plain dsh cut kept-out text itself is a fetch plain dsh makes too.
    assert book.request(sid, ["call-a", "call-b"], 20_100, window=window, readback=True) == 0
    fig = book.session_figures(sid)
    assert (fig["plain_prunes"], fig["plain_compactions"], fig["requests"]) == (2, 1, 5)
    assert L.figures_from_log(tmp_path)["sessions"][sid] == fig
    # What plain dsh's model then fetches again is unknown here: every surface says "at least".
    assert L.bound({"plain_prunes": 1, "plain_compactions": 0}) == "at least"
    assert L.with_store({}, book.snapshot())["tokens_kept_out_bound"] == "about"  # it summarized
    assert L.with_store({}, L.Ledger(record=False).snapshot())["tokens_kept_out_bound"] is None

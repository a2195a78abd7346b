"""Context per request in a real dsh session, with and without the native plugin.

    python bench/dsh_session.py [--json bench/out/dsh_session.json]

Runs the real DeepSeek Harness runtime (`deepseek-harness-runtime-bin`, the `test` extra)
offline against a scripted stand-in model endpoint on loopback (tests/dsh_standin.py) twice:

- without: `integrate dsh patch --no-native` (the MCP tools only, as before the plugin);
- with: `integrate dsh patch` (MCP tools + the native plugin and its worker).

The script is the same both times: 4 user turns of 5 model requests each (20 requests):
4 tool calls per turn, each a `bash` command printing a build log, a test run, a grep, a
service log or a listing (0.8 KB to 184 KB; 1.0 MB in all, before dsh's own cut to about
50,000 chars per result), then a short answer. Printed:
the input tokens the stand-in received per request (system prompt + tool schemas +
messages, estimated as one token per 4 chars, one per CJK char; dsh's `dsh_session_log`
envelope field is not model input and is left out) and the totals, side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from dsh_recall.core.text import estimate_tokens  # noqa: E402
from dsh_recall.frontends.cli.integrate import dsh_patch  # noqa: E402
from dsh_standin import dsh_session, input_chars, last_is_tool_result, recall_exe, runtime_available, say, use

# (kind, lines): the output of each tool call, in order; 4 per user turn.
CALLS = [("build", 1800), ("tests", 400), ("grep", 60), ("listing", 30),
         ("build", 2200), ("tests", 900), ("grep", 300), ("log", 1200),
         ("tests", 1500), ("listing", 15), ("log", 2000), ("grep", 40),
         ("build", 900), ("tests", 2400), ("log", 600), ("grep", 120)]
TURNS = ["build the project and run the tests", "the integration tests fail, look at the logs",
         "fix the flaky test and re-run the suite", "summarise what changed"]

GENERATOR = r'''
import sys, random
kind, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
mods = ["core/config", "search/fuse", "stores/sqlite", "services/history", "chunkers/code"]
for i in range(n):
    m = rnd.choice(mods)
    if kind == "build":
        print(f"[{i:05d}] compiling src/{m}.py -> build/{m}.o ({rnd.randint(1, 900)} ms) warnings={rnd.randint(0, 3)}")
    elif kind == "tests":
        ok = "PASSED" if rnd.random() > 0.02 else "FAILED"
        print(f"tests/test_{m.split('/')[1]}.py::test_case_{i:05d}_{rnd.randint(0, 99):02d} {ok} [{100 * i // n:3d}%]")
    elif kind == "grep":
        print(f"src/{m}.py:{rnd.randint(1, 800)}:    value = resolve(key, default={rnd.randint(0, 99)})  # {i}")
    elif kind == "log":
        print(f"2026-05-{1 + i % 28:02d}T12:{i % 60:02d}:00Z INFO worker-{rnd.randint(1, 8)} handled request id={rnd.getrandbits(48):012x} in {rnd.randint(1, 400)} ms")
    else:
        print(f"-rw-r--r-- 1 dev dev {rnd.randint(100, 90000):6d} May {1 + i % 28:2d} {m}_{i}.py")
'''


def brain_for(gen: Path):
    """4 tool calls per user turn, then a short answer; the same script for both runs."""
    state = {"next": 0, "in_turn": 0}

    def brain(body):
        if not last_is_tool_result(body):
            state["in_turn"] = 0  # a new user message
        if state["in_turn"] == 4 or state["next"] >= len(CALLS):
            return say("Done with this part; the output is summarised above.")
        i = state["next"]
        state["next"] += 1
        state["in_turn"] += 1
        kind, lines = CALLS[i]
        return use("bash", {"description": f"{kind} output",
                            "command": f"{sys.executable} {gen} {kind} {lines} {i}"}, f"toolu_{i:02d}")
    return brain


def run(native: bool, tmp: Path) -> list[int]:
    gen = tmp / "gen.py"
    gen.write_text(GENERATOR)
    env = {"DSH_RECALL_HOME": str(tmp / "recall-home"), "DSH_RECALL_EMBEDDER__NAME": "fake"}
    patch = dsh_patch(command=recall_exe(), env=env, native=native)
    with dsh_session(tmp, brain_for(gen), patch) as (session, standin, _):
        for message in TURNS:
            session.run(message)
    return [estimate_tokens("x" * input_chars(b)) for b in standin.requests]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="Also write the numbers here.")
    args = ap.parse_args()
    why = runtime_available()
    if why:
        sys.exit(why)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        without = run(False, Path(a))
        with_plugin = run(True, Path(b))
    if len(without) != len(with_plugin):
        sys.exit(f"the runs made {len(without)} and {len(with_plugin)} requests; compare by hand")
    print("| request | without plugin | with plugin |")
    print("|---|---|---|")
    for i, (x, y) in enumerate(zip(without, with_plugin)):
        print(f"| {i + 1} | {x:,} | {y:,} |")
    tw, tp = sum(without), sum(with_plugin)
    print(f"| **total** | **{tw:,}** | **{tp:,}** ({tp / tw:.0%}) |")
    print(f"\ninput tokens per request; the first request (system prompt, tool schemas, one "
          f"user message) is {without[0]:,} without and {with_plugin[0]:,} with the plugin")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"without": without, "with": with_plugin}, indent=1))


if __name__ == "__main__":
    main()

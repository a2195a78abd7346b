"""The cold CLI's import budget: what a `search`, a `history search`, an object read and each
Claude Code hook import (`python -X importtime`), held to a list of modules they must not
load and a ceiling on how many of the package's own modules they load.

Cold calls are what an agent pays when no daemon is warm (docs/daemon.md): every module
loaded there is paid on every call. What only some commands use stays behind a lazy import:
lineage, the MCP server and web dashboard, pydantic, detect-secrets (its rules are compiled
into policy/scrub_rules.py, loaded only where text is stored), the server half of the daemon,
the reranker, PostgreSQL, the code and markdown chunkers (tree-sitter) for history and hooks,
onnxruntime for a lexical-only search. No times are asserted: the set is what grows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Never on any of these paths.
EVERYWHERE = {
    "pydantic", "detect_secrets", "mcp", "anyio", "uvicorn", "starlette", "httpx", "requests",
    "tomli_w", "psycopg", "tree_sitter", "tree_sitter_language_pack",
    "socket",  # the warm client's, and only once a daemon's socket file exists
    "dsh_recall.services.lineage", "dsh_recall.frontends.cli.lineage", "dsh_recall.frontends.mcp",
    "dsh_recall.frontends.web", "dsh_recall.frontends.daemon", "dsh_recall.rerankers",
    "dsh_recall.services.evaluate", "dsh_recall.stores.postgres", "dsh_recall.services.report.summary",
    "dsh_recall.chunkers.code", "dsh_recall.chunkers.languages", "dsh_recall.chunkers.markdown",
}
NOT_CODE = {"dsh_recall.services.code", "dsh_recall.stores.sqlite.chunks"}
NOT_HISTORY = {"dsh_recall.services.history", "dsh_recall.stores.sqlite.history"}
NOT_MODEL = {"onnxruntime", "tokenizers"}
NOT_SCRUB = {"dsh_recall.policy.scrub_rules"}

# (argv, stdin payload or None, modules it must not import, most dsh_recall modules it may
# import: the count when this was written and about 5 to spare; raise it only with a reason
# in the commit).
CASES = {
    "search lexical-only, shipped model configured": (
        ["search", "retry", "backoff", "--lexical-only"], None,
        NOT_HISTORY | NOT_MODEL | NOT_SCRUB | {"dsh_recall.services.objects", "dsh_recall.services.notes"}, 76),
    "search": (
        ["search", "retry", "backoff"], None,
        NOT_HISTORY | NOT_SCRUB | {"dsh_recall.services.objects", "dsh_recall.services.notes"}, 77),
    "history search": (
        ["history", "search", "retry backoff", "--all"], None,
        NOT_CODE | NOT_MODEL | NOT_SCRUB | {"dsh_recall.services.objects"}, 68),
    "object search": (
        ["object", "search", "{object}", "build"], None,
        NOT_CODE | NOT_HISTORY | NOT_MODEL | {"numpy"}, 58),
    # A range read loads no line search, log ranking or line index (rank/line_limits.py).
    "object get": (
        ["object", "get", "{object}", "--start", "100", "--count", "500"], None,
        NOT_CODE | NOT_HISTORY | NOT_MODEL | NOT_SCRUB | {
            "numpy", "dsh_recall.rank.logrank", "dsh_recall.rank.line_search",
            "dsh_recall.rank.line_index", "dsh_recall.rank.logflags",
            "dsh_recall.services.objects.search"}, 44),
    "hook user-prompt-submit": (
        ["hook", "claude-code", "user-prompt-submit"],
        {"session_id": "s1", "prompt": "what did we decide about the retry loop",
         "hook_event_name": "UserPromptSubmit"},
        NOT_CODE | NOT_MODEL | NOT_SCRUB | {"numpy", "dsh_recall.services.objects"}, 72),
    "hook session-start": (
        ["hook", "claude-code", "session-start"],
        {"session_id": "s1", "source": "compact", "hook_event_name": "SessionStart"},
        NOT_CODE | NOT_MODEL | NOT_SCRUB | {"numpy", "dsh_recall.services.objects"}, 72),
    "hook post-tool-use": (
        ["hook", "claude-code", "post-tool-use"],
        {"session_id": "s1", "tool_name": "Bash", "tool_use_id": "t1", "hook_event_name": "PostToolUse",
         "tool_response": {"stdout": "step ok\n" * 3000, "stderr": "", "interrupted": False, "isImage": False}},
        NOT_CODE | NOT_HISTORY | NOT_MODEL | {"numpy"}, 60),
}


def imported(args: list[str], env: dict, cwd: Path, stdin: str | None = None) -> set[str]:
    """Every module a cold process of `args` imports, the interpreter's own start-up excluded."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2} - {"imported package"}


def covers(names: set[str], module: str) -> bool:
    return any(n == module or n.startswith(module + ".") for n in names)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("budget")
    repo = tmp / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "net.py").write_text("def retry_request(url, attempts=3):\n    return backoff(url)\n")
    home = tmp / "h"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env.update(DSH_RECALL_HOME=str(home), DSH_RECALL_DAEMON="0", DSH_RECALL_EMBEDDER__NAME="fake")
    rows = [{"session": "s1", "seq": i, "role": r, "id": f"m{i}", "workspace": str(repo), "text": t}
            for i, (r, t) in enumerate([("user", "we chose exponential backoff for the retry loop"),
                                        ("assistant", "agreed: three attempts at most")])]
    (tmp / "h.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for args in (["index", "--wait"], ["history", "import", str(tmp / "h.jsonl"), "--format", "generic"]):
        got = subprocess.run([sys.executable, "-m", "dsh_recall", *args], cwd=repo, env=env,
                             capture_output=True, text=True, timeout=300)
        assert got.returncode == 0, got.stderr
    (tmp / "big.txt").write_text("build step ok\n" * 3000)
    put = subprocess.run([sys.executable, "-m", "dsh_recall", "object", "put", str(tmp / "big.txt"), "--json"],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    assert put.returncode == 0, put.stderr
    base = imported(["-c", "pass"], env, repo)
    return {"repo": repo, "env": env, "base": base, "object": json.loads(put.stdout)["id"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_cold_call_imports_only_what_it_uses(world, case):
    argv, payload, forbidden, most_own = CASES[case]
    env = dict(world["env"])
    if "shipped model" in case:
        del env["DSH_RECALL_EMBEDDER__NAME"]  # the default: the shipped ONNX model
    stdin = None
    if payload is not None:
        stdin = json.dumps({**payload, "cwd": str(world["repo"])})
    argv = [a.replace("{object}", world["object"]) for a in argv]
    names = imported(["-m", "dsh_recall", *argv], env, world["repo"], stdin) - world["base"]
    assert "dsh_recall.frontends.entry" in names  # the real entry point ran
    loaded = sorted(m for m in forbidden | EVERYWHERE if covers(names, m))
    assert not loaded, f"{case} imports {loaded}"
    own = sorted(n for n in names if n.startswith("dsh_recall."))
    assert len(own) <= most_own, f"{case} imports {len(own)} dsh_recall modules (budget {most_own})"
    # Outside the standard library: click, the package, and numpy where a code index is read.
    outside = {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - {"dsh_recall", "click"}
    allowed = {"numpy"} if "search" in case and "object" not in case else set()
    # Probes logged though they fail: copy.py's for Jython's org.python.core, the warm
    # client's for Python 3.12's _sha2.
    probes = {"org", "_sha2"}
    assert outside <= allowed | probes | {"_distutils_hack", "sitecustomize", "usercustomize"}, \
        f"{case} imports {sorted(outside - allowed)}"

"""Every `dsh-recall ...` example in the README, run as written on a small fixture world, and
checked against what the README says it gives back. A new example without a check here
fails `test_every_readme_example_has_a_check`, so the README cannot promise what the tool
does not do."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dsh_recall.frontends.cli import _COMMANDS, cli

README = Path(__file__).resolve().parents[1] / "README.md"
EXE = shutil.which("dsh-recall", path=str(Path(sys.executable).parent)) or "dsh-recall"
ENV = {"DSH_RECALL_EMBEDDER__NAME": "fake"}


def readme_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", README.read_text(encoding="utf-8"))


def readme_commands() -> list[str]:
    """Inline examples: `dsh-recall ...`, or a CLI command and its arguments written without
    the program name (`object search ID "FAILED"`, `integrate codex`)."""
    out: list[str] = []
    for span in readme_spans():
        words = span.split()
        if words[0] == "dsh-recall" and len(words) > 1:
            out.append(span.split(None, 1)[1])
        elif words[0] in _COMMANDS and len(words) > 1:
            out.append(span)
    return list(dict.fromkeys(out))


def readme_flags() -> list[str]:
    """Flag fragments (`--http PORT`, `--config FILE`)."""
    return [s.split()[0] for s in readme_spans() if s.startswith("--")]


# -- the fixture world ----------------------------------------------------------------------
OCCUPANCY = '''"""Room occupancy from motion and door sensors."""


class OccupancyStateMachine:
    """Decides whether a room is occupied: the state machine over sensor events."""

    def __init__(self):
        self.state = "vacant"

    def decide(self, event):
        """The transition: motion makes a room occupied; a quiet timeout makes it vacant."""
        if event == "motion":
            self.state = "occupied"
        elif event == "timeout" and self.state == "occupied":
            self.state = "vacant"
        return self.state
'''

BILLING = '''def invoice_total(lines):
    """Sum invoice lines with tax."""
    return sum(line.amount * (1 + line.tax_rate) for line in lines)
'''


@pytest.fixture
def world(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / "src").mkdir()
    (proj / "src" / "occupancy.py").write_text(OCCUPANCY)
    (proj / "src" / "billing.py").write_text(BILLING)
    lines = [f"2024-05-01 12:00:{i % 60:02d} INFO step {i} ok" for i in range(3000)]
    lines.insert(1500, "2024-05-01 12:30:00 ERROR test_checkout FAILED: expected 200, got 500")
    (proj / "big.log").write_text("\n".join(lines) + "\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text("# Deploy\n\n## Keys\n\nThe deploy key lives in the vault "
                                     "under ops/deploy; rotate it every 90 days.\n")
    (notes / "public.md").write_text("# Team\n\nCode review needs two approvals.\n")
    session = tmp_path / "session.jsonl"
    turns = [("user", "How should the HTTP client handle retries when the upstream times out?"),
             ("assistant", "We decided: retries use exponential backoff, at most 3 attempts, "
                           "and only for idempotent requests."),
             ("user", "ok, and log each retry at debug level")]
    session.write_text("".join(json.dumps({"session": "s-retry", "seq": i, "role": r, "text": t,
                                           "workspace": str(proj), "title": "Retry policy"}) + "\n"
                               for i, (r, t) in enumerate(turns)))
    monkeypatch.chdir(proj)
    # What a user does before the notes and history examples: index notes, import a session.
    assert invoke(["notes", "index", str(notes), "--wait"]).exit_code == 0
    assert invoke(["history", "import", str(session)]).exit_code == 0
    return {"proj": proj, "notes": notes, "before": sorted(p.name for p in proj.iterdir())}


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def run(command: str, **subst: str) -> Result:
    """The README command as written, placeholders (ID, ...) filled in."""
    args = [subst.get(a, a) for a in shlex.split(command)]
    r = invoke(args)
    assert r.exit_code == 0, f"`dsh-recall {command}` failed: {r.output}"
    return r


# -- what each example gives back, per the README ---------------------------------------------
def code_search(cmd: str, w: dict) -> None:
    # "ranked excerpts: path, line range, <= 40 lines, symbols, `stale` flag"
    out = run(cmd).output
    first = next(ln for ln in out.splitlines() if ln.startswith("== "))
    assert re.match(r"== src/occupancy\.py:\d+-\d+ ", first), out
    assert "OccupancyStateMachine" in first
    data = json.loads(run(cmd + " --json").output)
    top = data["results"][0]
    assert top["path"] == "src/occupancy.py" and top["stale"] is False
    assert "OccupancyStateMachine" in top["symbols"]
    assert all(r["end_line"] - r["start_line"] < 40 for r in data["results"])
    # "Everything lives under the recall home, never inside your repository."
    assert sorted(p.name for p in w["proj"].iterdir()) == w["before"]


def history_search(cmd: str, w: dict) -> None:
    # "sessions, events [startSeq..endSeq], verbatim text one call away"
    out = run(cmd).output
    m = re.search(r"^(s-retry) \[(\d+)\.\.(\d+)\]", out, re.M)
    assert m, out
    shown = run(f"history show {m.group(1)} --around {m.group(2)}").output
    assert "We decided: retries use exponential backoff, at most 3 attempts" in shown


def object_put(cmd: str, w: dict) -> None:
    # "head + the failure lines + tail stay inline; the middle comes back by id, range or search"
    out = run(cmd).output
    assert out.startswith("2024-05-01 12:00:00 INFO step 0 ok")
    assert "INFO step 2999 ok" in out and "ERROR test_checkout FAILED: expected 200, got 500" in out
    assert "INFO step 1500 ok" not in out  # the passing middle left the context
    obj = re.search(r"moved to object (\w+)", out)
    assert obj, out
    w["object_id"] = obj.group(1)
    got = run(f"object get {obj.group(1)} --start 40000 --count 200").output
    assert "INFO step" in got


def object_search(cmd: str, w: dict) -> None:
    object_put("object put big.log", w)
    out = run(cmd, ID=w["object_id"]).output
    assert "ERROR test_checkout FAILED: expected 200, got 500" in out


def notes_search(cmd: str, w: dict) -> None:
    # "passages with file, line, heading path, access level (fails closed)"
    out = run(cmd).output
    assert re.search(r"^== deploy\.md:\d+-\d+ \[Deploy > Keys\]  personal ", out, re.M), out
    assert "no notes roots" not in out


def mcp_server(cmd: str, w: dict) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def tools() -> list[str]:
        params = StdioServerParameters(command=EXE, args=shlex.split(cmd),
                                       env={**os.environ}, cwd=str(w["proj"]))
        with open(w["proj"].parent / "server.stderr", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return [t.name for t in (await session.list_tools()).tools]

    names = asyncio.run(tools())
    # "Agents reach it through an MCP server": the four sources' tools.
    assert {"code_search", "history_search", "notes_search"} <= set(names), names
    assert any(n.startswith("object") for n in names), names


def claude_code_install(cmd: str, w: dict) -> None:
    run(cmd)
    mcp = json.loads((w["proj"] / ".mcp.json").read_text())
    assert mcp["mcpServers"]["recall"]["args"] == ["mcp"]
    hooks = json.loads((w["proj"] / ".claude" / "settings.json").read_text())["hooks"]
    # "harness hooks (Claude Code PostToolUse / UserPromptSubmit / SessionStart)"
    assert {"PostToolUse", "UserPromptSubmit", "SessionStart"} <= set(hooks)


def dsh_patch(cmd: str, w: dict) -> None:
    out = run(cmd).output
    assert "@deepseek-ai/dsh-mcp-client" in out and "serverName: recall" in out


def dsh_patch_web(cmd: str, w: dict) -> None:
    # "`integrate dsh patch --profile web` mounts it where the card can save": the profile's
    # own patch, the plugin named by a file:// URL; written twice, it is there once.
    from pathlib import Path

    home = Path(w["proj"]).parent / "dsh-home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSH_HOME", str(home))
        run(cmd)
        run(cmd)
    text = (home / "profiles" / "web" / "cordis.patch.yml").read_text()
    assert text.count("- id: recall-native") == 1 and 'name: "file:///' in text


def codex(cmd: str, w: dict) -> None:
    assert "[mcp_servers.recall]" in run(cmd).output


def config_show(cmd: str, w: dict) -> None:
    out = run(cmd).output
    assert "[embedder]" in out and 'name = "fake"' in out  # the environment variable took effect


def trust(cmd: str, w: dict) -> None:
    # "a repository's .dsh-recall.toml may tune ranking ... until you run `dsh-recall trust`"
    from dsh_recall.core.config import load_config

    (w["proj"] / ".dsh-recall.toml").write_text('limit = 3\n[mcp]\nhost = "0.0.0.0"\n')
    before = load_config(workspace=w["proj"])
    assert before.limit == 3 and before.mcp.host == "127.0.0.1" and before.notices
    assert "trusted" in run(cmd).output
    assert load_config(workspace=w["proj"]).mcp.host == "0.0.0.0"
    (w["proj"] / ".dsh-recall.toml").unlink()


def report(cmd: str, w: dict) -> None:
    # "per day and workspace, calls, chars and tokens kept out, ... stale files and pending
    # vectors, disk used"
    run('search "where is the occupancy state machine decided"')
    out = run(cmd).output
    assert "kept out" in out and "upper bound" in out and "on disk:" in out
    data = json.loads(run(cmd + " --json").output)
    (ws,) = [x for x in data["workspaces"] if x["workspace"] == str(w["proj"])]
    assert ws["calls"] == 1 and ws["kept_out_chars"] > 0
    assert ws["index"]["stale_files"] == 0 and ws["index"]["files"] == 3


def serve(cmd: str, w: dict) -> None:
    # "the same on a local dashboard (127.0.0.1 only), with a search box"
    import subprocess
    import urllib.request

    proc = subprocess.Popen([EXE, *shlex.split(cmd), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=str(w["proj"]))
    try:
        link = proc.stdout.readline().split()[-1]  # carries this run's token
        assert link.startswith("http://127.0.0.1:"), link
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        page = browser.open(link, timeout=60).read().decode()  # sets the cookie, redirects
        assert 'id="search-form"' in page
        url = link.partition("?")[0]
        data = json.loads(browser.open(url + "api/report", timeout=60).read())
        assert "kept_out_tokens" in data["totals"]
    finally:
        proc.terminate()
        proc.wait(30)


def search_sources(cmd: str, w: dict) -> None:
    # "one ranked answer from every source, each hit labelled"
    object_put("object put big.log", w)
    for query, source in (("occupancy state machine", "code"), ("retries backoff", "history"),
                          ("deploy key vault", "notes"), ("FAILED", "objects")):
        out = run(cmd, QUERY=query).output
        assert re.search(rf"^== \[{source}\] ", out, re.M), (query, out)
        assert "-- sources: code " in out


def watch(cmd: str, w: dict) -> None:
    # "re-index as files change"
    import subprocess

    proc = subprocess.Popen([EXE, *shlex.split(cmd), "--json", "--no-notes"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=str(w["proj"]))
    try:
        first = json.loads(proc.stdout.readline())
        assert first["kind"] == "code" and first["target"] == str(w["proj"])
        import time
        time.sleep(0.5)
        (w["proj"] / "src" / "billing.py").write_text(BILLING + "\n\ndef refund():\n    pass\n")
        e = json.loads(proc.stdout.readline())
        assert e["indexed"] == 1 and e["unchanged"] >= 1
    finally:
        proc.terminate()
        proc.wait(30)


def daemon(cmd: str, w: dict) -> None:
    # "While it runs, each CLI `search` hands the call to it ...: the same bytes and exit code"
    import subprocess

    query = ["search", "where is the occupancy state machine decided"]
    proc = subprocess.Popen([EXE, *shlex.split(cmd)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=str(w["proj"]))
    try:
        assert "listening" in proc.stderr.readline()
        via = subprocess.run([EXE, *query], capture_output=True, text=True, cwd=str(w["proj"]),
                             timeout=120)
        alone = subprocess.run([EXE, *query], capture_output=True, text=True,
                               cwd=str(w["proj"]), timeout=120,
                               env={**os.environ, "DSH_RECALL_DAEMON": "0"})
    finally:
        proc.terminate()
        log = proc.communicate(timeout=30)[1]
    assert via.returncode == alone.returncode == 0, (via.stderr, alone.stderr)
    assert via.stdout == alone.stdout and "src/occupancy.py" in via.stdout
    assert "served search" in log, log


def index_drop(cmd: str, w: dict) -> None:
    # "`index --drop PATH` removes one": the index goes, the answer says what it freed
    run("index --wait .")
    assert json.loads(run("status --json").output)["indexed"] is True
    out = run(cmd, PATH=str(w["proj"])).output
    assert "dropped the code index" in out and "3 files" in out and "freed" in out, out
    assert json.loads(run("status --json").output)["indexed"] is False


def daemon_stop(cmd: str, w: dict) -> None:
    # "`dsh-recall daemon --stop` stops it": the daemon that runs exits and says so
    import subprocess

    proc = subprocess.Popen([EXE, "daemon"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, cwd=str(w["proj"]))
    try:
        assert "listening" in proc.stderr.readline()
        stopped = subprocess.run([EXE, *shlex.split(cmd)], capture_output=True, text=True,
                                 cwd=str(w["proj"]), timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert f"stopped pid {proc.pid}" in stopped.stderr, stopped.stderr
        assert proc.wait(timeout=30) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def eval_cases(cmd: str, w: dict) -> None:
    # "Hit@k, MRR and nDCG@10 on your own cases, for any source"
    cases = w["proj"] / "cases.jsonl"
    cases.write_text('{"query": "occupancy state machine", "paths": ["src/occupancy.py"]}\n'
                     '{"query": "deploy key vault", "files": ["deploy.md"]}\n')
    try:
        out = run(cmd).output
    finally:
        cases.unlink()
    assert "ndcg@10" in out
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:] if ln.split()}
    assert rows["code"][2] == "1.000" and rows["notes"][2] == "1.000"  # hit@1


def why_line(cmd: str, w: dict) -> None:
    # "the commit that last changed the line (message, author, date, hunk) ... offline from
    # the local git repository"
    import subprocess

    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q"], ["add", "src/billing.py"],
                 ["-c", "user.name=Ada", "-c", "user.email=ada@example.com", "commit", "-q",
                  "-m", "Invoice totals include tax"]):
        subprocess.run(["git", *args], cwd=w["proj"], env=env, check=True, capture_output=True)
    out = run(cmd).output
    assert "Invoice totals include tax" in out and "Ada" in out and "hunk @@ -0,0 +1,3 @@" in out
    data = json.loads(run(cmd + " --json").output)
    assert data["status"] == "committed" and data["commit"]["author"] == "Ada"


CHECKS: dict[str, Callable[[str, dict], None]] = {
    'search "where is the occupancy state machine decided"': code_search,
    'history search "what did we decide about retries"': history_search,
    "object put big.log": object_put,
    'object search ID "FAILED"': object_search,
    'notes search "deploy key"': notes_search,
    "mcp": mcp_server,
    "integrate claude-code install": claude_code_install,
    "integrate dsh patch": dsh_patch,
    "integrate dsh patch --profile web": dsh_patch_web,
    "integrate codex": codex,
    "report": report,
    "serve": serve,
    "search QUERY --sources code,history,notes,objects": search_sources,
    "watch": watch,
    "mcp --watch": mcp_server,
    "eval cases.jsonl": eval_cases,
    "config show": config_show,
    "trust": trust,
    "daemon": daemon,
    "daemon --stop": daemon_stop,
    "index --drop PATH": index_drop,
    "why src/billing.py:3": why_line,
}


def test_every_readme_example_has_a_check():
    found = readme_commands()
    assert len(found) >= 8, found  # the parser still finds the examples
    missing = [c for c in found if c not in CHECKS]
    assert not missing, f"README examples with no check in {__file__}: {missing}"


@pytest.mark.parametrize("command", readme_commands())
def test_readme_example_runs_as_written(command, world):
    CHECKS[command](command, world)


def test_readme_flags_exist():
    helps = {"": invoke(["--help"]).output}
    for c in readme_commands():
        helps[c] = invoke(shlex.split(c)[:2] + ["--help"]).output
    for flag in readme_flags():
        assert any(re.search(rf"(^|\s){re.escape(flag)}\b", h) for h in helps.values()), flag


def test_the_tour_block_uses_commands_and_flags_that_exist():
    # The README's indented "Five minutes" block is not run (it needs your harnesses'
    # sessions and notes); every command and flag in it must exist as written.
    text = README.read_text(encoding="utf-8")
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("    dsh-recall ")]
    assert len(lines) >= 6, lines
    for line in lines:
        for part in line.split("#")[0].split("&&"):
            words = shlex.split(part)
            assert words[0] == "dsh-recall", part
            sub = [w for w in words[1:3] if not w.startswith("-")]
            group = sub[:2] if sub[:1] and sub[0] in ("history", "notes", "object") else sub[:1]
            helped = invoke([*group, "--help"])
            assert helped.exit_code == 0, (part, helped.output)
            for w in words:
                if w.startswith("-"):
                    assert re.search(rf"(^|[\s,]){re.escape(w)}\b", helped.output), (w, part)

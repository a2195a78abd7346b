"""The scripted session of bench/dsh_real.py: a real flask tree, five user turns, and a
stand-in model that follows the same script in every arm and recovers what it needs.

The scenario (`build`): a flask tree from the SWE-bench dev bundle, committed in a fresh
git repository, plus

- `checks/test_debug_flag.py`, a test that compiles `get_debug_flag` straight out of
  `src/flask/helpers.py` (the venv has no werkzeug/jinja2, so nothing imports flask) and
  expects `FLASK_DEBUG=off` to mean off; flask treats it as on, so the real pytest run fails
  with a real traceback until helpers.py is edited;
- three real CI logs (`ci/*.log`, from ci-logs-dev, the biggest about 1 MB);
- a notes folder (outside the repo) holding one fact, the docs deploy procedure.

Facts the model must have in front of it when it answers (`Facts`): the failing test id,
the first ground-truth error line of each CI log, the decision stated in turn 1, the note's
deploy command, and the exact old text of the edit. The brain checks each in the request it
received; when it is missing it fetches it the way the arm allows: the recall tool when the
request's `tools` list has `mcp__recall__recall` (its `source` enum read from the schema),
else the older per-source tools, else -- or when the recall answer does not hold the fact --
bash grep (the log file, the notes folder, the dsh session file) or a ranged `read`, as an
agent in plain dsh would. The old text of the edit always comes from what the model saw: the
full read, or, when the full read was shortened, a ranged read of the range its outline
gives for `get_debug_flag` (grep + a ranged read when no outline names it).

A compaction request (dsh's "You are now acting as a compaction engine" prompt) gets a terse
checkpoint in dsh's template (`checkpoint`): the first 80 characters of each user message and
the files and commands, never tool output -- the same in every arm.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from dsh_standin import last_is_tool_result, last_user_text, overflow, say, system_text, use  # noqa: E402

CI_CASES = ("assertj_1944", "astor_400", "cidiff_57")  # 1.08 MB, 60 KB, 42 KB
READS = ("src/flask/helpers.py", "src/flask/cli.py", "src/flask/scaffold.py", "src/flask/app.py")
TEST_FILE = "checks/test_debug_flag.py"
DECISION = ("keep FLASK_DEBUG parsing inside get_debug_flag in helpers.py, not in cli.py, "
            "because the Windows deploy batch files set FLASK_DEBUG=Off and never go through the CLI")
NOTE_FACT = "make -C docs preview-upload BUCKET=flask-docs-staging-7"
OLD_LINE = re.compile(r'return (?:bool\(val and )?val\.lower\(\) not in [({]"0", "false", "no"[)}]\)?')

TEST_SOURCE = '''"""FLASK_DEBUG parsing, checked against src/flask/helpers.py itself.

The helpers are compiled straight from the source file (no flask import, so the test
needs neither werkzeug nor jinja2), which keeps tracebacks pointing at helpers.py lines.
"""
import ast
import os
import pathlib
import typing as t

import pytest

HELPERS = pathlib.Path(__file__).resolve().parents[1] / "src" / "flask" / "helpers.py"


def _helpers():
    tree = ast.parse(HELPERS.read_text(encoding="utf-8"))
    wanted = [n for n in tree.body
              if isinstance(n, ast.FunctionDef) and n.name in ("get_env", "get_debug_flag")]
    ns = {"os": os, "t": t}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(HELPERS), "exec"), ns)
    return ns


@pytest.mark.parametrize("value, expected", [
    ("1", True), ("true", True), ("0", False), ("false", False), ("no", False),
    ("Off", False), ("off", False),
])
def test_debug_flag_values(monkeypatch, value, expected):
    monkeypatch.setenv("FLASK_DEBUG", value)
    assert _helpers()["get_debug_flag"]() is expected


def test_debug_flag_unset_is_off(monkeypatch):
    monkeypatch.delenv("FLASK_DEBUG", raising=False)
    monkeypatch.delenv("FLASK_ENV", raising=False)
    assert _helpers()["get_debug_flag"]() is False
'''

NOTE = f"""# Release runbook

## Docs preview deploy

Build the docs, then upload the preview with `{NOTE_FACT}`; the staging bucket number
changed in March, the old `flask-docs-staging` bucket is read-only.

## Tags

Release tags are signed; push them only after CI is green on main.
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STAMP = re.compile(r"^(?:.*\t)?\d{4}-\d\d-\d\dT[\d:.]+Z\s*")


def pytest_cmd() -> str:
    return f"{sys.executable} -m pytest -v -p no:cacheprovider {TEST_FILE}"


def log_needle(line: str) -> str:
    """A distinctive 60-char piece of a ground-truth error line: ANSI codes, the CI
    timestamp, a `[ERROR]` tag and the directories of a leading path removed."""
    s = _STAMP.sub("", _ANSI.sub("", line)).strip()
    s = re.sub(r"^\[(?:ERROR|INFO|WARNING)\]\s*", "", s)
    s = re.sub(r"^/?(?:[\w.-]+/)+", "", s)
    return s[:60].strip()


@dataclass
class Scenario:
    repo: Path
    notes: Path
    tag: str
    facts: dict[str, str]           # fact name -> the string that must be visible
    logs: list[str]                 # repo-relative CI log paths
    read_sizes: dict[str, int] = field(default_factory=dict)


def build(work: Path, bare: Path, tag: str, eval_dir: Path) -> Scenario:
    """The flask tree at `tag` in `work/repo` (a fresh git repo, one commit), the test, the
    CI logs and the notes folder; the facts' strings worked out from the real files."""
    repo = work / "repo"
    repo.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(bare), "archive", tag],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(repo)], input=archive, check=True)
    (repo / TEST_FILE).parent.mkdir(parents=True, exist_ok=True)
    (repo / TEST_FILE).write_text(TEST_SOURCE)
    facts: dict[str, str] = {}
    logs = []
    for case in CI_CASES:
        src = eval_dir / "ci-logs-dev" / "cases" / case
        dest = repo / "ci" / f"{case}.log"
        dest.parent.mkdir(exist_ok=True)
        shutil.copyfile(src / "fail.log", dest)
        lines = dest.read_text(encoding="utf-8", errors="replace").splitlines()
        first = next(ln for ln in (src / "groundtruth").read_text().splitlines()[1:] if ln.startswith("E"))
        start = int(first.split()[1].split("-")[0])
        facts[f"ci {case}"] = log_needle(lines[start - 1])
        logs.append(f"ci/{case}.log")
    git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", f"flask tree {tag}"], check=True)

    helpers = (repo / "src/flask/helpers.py").read_text()
    old = OLD_LINE.search(helpers)
    if not old:
        raise RuntimeError(f"{tag}: no FLASK_DEBUG parsing line in src/flask/helpers.py to edit")
    facts["edit old text"] = old.group(0)
    run = subprocess.run(pytest_cmd(), shell=True, cwd=repo, capture_output=True, text=True)
    failed = re.search(r"^FAILED (\S+)", run.stdout, re.M)
    if not failed:
        raise RuntimeError(f"{tag}: the planted test did not fail:\n{run.stdout[-2000:]}")
    facts["test failure"] = failed.group(1)
    facts["decision"] = "Windows deploy batch files set FLASK_DEBUG=Off"
    notes = work / "notes"
    notes.mkdir()
    (notes / "runbook.md").write_text(NOTE)
    (notes / "editor.md").write_text("# Editor\n\nWe use four-space indents and black, line length 100.\n")
    facts["note"] = NOTE_FACT
    sizes = {p: (repo / p).stat().st_size for p in READS}
    sizes.update({p: (repo / p).stat().st_size for p in logs})
    return Scenario(repo, notes, tag, facts, logs, sizes)


# -- what the model sees ----------------------------------------------------------------------

def visible_text(body: dict[str, Any]) -> str:
    """Everything the model reads in one request, as text (ANSI codes dropped)."""
    parts = [system_text(body)]
    for m in body.get("messages") or []:
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
            continue
        for b in c or []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                parts.append(b.get("text", ""))
            elif b.get("type") == "tool_result":
                inner = b.get("content")
                parts.append(inner if isinstance(inner, str) else
                             "".join(x.get("text", "") for x in inner or [] if isinstance(x, dict)))
            elif b.get("type") == "tool_use":
                parts.append(json.dumps(b.get("input"), ensure_ascii=False))
    return _ANSI.sub("", "\n".join(parts))


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name", "") for t in body.get("tools") or []}


def tool_schema(body: dict[str, Any], name: str) -> dict[str, Any]:
    for t in body.get("tools") or []:
        if t.get("name") == name:
            return t.get("input_schema") or {}
    return {}


_OBJECT_ID = re.compile(r"(?:\bobject |\bid=|\"id\":\s*\")([0-9a-f]{6,40})\b")


def result_of(body: dict[str, Any], call_id: str) -> str:
    for m in body.get("messages") or []:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") == call_id:
                inner = b.get("content")
                return inner if isinstance(inner, str) else "".join(
                    x.get("text", "") for x in inner or [] if isinstance(x, dict))
    return ""


def is_summary_request(body: dict[str, Any]) -> bool:
    """dsh's compaction asks for a checkpoint in a request of its own: the history so far
    plus one more user text ("You are now acting as a compaction engine ...")."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    texts = [content] if isinstance(content, str) else [
        b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
    return any("acting as a compaction engine" in t for t in texts)


SUMMARY_CHARS = 80


def checkpoint(body: dict[str, Any]) -> str:
    """The stand-in's answer to a compaction request: dsh's template, filled tersely the
    way a hurried model would: the first SUMMARY_CHARS characters of each user message,
    the files read and the commands run, never tool output. Deterministic, the same in
    every arm, and it keeps none of the facts' strings whole."""
    asks, files, commands = [], [], []
    for m in body.get("messages") or []:
        for b in m.get("content") if isinstance(m.get("content"), list) else []:
            if not isinstance(b, dict):
                continue
            if m.get("role") == "user" and b.get("type") == "text":
                t = b.get("text", "")
                if not t.startswith(("Current runtime context", "You are now acting", "This is an automatically", "## ",
                                     "<compacted-summary>", "</compacted-summary>")) and len(t) > 3:
                    asks.append(t[:SUMMARY_CHARS] + ("..." if len(t) > SUMMARY_CHARS else ""))
            elif b.get("type") == "tool_use":
                inp = b.get("input") or {}
                if inp.get("file_path"):
                    files.append(inp["file_path"])
                elif inp.get("command"):
                    commands.append(inp["command"].split("|")[0][:60])
    bullets = lambda xs: "\n".join(f"- {x}" for x in dict.fromkeys(xs)) or "- (none)"  # noqa: E731
    return (f"## Primary Request and Intent\n{bullets(asks)}\n\n"
            "## Key Technical Concepts\n- flask, FLASK_DEBUG parsing, pytest, Maven/Gradle CI logs\n\n"
            f"## Files and Code\n{bullets(files)}\n\n## Errors and Fixes\n- checks test fails on 'off'\n\n"
            f"## Pending Jobs\n- (none)\n\n## Current Work\n{bullets(commands[-3:])}\n\n"
            "## Next Step\n- continue the current request\n\n## Critical Context\n- see the requests above")


# -- the brain ---------------------------------------------------------------------------------

Step = Generator[dict[str, Any], dict[str, Any], None]


@dataclass
class Log:
    """What happened, per fact and per call."""
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    recall_calls: int = 0
    calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    edit_result: str = ""
    green: bool = False
    summaries: int = 0
    errors: list[str] = field(default_factory=list)


TURNS = [
    ("We decided to " + DECISION + ". Don't change get_env or the CLI. Task: "
     f"{TEST_FILE} fails; find out why and what needs fixing (don't fix it yet)."),
    "CI is also red for the three Java projects we vendor; their logs are in ci/. "
    "Tell me the first real error in each.",
    "OK, fix get_debug_flag now so the test passes, and re-run the tests.",
    "As we discussed earlier, what did we decide about where FLASK_DEBUG parsing lives, and why?",
    "Last thing: how do I upload the docs preview? It's in my notes.",
]


class Brain:
    """One script for every arm: a generator per user turn, fed each request body."""

    def __init__(self, sc: Scenario, dsh_home: Path, force_overflow: bool = False) -> None:
        self.sc = sc
        self.dsh_home = dsh_home
        self.log = Log()
        self.turn = -1
        self.gen: Step | None = None
        self.started = False
        self.pending: Callable[[dict[str, Any]], Step] | None = None
        self.n = 0
        self.force_overflow = force_overflow
        self.overflowed = False
        self.turns: list[Callable[[dict[str, Any]], Step]] = [self.t1, self.t2, self.t3, self.t4, self.t5]

    # the stand-in calls this for every request
    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._answer(body)
        except Exception as e:  # a broken step must not hang dsh: say so and end the turn
            self.log.errors.append(f"turn {self.turn + 1}: {type(e).__name__}: {e}")
            self.gen = None
            return say(f"(bench brain error: {e})")

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_summary_request(body):
            self.log.summaries += 1
            return say(checkpoint(body))
        if not last_is_tool_result(body):
            idx = next((i for i, t in enumerate(TURNS) if t == last_user_text(body)), None)
            if idx is not None and idx != self.turn:  # a new user turn
                self.turn = idx
                self.gen, self.started = None, False
                self.pending = self.turns[idx]
                if self.force_overflow and idx == 2 and not self.overflowed:
                    self.overflowed = True
                    return overflow()  # dsh compacts, then sends this turn again
            if not self.started and self.pending is not None:
                self.gen, self.started = self.pending(body), True
                return self._send(self.gen, None)
        if self.gen is None:
            return say("Done.")
        return self._send(self.gen, body)

    def _send(self, gen: Step, body: dict[str, Any] | None) -> dict[str, Any]:
        try:
            reply = gen.send(body) if body is not None else next(gen)
        except StopIteration:
            self.gen = None
            return say("Done.")
        for b in reply.get("blocks", []):
            if b.get("type") == "tool_use":
                self.log.calls[b["id"]] = b["name"]
                if b["name"].startswith("mcp__recall__"):
                    self.log.recall_calls += 1
            if b.get("type") == "text" and b.get("text", "").startswith("ANSWER"):
                self.gen = None
        return reply

    def call(self, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        return use(tool, tool_input, f"toolu_{self.n:03d}")

    def last_id(self) -> str:
        return f"toolu_{self.n:03d}"

    def bash(self, command: str, what: str) -> dict[str, Any]:
        return self.call("bash", {"description": what, "command": command})

    # -- facts -----------------------------------------------------------------------------

    def seen(self, body: dict[str, Any], fact: str) -> bool:
        return self.sc.facts[fact] in visible_text(body)

    def check(self, body: dict[str, Any], fact: str, how: str) -> None:
        ok = self.seen(body, fact)
        entry = self.log.facts.setdefault(fact, {"needle": self.sc.facts[fact], "how": []})
        entry["recovered"] = ok
        entry["how"].append(how)

    def said(self, fact: str) -> str:
        """The answer quotes a fact only when the model had it in front of it."""
        return self.sc.facts[fact] if self.log.facts.get(fact, {}).get("recovered") else "(not found)"

    def recall_tool(self, body: dict[str, Any]) -> str | None:
        names = tool_names(body)
        for name in ("mcp__recall__recall",):
            if name in names:
                return name
        return None

    def source_arg(self, body: dict[str, Any], tool: str, want: str) -> dict[str, Any]:
        prop = (tool_schema(body, tool).get("properties") or {}).get("source") or {}
        enum = prop.get("enum") or (prop.get("items") or {}).get("enum") or []
        hit = next((e for e in enum if e.startswith(want[:4])), None)
        return {"source": hit or want} if (enum or prop) else {}

    def recover_search(self, body: dict[str, Any], fact: str, query: str, source: str,
                       plain_cmd: str) -> Step:
        """Search history or notes: the recall tool, its older per-source tools, or bash."""
        names = tool_names(body)
        merged = self.recall_tool(body)
        old = {"history": "mcp__recall__history_search", "notes": "mcp__recall__notes_search"}[source]
        if merged:
            body = yield self.call(merged, {"query": query, **self.source_arg(body, merged, source)})
            how = f"{merged} {source}"
        elif old in names:
            body = yield self.call(old, {"query": query})
            how = old
        else:
            how = ""
        if not how or not self.seen(body, fact):  # no recall tool, or it missed: as plain dsh
            body = yield self.bash(plain_cmd, f"search for the {fact}")
            how = (how + " missed, then " if how else "") + "bash grep"
        self.check(body, fact, how)
        return body

    def recover_object(self, body: dict[str, Any], fact: str, call_id: str,
                       plain_cmds: list[str]) -> Step:
        """The failure region of an earlier big output: the recall tool on its object id
        when one was offloaded, else bash grep over the file."""
        names = tool_names(body)
        text = result_of(body, call_id)
        ids = _OBJECT_ID.findall(text)
        merged = self.recall_tool(body)
        if ids and (merged or "mcp__recall__object_recall" in names):
            tool = merged or "mcp__recall__object_recall"
            body = yield self.call(tool, {"id": ids[0], "failures": True})
            how = f"{tool} failures"
            if not self.seen(body, fact):  # the failure region missed it: ask by words
                body = yield self.call(tool, {"id": ids[0], "query": "ERROR FAILED Exception error:"})
                how += " + query"
        else:
            how = ""
        for cmd in plain_cmds:  # greps until one shows it, as an agent would
            if how and self.seen(body, fact):
                break
            body = yield self.bash(cmd, f"find the error lines for the {fact}")
            how = (how + " missed, then " if how else "") + "bash grep"
        self.check(body, fact, how)
        return body

    # -- the turns ---------------------------------------------------------------------------

    def t1(self, body: dict[str, Any]) -> Step:
        body = yield self.call("grep", {"pattern": "def get_debug_flag|FLASK_DEBUG", "path": "src"})
        for path in READS[:3]:
            body = yield self.call("read", {"file_path": path})
        body = yield self.bash(pytest_cmd(), "Run the debug flag tests")
        run_id = self.last_id()
        self.check(body, "test failure", "in the test run")
        if not self.seen(body, "test failure"):
            body = yield from self.recover_object(
                body, "test failure", run_id, [pytest_cmd() + " 2>&1 | grep -E '^(FAILED|E )'"])
        yield say("ANSWER: get_debug_flag treats 'off' as true; the failing test: "
                  f"{self.said('test failure')}. The fix belongs in helpers.py.")

    def t2(self, body: dict[str, Any]) -> Step:
        body = yield self.bash("ls -la ci", "List the CI logs")
        ids = {}
        for path in self.sc.logs:
            body = yield self.bash(f"cat {path}", f"Show the CI log {path}")
            ids[path] = self.last_id()
        for path, case in zip(self.sc.logs, CI_CASES):
            fact = f"ci {case}"
            self.check(body, fact, "in the cat output")
            if not self.seen(body, fact):
                greps = [f"grep -n -A3 -E 'ERROR|FAILED' {path} | head -60",
                         f"grep -n -E 'ERROR|FAILED|Exception' {path} | tail -40"]
                body = yield from self.recover_object(body, fact, ids[path], greps)
        yield say("ANSWER: " + "; ".join(f"{c}: {self.said('ci ' + c)}" for c in CI_CASES))

    def t3(self, body: dict[str, Any]) -> Step:
        body = yield self.call("grep", {"pattern": "get_debug_flag", "path": "src"})
        body = yield self.call("read", {"file_path": READS[3]})  # where app.py uses the flag
        fact = "edit old text"
        self.check(body, fact, "in the full read")
        if not self.seen(body, fact):
            # The shortened read's outline names get_debug_flag's line range: read that
            # range, as the outline says; without one, grep for the line first.
            span = re.search(r"^\s*(\d+)-(\d+) get_debug_flag$", visible_text(body), re.M)
            if span:
                lo, hi = int(span.group(1)), int(span.group(2))
                body = yield self.call("read", {"file_path": READS[0], "offset": lo, "limit": hi - lo + 1})
                self.check(body, fact, "ranged read of the outline's range")
            else:
                body = yield self.call("grep", {"pattern": r"val\.lower\(\) not in", "path": READS[0]})
                m = re.search(r"(\d+)[:\-\s]+\s*return[^\n]*val\.lower", visible_text(body))
                line = int(m.group(1)) if m else 1
                body = yield self.call("read", {"file_path": READS[0], "offset": max(1, line - 3), "limit": 8})
                self.check(body, fact, "grep + ranged read")
        m = OLD_LINE.search(visible_text(body))
        if not m:
            yield say("ANSWER: could not see the line to edit")
            return
        old = m.group(0)  # exactly what the model saw
        new = re.sub(r'"no"([)}])', r'"no", "off"\1', old)
        body = yield self.call("edit", {"file_path": READS[0], "old_string": old, "new_string": new})
        self.log.edit_result = result_of(body, self.last_id())[:300]
        body = yield self.bash(pytest_cmd(), "Re-run the debug flag tests")
        out = result_of(body, self.last_id())
        self.log.green = bool(re.search(r"\b\d+ passed\b", out)) and " failed" not in out
        body = yield self.bash("git diff --stat", "Show what changed")
        yield say("ANSWER: helpers.py now treats 'off' as false; the tests pass.")

    def t4(self, body: dict[str, Any]) -> Step:
        self.check(body, "decision", "in the request")
        if not self.seen(body, "decision"):
            sessions = self.dsh_home / "sessions"
            cmd = (f"for f in {sessions}/*/*/session.v4.jsonl*; do zstd -dcqf \"$f\"; done "
                   "| grep -o -E '.{0,200}decided to.{0,300}' | head -3")
            body = yield from self.recover_search(
                body, "decision", "what did we decide about FLASK_DEBUG parsing get_debug_flag",
                "history", cmd)
        yield say(f"ANSWER: we decided: {self.said('decision')}.")

    def t5(self, body: dict[str, Any]) -> Step:
        self.check(body, "note", "in the request")
        if not self.seen(body, "note"):
            body = yield from self.recover_search(
                body, "note", "upload the docs preview deploy", "notes",
                f"grep -rn -i -B2 -A3 'preview' {self.sc.notes}")
        yield say(f"ANSWER: {self.said('note')}")


def iter_calls(requests: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(tool name, call id) of every tool call the model made, in order."""
    seen = set()
    for body in requests:
        for m in body.get("messages") or []:
            for b in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_use" and b["id"] not in seen:
                    seen.add(b["id"])
                    yield b["name"], b["id"]

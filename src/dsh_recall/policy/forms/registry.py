"""Which form an output gets, from a sample of its lines, and the form's lines.

`detect` reads the first and last lines only (the hot path: the dsh worker offloads under
a deadline); `select` marks every line once and fits the marks into the budget. An output
no detector claims keeps the generic form (head + failure lines + tail, `policy.offload`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import compilers, data, installs, runners, vcs
from .base import MUST, NAME, NEAR, SUMMARY, Marks, Selection, bare, fit
from .rules import shown_part

HEAD_SAMPLE, TAIL_SAMPLE = 60, 100
# Past these the generic form (a cheap cut) is used: a typed form reads every line once
# (about 0.1 s a megabyte on an idle core) on the worker's hot path.
MAX_LINES, MAX_CHARS = 20_000, 512 * 1024
HINTS_FAIL = 8  # the failure finder's first lines count as failure lines in log forms


@dataclass(frozen=True)
class Form:
    kind: str
    family: str
    mark: Callable[[list[str]], Marks]
    log: bool  # a log: the failure finder's lines join the form's own failure lines


FORMS = {f.kind: f for f in (
    Form("pytest", "test runner", runners.pytest, True),
    Form("jest", "test runner", runners.jest, True),
    Form("cargo test", "test runner", runners.cargotest, True),
    Form("go test", "test runner", runners.gotest, True),
    Form("junit", "test runner", runners.junit, True),
    Form("compiler", "compiler or linter", compilers.compilers, True),
    Form("install log", "package manager", installs.installs, True),
    Form("json", "data", data.json_pretty, False),
    Form("ndjson", "data", data.ndjson, False),
    Form("csv", "data", lambda lines: data.rows(lines, "csv"), False),
    Form("table", "data", lambda lines: data.rows(lines, "table"), False),
    Form("diff", "version control", vcs.diff, False),
    Form("git log", "version control", vcs.log, False),
)}


def _hits(pattern, sample: list[str], need: int) -> bool:
    n = 0
    for line in sample:
        if pattern.search(line):
            n += 1
            if n >= need:
                return True
    return False


def detect(lines: list[str]) -> str | None:
    """The kind of output `lines` are (a key of FORMS), or None: from the first
    HEAD_SAMPLE and last TAIL_SAMPLE lines, CI prefixes off."""
    if len(lines) > MAX_LINES or len(lines) < 4 or sum(map(len, lines)) > MAX_CHARS:
        return None
    raw = lines[:HEAD_SAMPLE] + lines[max(HEAD_SAMPLE, len(lines) - TAIL_SAMPLE):]
    sample = [bare(shown_part(x)) for x in raw]
    first = next((x for x in sample if x.strip()), "")
    if vcs.is_log(sample):
        return "git log"
    if vcs.is_diff(sample[:HEAD_SAMPLE]):
        return "diff"
    if first.lstrip()[:1] in ("{", "["):
        if data.is_ndjson(sample):
            return "ndjson"
        if data.is_json(sample, sample[-1] if sample else ""):
            return "json"
    if _hits(runners.PYTEST_SIGN, sample, 1):
        return "pytest"
    if _hits(runners.CARGO_SIGN, sample, 2):
        return "cargo test"
    if _hits(runners.JEST_SIGN, sample, 2):
        return "jest"
    if _hits(runners.GO_SIGN, sample, 3):
        return "go test"
    if _hits(runners.JUNIT_SIGN, sample, 3) and _hits(runners.JUNIT_STRONG, sample, 1):
        return "junit"
    if _hits(compilers.SIGN, sample, 2):
        return "compiler"
    if _hits(installs.SIGN, sample, 3):
        return "install log"
    head = sample[:HEAD_SAMPLE]
    if data.delimiter(head[:20]) is not None:
        return "csv"
    if data.is_table(head[:20]):
        return "table"
    return None


_VARIES = re.compile(r"\S*[/\\]\S*|\S+\.\w{1,5}:\S*|\d+")
REPEATS_KEPT = 2


def repeats(marks: Marks) -> None:
    """A failure line saying what two before it said (paths, file:line places and numbers
    aside: `unmappable character` on 40 lines, the same mypy error in 12 files) waits
    until the others are in (NEAR); it stays a failure line, counted where it is left out.
    Lines of `late` steps are counted after the others (a message the failing step prints
    stays in when earlier steps printed it too); `first` lines stay."""
    seen: dict[str, int] = {}
    for li in sorted(marks.fail, key=lambda li: (li in marks.late, li)):
        if marks.rank.get(li, NEAR) > MUST or li in marks.first:
            continue
        key = _VARIES.sub("", bare(marks.lines[li])).strip()
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n >= REPEATS_KEPT:
            marks.rank[li] = NEAR


def module_line(line: str) -> bool:
    """Whether `line` is one module's line of a build's summary (Maven's Reactor Summary:
    `[INFO] core ....... SUCCESS [ 0.4 s]`), not the end of a build step."""
    return runners.REACTOR.match(bare(shown_part(line))) is not None


def select(lines: list[str], kind: str, budget: int, hard: int,
           hints: Iterable[int] = (), settled: int = -1) -> Selection:
    """The lines form `kind` shows of `lines` within `budget` (failure lines up to `hard`),
    and the runs it leaves out, named. `hints`: the failure finder's lines, best first
    (a log form counts the first HINTS_FAIL as failure lines, the rest as context, and
    shows the first before any other line but the output's first and last). `settled`:
    the log's last success line (`logrank.last_success`, -1 for none): a log form's
    failure lines above it are from a step that a later one's success followed, and are
    shown after the others' (`base.order`)."""
    form = FORMS[kind]
    marks = form.mark(lines)
    if form.log:
        for k, li in enumerate(hints):
            if 0 <= li < len(lines) and lines[li].strip():
                if li in marks.rank and marks.rank[li] <= MUST:
                    marks.fail.add(li)  # the form's own failure line: its rank stays
                else:
                    marks.hint.add(li)
                    if k < HINTS_FAIL:
                        marks.keep(li, NAME, fail=True)
                    else:
                        marks.keep(li, NEAR)
                if not marks.first:  # the finder's first hit: why the log failed
                    marks.first.add(li)
                marks.cat.setdefault(li, "failure line" if k < HINTS_FAIL else "error context line")
        if settled > 0:
            marks.late.update(li for li in marks.rank if li < settled)
    repeats(marks)
    # The first line says what the output is; the last non-blank one is most often its
    # summary.
    marks.keep(0, SUMMARY)
    marks.first.add(0)
    last = next((li for li in range(len(lines) - 1, -1, -1) if lines[li].strip()), None)
    if last is not None:
        marks.keep(last, SUMMARY)
        marks.first.add(last)
    return fit(marks, budget, hard)

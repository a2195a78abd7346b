"""Data: pretty-printed JSON, NDJSON (one record a line), CSV/TSV and aligned tables.

A sample of the rows (the first few and the last), the header and the JSON skeleton (its
shallow lines) stay; the other rows leave with their count in the gap's name. A record or a
member that reports an error (`"level": "error"`, `"error": "..."`, `"status": "failed"`)
is a failure line."""

from __future__ import annotations

import re

from .base import CONTEXT, ERROR, NEAR, Marks

FAIL_FIELD = re.compile(
    r"\"(?:level|severity|status|outcome|result|Action|state|conclusion)\"\s*:\s*"
    r"\"(?:error|fatal|critical|fail|failed|failure|FAILED|ERROR)\"")
ERROR_MEMBER = re.compile(
    r"^\s*\"(?:error|errors|errorMessage|exception|failure|failures|stderr)\"\s*:\s*"
    r"(?!null|false|\[\]|\{\}|\"\"|0\b)")
_FIRST_ROWS, _LAST_ROWS = 5, 2


def is_json(sample: list[str], last: str) -> bool:
    head = next((x for x in sample if x.strip()), "").strip()
    return head in ("{", "[") or (head[:1] in "{[" and head.endswith((",", "{", "[")) and
                                  last.strip()[-1:] in ("}", "]"))


def is_ndjson(sample: list[str]) -> bool:
    rows = [x.strip() for x in sample if x.strip()]
    return len(rows) >= 2 and sum(1 for x in rows if x.startswith("{") and x.endswith("}")) \
        >= 0.9 * len(rows)


def json_pretty(lines: list[str]) -> Marks:
    """The skeleton breadth first (shallow lines before deep ones, file order within a
    depth; past the first dozen lines at one depth of one parent a line waits three depths
    more: a sample of each array), error members as failure lines."""
    marks = Marks("json", lines)
    unit = 0
    siblings: dict[int, int] = {}
    for li, line in enumerate(lines):
        indent = len(line) - len(line.lstrip(" \t"))
        if indent and not unit:
            unit = indent
        depth = indent // unit if unit else 0
        for d in [d for d in siblings if d > depth]:
            del siblings[d]
        siblings[depth] = siblings.get(depth, 0) + 1
        if ERROR_MEMBER.search(line) or FAIL_FIELD.search(line):
            marks.keep(li, ERROR, fail=True, cat="error member")
            continue
        item = line.strip() in ("{", "[", "{},", "[],")
        rank = CONTEXT + depth + (3 if siblings[depth] > 12 else 0)
        marks.keep(li, rank, cat="array item" if item else "nested line")
    return marks


def ndjson(lines: list[str]) -> Marks:
    """The first records and the last, every record that reports an error (shown wide)."""
    marks = Marks("ndjson", lines)
    rows = [li for li, x in enumerate(lines) if x.strip()]
    for k, li in enumerate(rows):
        line = lines[li]
        if FAIL_FIELD.search(line):
            marks.keep(li, ERROR, fail=True, cat="error record", wide=True)
        elif k < 2:
            marks.keep(li, CONTEXT, cat="record")
        elif k >= len(rows) - 1:
            marks.keep(li, NEAR, cat="record")
        else:
            marks.drop(li, "record")
    return marks


def _fields(line: str, sep: str) -> int:
    return line.count(sep) + 1 if sep in line else 0


def delimiter(sample: list[str]) -> str | None:
    """The separator of a CSV/TSV sample: the same field count (>= 2) on 90% of its lines."""
    rows = [x for x in sample if x.strip()]
    if len(rows) < 4:
        return None
    for sep in ("\t", ",", ";", "|"):
        n = _fields(rows[0], sep)
        if n >= 2 and sum(1 for x in rows if _fields(x, sep) == n) >= 0.9 * len(rows):
            return sep
    return None


_RULE_LINE = re.compile(r"^[-=+| ]{8,}$")
_HEADER = re.compile(r"^\s*[A-Za-z][\w .()/-]*?(?: {2,}[A-Za-z][\w .()/-]*?){1,}\s*$")


def is_table(sample: list[str]) -> bool:
    """An aligned table: a header whose columns a rule line (`---- ----`) or the rows'
    alignment confirms (pip list, docker ps, kubectl get)."""
    rows = [x for x in sample if x.strip()]
    if len(rows) < 4:
        return False
    if _RULE_LINE.match(rows[1].strip()) and "-" in rows[1] and _HEADER.match(rows[0]):
        return True
    head = rows[0]
    if not _HEADER.match(head) or head.upper() != head:
        return False
    cols = [m.start() for m in re.finditer(r"(?:^|(?<= {2}))\S", head)]
    return len(cols) >= 2 and sum(
        1 for x in rows[1:] if all(c == 0 or x[c - 1:c] == " " for c in cols)) \
        >= 0.9 * (len(rows) - 1)


def rows(lines: list[str], kind: str) -> Marks:
    """Header (and its rule line), the first rows and the last, the other rows counted."""
    marks = Marks(kind, lines)
    body = [li for li, x in enumerate(lines) if x.strip()]
    head = body[:2] if len(body) > 1 and _RULE_LINE.match(lines[body[1]].strip()) else body[:1]
    for li in head:
        marks.keep(li, CONTEXT, cat="header")
    data = body[len(head):]
    for k, li in enumerate(data):
        if k < _FIRST_ROWS:
            marks.keep(li, CONTEXT, cat="row")
        elif k >= len(data) - _LAST_ROWS:
            marks.keep(li, NEAR, cat="row")
        else:
            marks.drop(li, "row")
    return marks

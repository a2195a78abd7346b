"""Version control: unified diffs (`git diff`, `diff -u`) and `git log`.

A diff keeps every file's path (its `+++ b/` line) and hunk headers, then changed lines in file order while
the budget lasts; unchanged context leaves first. A log keeps each commit's hash line and
subject, newest first; authors, dates and message bodies leave with their count. A conflict
marker is a failure line."""

from __future__ import annotations

import re

from .base import CONTEXT, ERROR, NAME, NEAR, SAMPLE, Marks

DIFF_SIGN = re.compile(r"^diff --git a/|^--- a/\S|^\+\+\+ b/\S|^@@ -\d+(?:,\d+)? \+\d+")
LOG_SIGN = re.compile(r"^commit [0-9a-f]{40}\b")
_CONFLICT = re.compile(r"^(?:<{7}|>{7}|\+<{7}|\+>{7})(?: |$)")


def is_diff(sample: list[str]) -> bool:
    return sum(1 for x in sample if DIFF_SIGN.match(x)) >= 2


def is_log(sample: list[str]) -> bool:
    return bool(sample) and LOG_SIGN.match(sample[0]) is not None and \
        any(x.startswith(("Author:", "Merge:")) for x in sample[1:4])


def diff(lines: list[str]) -> Marks:
    marks = Marks("diff", lines)
    for li, line in enumerate(lines):
        if _CONFLICT.match(line):
            marks.keep(li, ERROR, fail=True, cat="conflict marker")
        elif line.startswith("+++ b/") or (line.startswith("--- a/") and li + 1 < len(lines)
                                            and lines[li + 1].startswith("+++ /dev/null")):
            marks.keep(li, CONTEXT, cat="file header")  # the file's path, once
        elif line.startswith(("diff ", "--- ", "+++ ")):
            marks.drop(li, "file header")
        elif line.startswith("@@"):
            marks.keep(li, NEAR, cat="hunk header")
        elif line.startswith(("index ", "new file mode", "deleted file mode", "similarity",
                              "rename ", "old mode", "new mode", "Binary files")):
            marks.drop(li, "file header")
        elif line.startswith("+"):
            marks.keep(li, SAMPLE, cat="added line")
        elif line.startswith("-"):
            marks.keep(li, SAMPLE, cat="removed line")
        else:
            marks.drop(li, "unchanged line")
    return marks


def log(lines: list[str]) -> Marks:
    marks = Marks("git log", lines)
    subject = False
    for li, line in enumerate(lines):
        if LOG_SIGN.match(line):
            marks.keep(li, NAME if li == 0 else CONTEXT, cat="commit")
            subject = True
        elif line.startswith(("Author:", "Date:", "Merge:", "AuthorDate:", "Commit:",
                              "CommitDate:")):
            marks.drop(li, "author or date line")
        elif subject and line.strip():
            marks.keep(li, CONTEXT, cat="subject")
            subject = False
        elif _CONFLICT.match(line):
            marks.keep(li, ERROR, fail=True, cat="conflict marker")
        else:
            marks.drop(li, "message line" if line.strip() else "blank line")
    return marks

"""`why PATH:LINE`: the commit that last changed a line, found offline in the local repository.

The file is read here (bounded, a regular file only) and compared with its blob at HEAD;
a line that is the same as a line of HEAD is blamed there by `git blame` of HEAD (git never
reads the working tree, so no filter or fsmonitor of the repository runs), and a line
HEAD does not have is "not committed yet", which is an answer too.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import InputError
from ...core.files import read_bounded
from ...readers import git

MAX_FILE_BYTES = 16 << 20
_TARGET = re.compile(r"^(?P<path>.+?):(?P<line>\d+)$")


def parse_target(target: str) -> tuple[str, int]:
    """(path, line) of "PATH:LINE"; InputError naming the expected form (pure)."""
    m = _TARGET.match(target.strip())
    if not m:
        raise InputError(f"expected PATH:LINE (e.g. src/app.py:42), got {target[:80]!r}")
    line = int(m.group("line"))
    if line < 1:
        raise InputError(f"line numbers start at 1, got {line}")
    return m.group("path"), line


@dataclass(frozen=True)
class Located:
    """A line of a file inside a repository, and where HEAD has it (None: it does not)."""

    repo: git.Repo
    rel: str  # the path inside the repository, '/'-separated
    line: int
    text: str
    head_line: int | None
    line_count: int
    tracked: bool  # the path is in HEAD


def resolve(path: str, cwd: Path, roots: Sequence[Path] | None) -> Path:
    """The real path of `path` (relative to `cwd`), refused outside `roots` (when given)."""
    if "\x00" in path:
        raise InputError("path contains a NUL character")
    p = Path(os.path.expanduser(path))
    try:
        full = (p if p.is_absolute() else cwd / p).resolve()
    except (OSError, RuntimeError, ValueError) as e:
        raise InputError(f"{path} is not a usable path: {type(e).__name__}") from None
    if roots is not None and not any(full.is_relative_to(r.resolve()) for r in roots):
        raise InputError(f"{path} is outside the workspace ({', '.join(str(r) for r in roots)})")
    try:
        if not full.exists():
            raise InputError(f"{path[:200]} does not exist")
        if full.is_dir():
            raise InputError(f"{path} is a directory; give a file and a line (PATH:LINE)")
    except OSError as e:  # a name too long, a loop of links, no permission
        raise InputError(f"{path[:200]} is not a usable path: {e.strerror or e}") from None
    return full


def split_lines(data: bytes) -> list[str]:
    """Lines as git counts them ("\\r\\n" and "\\n" end a line; a last line without one
    counts), decoded leniently (pure)."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def head_line_of(work: list[str], head: list[str], line: int) -> int | None:
    """The number in HEAD's lines of working line `line` (1-based), None when HEAD does not
    have it: the working copy changed it (pure; difflib, for when git's diff cannot run)."""
    if work == head:
        return line
    sm = difflib.SequenceMatcher(None, head, work, autojunk=False)
    for tag, i1, _i2, j1, j2 in sm.get_opcodes():
        if j1 < line <= j2:
            return i1 + (line - j1) if tag == "equal" else None
    return None


def locate(path: str, line: int, *, cwd: Path, roots: Sequence[Path] | None,
           timeout_s: float) -> Located:
    """Find the repository, the file and where HEAD has the line; InputError when the path,
    the line or the file cannot be used."""
    full = resolve(path, cwd, roots)
    repo = git.find_repo(full, timeout_s=timeout_s, within=roots)
    try:
        rel = full.relative_to(repo.root.resolve()).as_posix()
    except ValueError:
        raise InputError(f"{path} is outside its repository {repo.root}") from None
    data = read_bounded(full, MAX_FILE_BYTES, "file")
    if b"\x00" in data[:8000]:
        raise InputError(f"{rel} is a binary file; lineage answers lines of text files")
    work = split_lines(data)
    if line > len(work):
        raise InputError(f"{rel} has {len(work)} lines; line {line} is past its end")
    blob = git.blob_at(repo, "HEAD", rel, MAX_FILE_BYTES, timeout_s) if repo.head else None
    if blob is None:
        return Located(repo, rel, line, work[line - 1], None, len(work), tracked=False)
    return Located(repo, rel, line, work[line - 1], map_line(blob, data, line, timeout_s),
                   len(work), tracked=True)


def map_line(head: bytes, work: bytes, line: int, timeout_s: float) -> int | None:
    """HEAD's number of working line `line`, None when the working copy changed it: git's
    own diff of the two texts (what `git blame` of the working tree compares), difflib
    when git's diff cannot run."""
    if head == work:
        return line
    if b"\r\n" in work and b"\r\n" not in head:  # a checkout's CRLF (core.autocrlf)
        work = work.replace(b"\r\n", b"\n")
        if head == work:
            return line
    try:
        return git.old_line(git.diff_hunks(head, work, timeout_s), line)
    except git.GitError:
        return head_line_of(split_lines(work), split_lines(head), line)

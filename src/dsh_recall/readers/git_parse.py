"""Pure parsers of git's output for the git reader (`readers/git.py`): `git blame
--porcelain` into `BlameLine`s, and `git log -p` in LOG_FORMAT into `Commit`s with their
`Hunk`s, bounded (MAX_HUNKS, MAX_HUNK_TEXT, MAX_MESSAGE)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


# -- blame -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BlameLine:
    """What `git blame --porcelain` says of one line."""

    commit: str
    orig_line: int  # the line's number in `filename` at `commit`
    line: int  # its number in the blamed revision
    filename: str  # the file's path at `commit` (differs after a rename)
    author: str = ""
    author_mail: str = ""
    author_time: int = 0
    committer_time: int = 0
    summary: str = ""
    boundary: bool = False  # the oldest commit a shallow history or a range reaches
    previous: str | None = None  # the commit before it touched the line's file, and its path
    text: str = ""


def parse_blame(out: bytes) -> list[BlameLine]:
    """Lines of `git blame --porcelain` output (headers are given once per commit)."""
    rows: list[BlameLine] = []
    seen: dict[str, dict[str, str]] = {}
    cur: dict[str, str] | None = None
    head: list[str] = []
    for raw in out.split(b"\n"):
        if raw.startswith(b"\t"):
            if cur is None or not head:
                continue
            sha = head[0]
            meta = seen.setdefault(sha, {})
            meta.update(cur)
            rows.append(BlameLine(
                commit=sha, orig_line=int(head[1]), line=int(head[2]),
                filename=meta.get("filename", ""), author=meta.get("author", ""),
                author_mail=meta.get("author-mail", "").strip("<>"),
                author_time=_int(meta.get("author-time")),
                committer_time=_int(meta.get("committer-time")),
                summary=meta.get("summary", ""), boundary="boundary" in meta,
                previous=meta.get("previous"), text=raw[1:].decode("utf-8", "replace")))
            cur, head = None, []
            continue
        line = raw.decode("utf-8", "replace")
        parts = line.split(" ")
        if cur is None:
            if len(parts) >= 3 and HASH.fullmatch(parts[0]):
                head, cur = parts, {}
            continue
        key, _, value = line.partition(" ")
        cur[key] = value
    return rows


def _int(v: str | None) -> int:
    try:
        return int(v or 0)
    except ValueError:
        return 0


# -- log with hunks --------------------------------------------------------------------------

@dataclass(frozen=True)
class Hunk:
    """One `@@` hunk of a commit's diff against its first parent (0 context lines)."""

    path: str  # the file after the commit ("" when deleted: see old_path)
    old_path: str
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    added: str = ""  # the hunk's added lines, bounded
    removed: str = ""  # its removed lines, bounded


@dataclass(frozen=True)
class Commit:
    hash: str
    parents: tuple[str, ...]
    author: str
    author_mail: str
    author_time: int
    committer_time: int
    message: str
    hunks: tuple[Hunk, ...] = field(default=())
    files: tuple[str, ...] = field(default=())  # paths touched, binary ones included
    truncated: bool = False  # hunks or their text were cut to the bounds


COMMIT_MARK = "\x1edsh-recall-commit\x1f"
# Hash, parents, author name, mail, author time, committer time, then the raw message.
LOG_FORMAT = COMMIT_MARK + "%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%ct%x1f%B%x1edsh-recall-end%x1e"
LOG_ARGS = ("-p", "-U0", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
            "--no-show-signature", "--diff-merges=first-parent", f"--format={LOG_FORMAT}")
MAX_HUNKS = 400  # per commit; a vendored import keeps its first ones
MAX_HUNK_TEXT = 1200  # characters of a hunk's added (and removed) lines kept
MAX_MESSAGE = 8000
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _unquote(p: str) -> str:
    if len(p) >= 2 and p[0] == '"' and p[-1] == '"':
        try:
            return p[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape") \
                .encode("latin-1", "replace").decode("utf-8", "replace")
        except (UnicodeError, ValueError):
            return p[1:-1]
    return p


def _strip_prefix(p: str, prefix: str) -> str:
    p = _unquote(p.rstrip("\t"))  # git ends a name holding a space with a TAB there
    return p[len(prefix):] if p.startswith(prefix) else p


def parse_log(out: bytes) -> list[Commit]:
    """Commits of `git log` with LOG_FORMAT and LOG_ARGS' patch (pure)."""
    text = out.decode("utf-8", "replace")
    commits: list[Commit] = []
    for part in text.split(COMMIT_MARK)[1:]:
        head, _, patch = part.partition("\x1edsh-recall-end\x1e")
        f = head.split("\x1f", 6)
        if len(f) < 7 or not HASH.fullmatch(f[0]):
            continue
        hunks, files, truncated = _parse_patch(patch)
        message = f[6].strip("\n")
        if len(message) > MAX_MESSAGE:
            message, truncated = message[:MAX_MESSAGE], True
        commits.append(Commit(hash=f[0], parents=tuple(f[1].split()), author=f[2],
                              author_mail=f[3], author_time=_int(f[4]),
                              committer_time=_int(f[5]), message=message, hunks=tuple(hunks),
                              files=tuple(files), truncated=truncated))
    return commits


def _parse_patch(patch: str) -> tuple[list[Hunk], list[str], bool]:
    hunks: list[Hunk] = []
    files: list[str] = []
    truncated = False
    old = new = ""
    cur: list[int] | None = None
    added: list[str] = []
    removed: list[str] = []

    def close() -> None:
        nonlocal truncated
        if cur is None:
            return
        if len(hunks) >= MAX_HUNKS:
            truncated = True
            return
        a, r = "\n".join(added), "\n".join(removed)
        if len(a) > MAX_HUNK_TEXT or len(r) > MAX_HUNK_TEXT:
            truncated = True
        hunks.append(Hunk(path=new, old_path=old, old_start=cur[0], old_lines=cur[1],
                          new_start=cur[2], new_lines=cur[3], added=a[:MAX_HUNK_TEXT],
                          removed=r[:MAX_HUNK_TEXT]))

    for line in _lines(patch):
        if line.startswith("diff --git "):
            close()
            cur, added, removed = None, [], []
            old = new = ""
            continue
        if cur is None:
            if line.startswith("--- "):
                old = "" if line[4:] == "/dev/null" else _strip_prefix(line[4:], "a/")
            elif line.startswith("+++ "):
                new = "" if line[4:] == "/dev/null" else _strip_prefix(line[4:], "b/")
                files.append(new or old)
            elif line.startswith("rename from "):
                old = _unquote(line[12:])
            elif line.startswith("rename to "):
                new = _unquote(line[10:])
                files.append(new)
            elif line.startswith("Binary files "):
                m = re.match(r"Binary files (?:a/)?(.*?) and (?:b/)?(.*?) differ", line)
                if m:
                    files.append(m.group(2) if m.group(2) != "/dev/null" else m.group(1))
        if line.startswith("@@ "):
            close()
            m = HUNK_RE.match(line)
            if not m:
                cur = None
                continue
            cur = [int(m.group(1)), int(m.group(2) or 1), int(m.group(3)), int(m.group(4) or 1)]
            added, removed = [], []
            continue
        if cur is not None:
            if line.startswith("+"):
                if sum(map(len, added)) <= MAX_HUNK_TEXT:
                    added.append(line[1:])
            elif line.startswith("-"):
                if sum(map(len, removed)) <= MAX_HUNK_TEXT:
                    removed.append(line[1:])
    close()
    return hunks, list(dict.fromkeys(f for f in files if f)), truncated


def _lines(text: str) -> Iterator[str]:
    start = 0
    n = len(text)
    while start < n:
        end = text.find("\n", start)
        if end < 0:
            end = n
        yield text[start:end]
        start = end + 1

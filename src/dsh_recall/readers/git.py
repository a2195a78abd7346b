"""Reading a local git repository: git run as a subprocess, bounded, offline, and never
running what the repository's own configuration asks for.

The repository is untrusted input. Only plumbing-like read commands run here (`rev-parse`,
`cat-file`, `rev-list`, `log`, `blame` of a committed revision), with:
- the environment's repository redirections (GIT_DIR, GIT_INDEX_FILE, ...) and helper
  commands (GIT_EXTERNAL_DIFF, GIT_SSH_COMMAND, ...) removed;
- `-c` overrides for every configured command a read could reach: no fsmonitor, no pager,
  no external diff, no textconv, no signature checks (which run gpg), no hooks, and no
  transport at all (`protocol.allow=never`: a partial clone's lazy fetch cannot reach the
  network);
- a timeout, a cap on the bytes read from git's stdout, and stdin closed.
The working tree is never handed to git: `blame` runs on HEAD, and lines changed since are
found by comparing the file's bytes with HEAD's blob here (git would run the
repository's clean filters over the file to do it).

Pure parsers (`parse_blame`, `parse_log`) turn git's output into plain rows.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError

__all__ = ["GitError", "Repo", "BlameLine", "Commit", "Hunk", "find_repo", "parse_blame",
           "parse_log", "LOG_FORMAT"]

# Environment variables that point git at another repository or make it run a command.
_DROP_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
             "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
             "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS",
             "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_PAGER",
             "GIT_EDITOR", "GIT_REPLACE_REF_BASE", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE",
             "GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF")
# Overrides of everything a read command could run from the repository's config.
SAFE_CONFIG = (
    "core.fsmonitor=false", "core.pager=cat", "core.hooksPath=/dev/null", "diff.external=",
    "log.showSignature=false", "color.ui=never", "core.quotePath=false",
    "protocol.allow=never", "core.sshCommand=false", "core.askPass=", "credential.helper=",
    "i18n.logOutputEncoding=UTF-8", "blame.ignoreRevsFile=", "blame.markIgnoredLines=false",
    "blame.markUnblamableLines=false", "core.untrackedCache=false", "gc.auto=0",
    "maintenance.auto=false",
)
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_BYTES = 16 << 20
HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
NULL_HASH = re.compile(r"0{40}|0{64}")


class GitError(InputError):
    """git could not answer: not a repository, no such path or revision, a timeout, too
    much output, or git itself missing. The message says which."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1",
                "LC_ALL": "C", "LANG": "C", "PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1"})
    return env


def run(cwd: Path, args: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES, stdin: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,), env_extra: dict[str, str] | None = None) -> bytes:
    """git's stdout for `args` in `cwd`, at most `max_bytes` (more is a GitError), within
    `timeout_s` (then git is killed); GitError with git's first stderr line on failure."""
    timeout_s = min(timeout_s, 3600.0)
    cmd = ["git", "--no-pager"]
    for kv in SAFE_CONFIG:
        cmd += ["-c", kv]
    cmd += list(args)
    try:
        proc = subprocess.Popen(cmd, cwd=str(cwd), env={**_env(), **(env_extra or {})},
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                start_new_session=True)
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH); code lineage needs it") from None
    except OSError as e:
        raise GitError(f"cannot run git in {cwd}: {e.strerror or e}") from None
    try:
        out, err = _bounded(proc, stdin, timeout_s, max_bytes)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise GitError(f"git {args[0]} took over {timeout_s:g} s in {cwd}; stopped it") from None
    if len(out) > max_bytes:
        raise GitError(f"git {args[0]} wrote over {max_bytes:,} bytes; stopped reading")
    if proc.returncode not in ok_codes:
        first = err.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {first[0] if first else f'exit {proc.returncode}'}")
    return out


MAX_STDERR = 1 << 16


def _bounded(proc: subprocess.Popen, stdin: bytes | None, timeout_s: float,
             max_bytes: int) -> tuple[bytes, bytes]:
    """communicate() that stops reading (and kills git) past `max_bytes` of stdout, keeps
    at most MAX_STDERR of stderr, and raises TimeoutExpired at the deadline."""
    assert proc.stdout is not None and proc.stderr is not None
    if stdin is not None and proc.stdin is not None:
        try:  # git reads its whole stdin (a list of hashes) before it writes
            proc.stdin.write(stdin)
        except BrokenPipeError:
            pass  # git ended early: its exit code and stderr say why
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
    deadline = time.monotonic() + timeout_s
    out: list[bytes] = []
    err: list[bytes] = []
    sizes = {"out": 0, "err": 0}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "out")
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "err")
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout_s)
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                sizes[key.data] += len(chunk)
                if key.data == "err":
                    if sizes["err"] <= MAX_STDERR:
                        err.append(chunk)
                    continue
                out.append(chunk)
                if sizes["out"] > max_bytes:
                    proc.kill()
                    proc.wait()
                    return b"".join(out), b"".join(err)
    finally:
        sel.close()
    proc.wait(max(0.1, deadline - time.monotonic()))
    return b"".join(out), b"".join(err)


@dataclass(frozen=True)
class Repo:
    """A repository's work tree: its top folder, its HEAD (None before a first commit) and
    whether its history is shallow (a clone with --depth)."""

    root: Path
    head: str | None
    shallow: bool


def find_repo(path: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> Repo:
    """The repository whose work tree holds `path` (a file or a folder); GitError when none."""
    folder = path if path.is_dir() else path.parent
    args = ["rev-parse", "--show-toplevel", "--is-shallow-repository"]
    try:
        try:  # one call in the common case; a repository without commits has no HEAD
            out, head = run(folder, [*args, "--verify", "HEAD^{commit}"], timeout_s=timeout_s,
                            max_bytes=1 << 16), True
        except GitError as e:
            if "not a git repository" in str(e):
                raise
            out, head = run(folder, args, timeout_s=timeout_s, max_bytes=1 << 16), False
    except GitError as e:
        if "not a git repository" in str(e):
            raise GitError(f"{folder} is not inside a git repository") from None
        raise
    lines = out.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 2 + head:
        raise GitError(f"{folder} is not inside a git work tree")
    return Repo(root=Path(lines[0]), head=lines[2].strip() if head else None,
                shallow=lines[1].strip() == "true")


def blob_at(repo: Repo, rev: str, rel: str, max_bytes: int,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes | None:
    """The bytes of `rel` at `rev` (None when the path is not in it); never a textconv."""
    try:
        return run(repo.root, ["cat-file", "blob", f"{rev}:{rel}"], timeout_s=timeout_s,
                   max_bytes=max_bytes)
    except GitError as e:
        msg = str(e)
        if "does not exist" in msg or "Not a valid object" in msg or "exists on disk, but not" in msg \
                or "bad file" in msg or "invalid object name" in msg.lower():
            return None
        raise


def rev_list(repo: Repo, limit: int, rev: str = "HEAD",
             timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """The newest `limit` commits reachable from `rev`, newest first."""
    out = run(repo.root, ["rev-list", f"--max-count={max(1, limit)}", rev, "--"],
              timeout_s=timeout_s, max_bytes=max(1 << 16, 66 * limit))
    return [h for h in out.decode().split() if HASH.fullmatch(h)]


def diff_hunks(old: bytes, new: bytes, timeout_s: float = DEFAULT_TIMEOUT_S
               ) -> list[tuple[int, int, int, int]]:
    """(old_start, old_lines, new_start, new_lines) of git's own diff of two texts (the
    one `git blame` makes of a working file against HEAD), run on private copies in a
    folder of their own: no repository, so no repository's attributes or config."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dsh-recall-diff-") as folder:
        a, b = Path(folder) / "a", Path(folder) / "b"
        a.write_bytes(old)
        b.write_bytes(new)
        out = run(Path(folder), ["diff", "--no-index", "--no-color", "--no-ext-diff",
                                 "--no-textconv", "-U0", "--", "a", "b"],
                  timeout_s=timeout_s, ok_codes=(0, 1), env_extra={
                      "GIT_CEILING_DIRECTORIES": str(Path(folder).parent)})
    hunks = []
    for line in out.decode("utf-8", "replace").splitlines():
        m = _HUNK.match(line)
        if m:
            hunks.append((int(m.group(1)), int(m.group(2) or 1), int(m.group(3)),
                          int(m.group(4) or 1)))
    return hunks


def old_line(hunks: Sequence[tuple[int, int, int, int]], line: int) -> int | None:
    """Where line `line` of the new text was in the old one, per a diff's hunks; None when
    a hunk added or changed it (pure)."""
    shift = 0
    for _old_start, old_lines, new_start, new_lines in hunks:
        if new_lines and new_start <= line < new_start + new_lines:
            return None
        before = (new_start + new_lines - 1 < line) if new_lines else new_start < line
        if not before:
            break
        shift += old_lines - new_lines
    return line + shift


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


def blame_line(repo: Repo, rel: str, line: int, rev: str = "HEAD",
               timeout_s: float = DEFAULT_TIMEOUT_S) -> BlameLine:
    """`git blame` of one line of `rel` at `rev` (renames followed, no textconv)."""
    out = run(repo.root, ["blame", "--porcelain", "--no-textconv", "-L", f"{line},{line}", rev,
                          "--", rel], timeout_s=timeout_s, max_bytes=1 << 20)
    rows = parse_blame(out)
    if not rows:
        raise GitError(f"git blame gave nothing for {rel}:{line}")
    return rows[0]


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
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


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
            m = _HUNK.match(line)
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


def log_commits(repo: Repo, hashes: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                max_bytes: int = 64 << 20, patch: bool = True) -> list[Commit]:
    """The commits named (message, author, dates, and with `patch` the hunks against the
    first parent; without it no hunks, and each commit is marked truncated)."""
    if not hashes:
        return []
    stdin = ("\n".join(hashes) + "\n").encode()
    args = LOG_ARGS if patch else ("--no-show-signature", f"--format={LOG_FORMAT}")
    out = run(repo.root, ["log", "--no-walk=unsorted", "--stdin", *args], stdin=stdin,
              timeout_s=timeout_s, max_bytes=max_bytes)
    commits = parse_log(out)
    if not patch:
        from dataclasses import replace

        commits = [replace(c, truncated=True) for c in commits]
    return commits

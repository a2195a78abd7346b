"""Reading a local git repository: git run as a subprocess, bounded, offline, and as a tool
we configure: the repository's own configuration is never read.

The repository is untrusted input (a tarball or a copied folder brings its own `.git`).
Its config can name files git opens (`include.path`, `blame.ignoreRevsFile`,
`mailmap.file`, `diff.orderFile`, `core.attributesFile`: a FIFO, `/dev/zero` or a
credentials file) and commands git runs, and `-c` overrides do not undo all of it (an
include is read while the file is parsed; `blame.ignoreRevsFile` is a list `-c` appends to).
So git never sees that config. Each call runs with:
- `GIT_DIR` a private folder of ours holding a config we write (format version, object
  format, bare), a copy of HEAD and links to the repository's refs, packed refs and
  shallow list; `GIT_OBJECT_DIRECTORY` the repository's objects. No system or global
  config either (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`);
- the environment's other redirections and helper commands removed, `-c` settings for
  what our reads depend on, and no transport (`protocol.allow=never`);
- a timeout, a cap on the bytes read from git's stdout, and stdin closed; git's stderr
  reaches the caller only as a fixed text and one scrubbed, shortened line.
The repository is found here, not by git: a `.git` folder, or a `.git` file's `gitdir:`
followed only inside the folders given (the workspace) or when it names this tree back
(a linked worktree, a submodule). The working tree is never handed to git: `blame` runs on
HEAD, and lines changed since are found by comparing the file's bytes with HEAD's blob.

Pure parsers (`parse_blame`, `parse_log`, in `git_parse`) turn git's output into rows.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError
from ..core.files import read_bounded
from .git_parse import HASH, HUNK_RE, LOG_ARGS, LOG_FORMAT, BlameLine, Commit, Hunk, parse_blame, parse_log

__all__ = ["GitError", "Repo", "BlameLine", "Commit", "Hunk", "find_repo", "parse_blame",
           "parse_log", "LOG_FORMAT"]

# Environment variables that point git at another repository or config, or run a command.
_DROP_ENV = ("GIT_DIR", "GIT_OBJECT_DIRECTORY", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
             "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_SSH",
             "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_EXEC_PATH", "GIT_CONFIG_PARAMETERS",
             "GIT_CONFIG_COUNT", "GIT_CONFIG", "GIT_PAGER", "GIT_EDITOR", "GIT_REPLACE_REF_BASE",
             "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_TRACE", "GIT_TRACE2",
             "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF", "GIT_ATTR_SOURCE", "GIT_CEILING_DIRECTORIES")
# What our reads depend on; no repository, system or global config is read at all.
SAFE_CONFIG = ("core.fsmonitor=false", "core.pager=cat", "core.hooksPath=/dev/null",
               "core.attributesFile=/dev/null", "mailmap.file=/dev/null", "mailmap.blob=",
               "diff.orderFile=/dev/null", "log.showSignature=false", "color.ui=never",
               "core.quotePath=false", "protocol.allow=never", "credential.helper=",
               "i18n.logOutputEncoding=UTF-8", "blame.markIgnoredLines=false",
               "blame.markUnblamableLines=false", "gc.auto=0", "maintenance.auto=false")
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MAX_BYTES = 16 << 20
MAX_META = 1 << 16  # bytes of HEAD, a `.git` file, `commondir` or the config read here
NULL_HASH = re.compile(r"0{40}|0{64}")
_HEAD = re.compile(r"ref: refs/[^\0\n]{1,1024}\n?|[0-9a-f]{40}\n?|[0-9a-f]{64}\n?")


class GitError(InputError):
    """git could not answer: not a repository, no such path or revision, a timeout, too
    much output, or git itself missing. The message says which."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_LAZY_FETCH": "1",
                "LC_ALL": "C", "LANG": "C", "PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    return env


def _withheld(_line: str) -> str:
    return ""


# What cleans git's stderr line before it leaves (policy/scrub.scrub, installed by
# services/lineage: readers sit below policy). Until installed, none of it leaves.
_clean: Callable[[str], str] = _withheld


def clean_stderr_with(clean: Callable[[str], str]) -> None:
    """Install the function that removes credentials from git's stderr line."""
    global _clean
    _clean = clean


def _failure(what: str, err: bytes) -> str:
    """A fixed text and git's first stderr line, scrubbed and cut short: git may quote a
    file it read, and that line reaches a model."""
    lines = err.decode("utf-8", "replace").strip().splitlines()
    first = _clean(" ".join(lines[0].split()))[:200] if lines else ""
    return f"git {what} failed" + (f": {first}" if first else "")


def run(where: Repo | Path, args: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES, stdin: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,)) -> bytes:
    """git's stdout for `args` on the repository `where` (read through a private git
    folder: see the module's docstring), or in a folder of ours holding no repository;
    at most `max_bytes` (more is a GitError), within `timeout_s` (then git is killed)."""
    timeout_s = min(timeout_s, 3600.0)
    cmd = ["git", "--no-pager"]
    for kv in SAFE_CONFIG:
        cmd += ["-c", kv]
    cmd += list(args)
    with tempfile.TemporaryDirectory(prefix="dsh-recall-git-") as tmp:
        env = _env()
        if isinstance(where, Repo):
            env.update(_private_git_dir(where, Path(tmp)))
            cwd = Path(tmp)
        else:  # diff --no-index of our own files: nothing above the folder is a repository
            cwd = where
            env["GIT_CEILING_DIRECTORIES"] = str(where.parent)
        return _run(cmd, cwd, env, args[0], timeout_s, max_bytes, stdin, ok_codes)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], what: str, timeout_s: float,
         max_bytes: int, stdin: bytes | None, ok_codes: tuple[int, ...]) -> bytes:
    try:
        proc = subprocess.Popen(cmd, cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                start_new_session=True)
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH); code lineage needs it") from None
    except OSError as e:
        raise GitError(f"cannot run git: {e.strerror or e}") from None
    try:
        out, err = _bounded(proc, stdin, timeout_s, max_bytes)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise GitError(f"git {what} took over {timeout_s:g} s; stopped it") from None
    if len(out) > max_bytes:
        raise GitError(f"git {what} wrote over {max_bytes:,} bytes; stopped reading")
    if proc.returncode not in ok_codes:
        raise GitError(_failure(what, err) if err.strip() else
                       f"git {what} failed: exit {proc.returncode}")
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
    """A repository's work tree: its top folder, its HEAD (None before a first commit),
    whether its history is shallow (a clone with --depth), and the git folders found for
    it (`git_dir` holds HEAD, `common_dir` the refs and objects)."""

    root: Path
    head: str | None
    shallow: bool
    git_dir: Path | None = field(default=None, compare=False)
    common_dir: Path | None = field(default=None, compare=False)
    sha256: bool = field(default=False, compare=False)


def _meta(path: Path) -> str:
    """A small regular file of a git folder (never a FIFO or a device), as text."""
    try:
        return read_bounded(path, MAX_META, "git file").decode("utf-8", "replace")
    except InputError:
        raise GitError(f"{path.name} of the repository is not a small regular file") from None


def _inside(p: Path, folders: Sequence[Path]) -> bool:
    return any(p == f or p.is_relative_to(f) for f in folders)


def _names_back(gd: Path, dot: Path) -> bool:
    """Whether git folder `gd` says it belongs to the work tree of `dot` (`.git`): a linked
    worktree's `gitdir` file, or a submodule's `core.worktree`."""
    try:
        if (gd / "gitdir").is_file():
            return Path(_meta(gd / "gitdir").strip()).resolve() == dot
        m = re.search(r"(?im)^\s*worktree\s*=\s*(.+?)\s*$", _meta(gd / "config"))
        return m is not None and (gd / m.group(1).strip('"')).resolve() == dot.parent
    except (GitError, OSError, ValueError):
        return False


def _git_dirs(dot: Path, within: Sequence[Path]) -> tuple[Path, Path]:
    """(git folder, common folder) of the `.git` entry `dot`, followed only inside `within`
    (or when the folder names `dot` back); GitError otherwise."""
    if dot.is_file():
        text = _meta(dot).strip()
        if not text.startswith("gitdir:"):
            raise GitError(f"{dot} is not a git folder or a `gitdir:` file")
        gd = (dot.parent / text[7:].strip()).resolve()
        linked = _names_back(gd, dot)
    elif dot.is_dir():
        gd, linked = dot.resolve(), False
    else:
        raise GitError(f"{dot} is not a git folder or a `gitdir:` file")
    if not (linked or _inside(gd, within)):
        raise GitError(f"{dot} points at a git folder outside the workspace; not followed")
    common = gd
    if (gd / "commondir").exists():
        common = (gd / _meta(gd / "commondir").strip()).resolve()
        if not (_inside(common, within) or (linked and gd.parent.parent == common)):
            raise GitError(f"{dot} shares a git folder outside the workspace; not followed")
    alternates = common / "objects" / "info" / "alternates"
    others = _meta(alternates).splitlines() if alternates.exists() else []
    for what, part in [("objects", common / "objects"), ("refs", common / "refs"),
                       *(("alternate objects", common / "objects" / o.strip()) for o in others
                         if o.strip() and not o.startswith("#"))]:
        if not _inside(part.resolve(), [*within, common]):
            raise GitError(f"the repository's {what} are outside the workspace; not followed")
    if not (gd / "HEAD").is_file() or not (common / "objects").is_dir():
        raise GitError(f"{dot} is not a usable git folder (no HEAD or objects)")
    return gd, common


def _private_git_dir(repo: Repo, tmp: Path) -> dict[str, str]:
    """Fill `tmp` as the git folder git reads: our config, HEAD, links to refs; the env."""
    gd = repo.git_dir or repo.root / ".git"
    common = repo.common_dir or gd
    head = _meta(gd / "HEAD")
    if not _HEAD.fullmatch(head):
        raise GitError("the repository's HEAD is neither a ref nor a commit hash")
    fmt = "\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n" \
        if repo.sha256 else "\trepositoryformatversion = 0\n"
    (tmp / "config").write_text(f"[core]\n\tbare = true\n{fmt}")
    (tmp / "HEAD").write_text(head if head.endswith("\n") else head + "\n")
    (tmp / "refs").symlink_to(common / "refs", target_is_directory=True)
    for name in ("packed-refs", "shallow"):
        if (common / name).is_file():
            (tmp / name).symlink_to(common / name)
    return {"GIT_DIR": str(tmp), "GIT_OBJECT_DIRECTORY": str(common / "objects")}


def find_repo(path: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
              within: Sequence[Path] | None = None) -> Repo:
    """The repository whose work tree holds `path` (a file or a folder); GitError when none.
    A `.git` file's or link's git folder is followed only inside `within` (default: the
    work tree itself) or when it names this work tree back."""
    try:
        folder = (path if path.is_dir() else path.parent).resolve()
        top = next((d for d in (folder, *folder.parents)
                    if os.path.lexists(d / ".git")), None)
        if top is None or ".git" in folder.relative_to(top).parts:
            raise GitError(f"{folder} is not inside a git repository (work tree)")
        dot = top / ".git"
        bounds = [Path(w).resolve() for w in within] if within else [top]
        gd, common = _git_dirs(dot, bounds)
        config = _meta(common / "config") if (common / "config").exists() else ""
    except OSError as e:  # a name too long, a loop of links, no permission
        raise GitError(f"{str(path)[:200]} cannot be looked up: {e.strerror or e}") from None
    sha256 = re.search(r"(?im)^\s*objectformat\s*=\s*sha256\s*$", config) is not None
    shallow = (common / "shallow").is_file() and (common / "shallow").stat().st_size > 0
    repo = Repo(root=top, head=None, shallow=shallow, git_dir=gd, common_dir=common,
                sha256=sha256)
    out = run(repo, ["rev-parse", "-q", "--verify", "HEAD^{commit}"], timeout_s=timeout_s,
              max_bytes=1 << 16, ok_codes=(0, 1))
    head = out.decode("ascii", "replace").strip()
    return Repo(root=top, head=head if HASH.fullmatch(head) else None, shallow=shallow,
                git_dir=gd, common_dir=common, sha256=sha256)


def blob_at(repo: Repo, rev: str, rel: str, max_bytes: int,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes | None:
    """The bytes of `rel` at `rev` (None when the path is not in it); never a textconv."""
    try:
        return run(repo, ["cat-file", "blob", f"{rev}:{rel}"], timeout_s=timeout_s,
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
    out = run(repo, ["rev-list", f"--max-count={max(1, limit)}", rev, "--"],
              timeout_s=timeout_s, max_bytes=max(1 << 16, 66 * limit))
    return [h for h in out.decode().split() if HASH.fullmatch(h)]


def diff_hunks(old: bytes, new: bytes, timeout_s: float = DEFAULT_TIMEOUT_S
               ) -> list[tuple[int, int, int, int]]:
    """(old_start, old_lines, new_start, new_lines) of git's own diff of two texts (the
    one `git blame` makes of a working file against HEAD), run on private copies in a
    folder of their own: no repository, so no repository's attributes or config."""
    with tempfile.TemporaryDirectory(prefix="dsh-recall-diff-") as folder:
        a, b = Path(folder) / "a", Path(folder) / "b"
        a.write_bytes(old)
        b.write_bytes(new)
        out = run(Path(folder), ["diff", "--no-index", "--no-color", "--no-ext-diff",
                                 "--no-textconv", "-U0", "--", "a", "b"],
                  timeout_s=timeout_s, ok_codes=(0, 1))
    hunks = []
    for line in out.decode("utf-8", "replace").splitlines():
        m = HUNK_RE.match(line)
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


# -- blame and log ----------------------------------------------------------------------

def blame_line(repo: Repo, rel: str, line: int, rev: str = "HEAD",
               timeout_s: float = DEFAULT_TIMEOUT_S) -> BlameLine:
    """`git blame` of one line of `rel` at `rev` (renames followed, no textconv)."""
    out = run(repo, ["blame", "--porcelain", "--no-textconv", "-L", f"{line},{line}", rev,
                          "--", rel], timeout_s=timeout_s, max_bytes=1 << 20)
    rows = parse_blame(out)
    if not rows:
        raise GitError(f"git blame gave nothing for {rel}:{line}")
    return rows[0]


def log_commits(repo: Repo, hashes: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S,
                max_bytes: int = 64 << 20, patch: bool = True) -> list[Commit]:
    """The commits named (message, author, dates, and with `patch` the hunks against the
    first parent; without it no hunks, and each commit is marked truncated)."""
    if not hashes:
        return []
    stdin = ("\n".join(hashes) + "\n").encode()
    args = LOG_ARGS if patch else ("--no-show-signature", f"--format={LOG_FORMAT}")
    out = run(repo, ["log", "--no-walk=unsorted", "--stdin", *args], stdin=stdin,
              timeout_s=timeout_s, max_bytes=max_bytes)
    commits = parse_log(out)
    if not patch:
        from dataclasses import replace

        commits = [replace(c, truncated=True) for c in commits]
    return commits

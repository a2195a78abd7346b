"""Where dsh-recall keeps its data: the recall home, never inside the user's repository."""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path

# Everything under the recall home is the user's alone: an index holds the text of every note
# and file it read, so a 0644 database would show a 0600 note to every local user.
DIR_MODE = 0o700
FILE_MODE = 0o600
_swept: set[str] = set()
_swept_lock = threading.Lock()


def recall_home() -> Path:
    """`$DSH_RECALL_HOME`, else `$DSH_HOME/dsh-recall`, else `~/.dsh/dsh-recall`."""
    env = os.environ.get("DSH_RECALL_HOME")
    if env:
        return Path(env).expanduser()
    dsh_home = os.environ.get("DSH_HOME")
    if dsh_home:
        return Path(dsh_home).expanduser() / "dsh-recall"
    return Path.home() / ".dsh" / "dsh-recall"


def stable_key(label: str, identity: str) -> str:
    """A readable, stable directory or file name: a cleaned label plus a hash of identity."""
    import hashlib  # here: the warm path's client reads recall_home and nothing else

    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-") or "root"
    return f"{name[:40]}-{digest}"


def workspace_key(workspace: Path) -> str:
    """A stable directory name for a workspace, keyed by its resolved path."""
    resolved = str(Path(workspace).resolve())
    return stable_key(Path(resolved).name, resolved)


def workspace_dir(workspace: Path, home: Path | None = None) -> Path:
    """The per-workspace data folder (holds index.sqlite and its lock)."""
    return (home or recall_home()) / "workspaces" / workspace_key(workspace)


def private_umask() -> None:
    """Drop the group and other bits from this process's umask, for good.

    Files that SQLite (-wal, -shm, journals), onnxruntime or a plain `write_text` create under
    the recall home then start private; a umask changed and restored around each write would
    race between threads. Only ever tightens: bits the user already masks stay masked."""
    old = os.umask(0o077)
    if old | 0o077 != 0o077:
        os.umask(old | 0o077)


def _home_of(path: Path) -> Path | None:
    """The recall home when `path` lies inside it (or is it), else None."""
    try:
        home = recall_home().absolute()
        p = path.absolute()
    except (OSError, RuntimeError):
        return None
    return home if p == home or home in p.parents else None


def _chmod_private(path: str, st: os.stat_result) -> None:
    want = DIR_MODE if stat.S_ISDIR(st.st_mode) else FILE_MODE
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077 == 0:
        return  # not ours to change, or private already (a tighter owner mode stays)
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) & want, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass  # best effort: a read-only mount keeps its modes; the 0700 home still guards


# In a recall home once every path in it has been made private: later files start private
# through the umask, so no later process needs to walk the home again.
SWEPT_STAMP = ".private-modes"


def make_private(root: Path) -> None:
    """Take the group and other bits off `root` and everything below it (folders 0700,
    files 0600 at most). Symbolic links are neither followed nor changed; a path owned by
    another uid is left alone. Each tree is swept once per process: later files start
    private through the umask (`private_umask`), and a recall home once for good: a stamp
    in it (SWEPT_STAMP) spares every later process (each CLI call is one) the walk."""
    key = str(root.absolute())
    with _swept_lock:
        if key in _swept or any(key.startswith(s + os.sep) for s in _swept):
            return
        _swept.add(key)
    stamp = os.path.join(key, SWEPT_STAMP)
    if os.path.exists(stamp):
        return
    try:
        st = os.lstat(key)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        return
    _chmod_private(key, st)
    if not stat.S_ISDIR(st.st_mode):
        return
    stack = [key]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(est.st_mode):
                continue
            _chmod_private(e.path, est)
            if stat.S_ISDIR(est.st_mode):
                stack.append(e.path)
    if _home_of(Path(key)) == Path(key):  # the whole home is swept: say so for good
        try:
            os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT, FILE_MODE))
        except OSError:
            pass  # a read-only home: the next process sweeps again


def _mkdir_private(path: Path) -> None:
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        try:
            os.chmod(d, DIR_MODE)  # mkdir's mode passes through the umask
        except OSError:
            pass
    path.mkdir(parents=True, exist_ok=True)  # raises what is really wrong (a file in the way)


def ensure_dir(path: Path) -> Path:
    """Create a folder under the recall home, private (0700), and make the home private:
    the umask is tightened and what an older version left readable is chmodded once."""
    private_umask()
    _mkdir_private(path)
    home = _home_of(path)
    make_private(home if home is not None else path)
    return path


def private_file(path: Path) -> None:
    """Take the group and other bits off one file we just created or opened (never
    following a symbolic link); a missing file is fine."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISLNK(st.st_mode):
        _chmod_private(str(path), st)


def write_private(path: Path, data: bytes) -> None:
    """Write a whole file under the recall home atomically (aside, then renamed), created
    0600, its folder made private."""
    ensure_dir(path.parent)
    write_atomic(path, data)


def write_atomic(path: Path, data: bytes, durable: bool = False) -> None:
    """Write a whole file atomically: to a fresh 0600 file beside it (never one already there,
    never through a link), then renamed over it; with `durable`, synced to disk first. The
    folder must exist. Two writers of one path each rename a whole file: the last one wins."""
    import secrets

    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

"""Where a code search looks: the workspace a command means, and the scope inside it (--focus,
--path, or the project around the current directory)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from ...core.config import Config
from ...core.errors import InputError
from ...core.paths import recall_home, workspace_dir
from ...readers.workspace import iter_marker_dirs, parse_source_roots

_VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def find_workspace(start: Path, home: Path | None = None,
                   markers: Iterable[str] | None = None) -> Path:
    """The workspace a command run in `start` means. Walking up from `start`, the first
    directory that has an index or is a version-control root (`.git`, `.hg`, ...); else
    `start` itself. So a search from `repo/src/` uses the repository's index (and `src/` as
    its focus scope), and a repository never borrows an index above it: `parent/newclone`
    with its own `.git` is its own workspace even after a search from `parent/` indexed
    everything below it.

    One more boundary below an index that is not a repository root: a project-marker
    directory (`markers`, default the `focus_markers` default: pyproject.toml, go.mod, ...)
    that the index holds no file of is its own workspace (a project cloned or copied in after
    the parent was indexed). A marker directory the index covers stays a focus scope of it
    (a monorepo's sub-project)."""
    start = Path(start).resolve()
    home = home or recall_home()
    marks = tuple(markers if markers is not None else Config().focus_markers)
    marker: Path | None = None  # the nearest project-marker directory on the way up
    for d in [start, *start.parents]:
        wd = workspace_dir(d, home)
        vcs = any((d / m).exists() for m in _VCS_MARKERS)
        # index.sqlite, or the job file an index in a PostgreSQL store leaves locally
        if (wd / "index.sqlite").exists() or (wd / "index-job.json").exists():
            if marker is not None and not vcs and not _index_covers(wd / "index.sqlite",
                                                                    marker.relative_to(d)):
                return marker
            return d
        if vcs:
            return d
        if marker is None and any((d / m).exists() for m in marks):
            marker = d
    return start


def _index_covers(db: Path, rel: Path) -> bool:
    """Whether the SQLite code index at `db` holds a file under `rel`. An index elsewhere (a
    PostgreSQL store) or one that cannot be read counts as covering it: the index is used, as
    before this rule."""
    if not db.exists():
        return True
    from ...stores.sqlite.chunks import SqliteChunkStore

    try:
        store = SqliteChunkStore(db)
        try:
            return store.chunk_ids_under(rel.as_posix()).size > 0
        finally:
            store.close()
    except Exception:  # an unreadable or foreign index: keep to the index
        return True


def indexed_workspaces(home: Path | None = None) -> list[Path]:
    """Every workspace with a code index under the recall home, in index-folder order; an
    index that cannot be read is left out."""
    from ...stores.sqlite.chunks import SqliteChunkStore

    out: list[Path] = []
    for db in sorted(((home or recall_home()) / "workspaces").glob("*/index.sqlite")):
        try:
            store = SqliteChunkStore(db)
            try:
                ws = store.get_meta("workspace")
            finally:
                store.close()
        except Exception:  # an unreadable or foreign index is not offered
            continue
        if ws and Path(ws) not in out:
            out.append(Path(ws))
    return out


def resolve_scope(workspace: Path, cfg: Config, path: str | None, focus: str | None,
                  cwd: Path | None) -> tuple[str | None, str | None, str | None]:
    """(path prefix filter, focus label, where the scope came from: "focus", "path",
    "cwd" or None) from --focus, --path or the cwd's nearest marker directory.

    A relative --focus / --path is read from the cwd when it names something there,
    else from the workspace root (so `--focus pyclick` works from `gohttps/`). `--focus .`
    is the whole workspace wherever the cwd is, as its help says (`--path .` stays the cwd,
    as a shell reads it)."""
    if focus and Path(focus) == Path("."):
        return None, ".", "focus"
    for value, origin in ((focus, "focus"), (path, "path")):
        if value:
            r = scope_of(workspace, cfg, value, origin, cwd)
            return r or None, (r or ".") if origin == "focus" else None, origin
    if cwd is not None:
        try:
            cur = Path(cwd).resolve()
            cur.relative_to(workspace)
        except ValueError:
            return None, None, None
        while cur != workspace:
            if any((cur / m).exists() for m in cfg.focus_markers):
                r = cur.relative_to(workspace).as_posix()
                return r, r, "cwd"
            cur = cur.parent
    return None, None, None


def scope_of(workspace: Path, cfg: Config, value: str, flag: str, cwd: Path | None) -> str:
    """`value` as a path relative to the workspace (source roots as `label/...`)."""
    given = Path(os.path.expanduser(value))
    try:
        if given.is_absolute():
            full = given
        elif cwd is not None and (Path(cwd) / given).exists():
            full = Path(cwd) / given
        else:
            full = workspace / given
        full = full.resolve()
    except (OSError, RuntimeError) as e:  # a name too long, a symlink loop
        raise InputError(f"--{flag} {value[:80]!r} is not a usable path: "
                         f"{getattr(e, 'strerror', None) or e}") from e
    try:
        r = full.relative_to(workspace).as_posix()
        return "" if r == "." else r
    except ValueError:
        pass
    roots, _ = parse_source_roots(cfg.source_roots, workspace)
    for root in roots:
        try:
            return f"{root.label}/{full.relative_to(root.path).as_posix()}".rstrip("/.")
        except ValueError:
            continue
    raise InputError(f"--{flag} {value} is outside the workspace {workspace} "
                     "and its source roots")


def check_scope(workspace: Path, paths: Callable[[], Iterable[str]], markers: Iterable[str],
                prefix: str | None, value: str | None, flag: str | None) -> None:
    """An explicit --focus / --path must name a directory of the workspace or indexed
    files; otherwise it is a typo, and answering "no results" would hide it. `paths`
    gives the indexed paths (read only when needed)."""
    if not prefix or not value or flag not in ("focus", "path"):
        return
    indexed = list(paths())
    if any(p == prefix or p.startswith(prefix + "/") for p in indexed):
        return
    if (workspace / prefix).exists():
        return
    raise InputError(f"unknown scope '{value}' for --{flag}: neither a path from the "
                     f"current directory nor from the workspace root {workspace}; "
                     f"scopes: {', '.join(scopes(indexed, markers)) or '(none)'}")


def scopes(paths: Iterable[str], markers: Iterable[str]) -> list[str]:
    """Directories holding a focus marker (go.mod, pyproject.toml, ...) among indexed files."""
    return sorted(d or "." for d in iter_marker_dirs(list(paths), list(markers)))

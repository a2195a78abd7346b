"""Note roots: find the markdown files of one or more memory folders.

A root is a folder (or a single .md file), absolute or relative to the workspace. A missing
root is reported, never fatal. Exclude globs are gitignore-style, matched against the path
inside the root. Hidden folders (`.git`, `.obsidian`, ...) are skipped and symlinks are
never followed, so a walk cannot leave its roots or loop; a root or folder on a kernel
pseudo-filesystem (/proc, /sys, /dev) is never walked.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from ..core.types import SourceFile
from .workspace import is_pseudo_fs, pseudo_devs

NOTE_SUFFIXES = (".md", ".markdown")


@dataclass
class NotesWalk:
    files: list[SourceFile] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    roots: list[dict] = field(default_factory=list)  # {label, path, ok}


def resolve_roots(roots: Sequence[str | Path], workspace: Path | None = None) -> list[Path]:
    """Absolute, resolved, de-duplicated roots in the given order."""
    base = Path(workspace) if workspace is not None else Path.cwd()
    out: list[Path] = []
    for r in roots:
        p = Path(os.path.expanduser(str(r)))
        if not p.is_absolute():
            p = base / p
        p = p.resolve()
        if p not in out:
            out.append(p)
    return out


def root_labels(roots: Sequence[Path]) -> list[str]:
    """A short, unique label per root (its folder name), used to prefix display paths."""
    labels: list[str] = []
    for r in roots:
        base = re.sub(r"[^\w.-]+", "-", r.stem if r.suffix in NOTE_SUFFIXES else r.name) or "root"
        label, n = base, 2
        while label in labels:
            label, n = f"{base}-{n}", n + 1
        labels.append(label)
    return labels


def walk_notes(roots: Sequence[Path], exclude: Sequence[str] = ()) -> NotesWalk:
    """Every markdown file under the roots. With one root, display paths are relative to it;
    with several, they are `<label>/<relative path>`."""
    rep = NotesWalk()
    spec = pathspec.GitIgnoreSpec.from_lines(list(exclude))
    labels = root_labels(roots)
    for root, label in zip(roots, labels):
        prefix = "" if len(roots) == 1 else label + "/"
        try:
            st = os.stat(root)
        except OSError:
            rep.problems.append(f"notes root {root} does not exist; skipped")
            rep.roots.append({"label": label, "path": str(root), "ok": False})
            continue
        if is_pseudo_fs(root, st.st_dev):
            rep.problems.append(f"notes root {root} is on a kernel pseudo-filesystem (/proc, /sys, /dev); skipped")
            rep.roots.append({"label": label, "path": str(root), "ok": False})
            continue
        rep.roots.append({"label": label, "path": str(root), "ok": True})
        if stat.S_ISREG(st.st_mode):
            if root.suffix.lower() in NOTE_SUFFIXES and not spec.match_file(root.name):
                rep.files.append(SourceFile(prefix + root.name, str(root), label, st.st_size,
                                            st.st_mtime_ns))
            continue
        _walk_dir(root, prefix, label, spec, rep)
    rep.files.sort(key=lambda f: f.path)
    return rep


def _walk_dir(root: Path, prefix: str, label: str, spec: pathspec.PathSpec, rep: NotesWalk) -> None:
    stack = [root]
    pseudo = pseudo_devs()
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError as e:
            rep.problems.append(f"cannot read {d}: {e.strerror or e}")
            continue
        for ent in entries:
            if ent.name.startswith("."):
                continue
            rel = Path(ent.path).relative_to(root).as_posix()
            try:
                if ent.is_dir(follow_symlinks=False):
                    if ent.stat(follow_symlinks=False).st_dev in pseudo:
                        continue  # /proc or /sys mounted inside a root
                    if not spec.match_file(rel + "/"):
                        stack.append(Path(ent.path))
                    continue
                if not ent.is_file(follow_symlinks=False):
                    continue
                if not ent.name.lower().endswith(NOTE_SUFFIXES) or spec.match_file(rel):
                    continue
                st = ent.stat(follow_symlinks=False)
            except OSError:
                continue
            rep.files.append(SourceFile(prefix + rel, ent.path, label, st.st_size, st.st_mtime_ns))

"""Which note roots an index covers: the configured ones, else those last indexed by hand,
and the stable key naming the index of a list of roots."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ...core.paths import ensure_dir, recall_home, stable_key

NO_ROOTS = ("no notes roots: index a folder (`dsh-recall notes index DIR`), pass --root DIR "
            "or set notes.roots")
_REMEMBERED = "default-roots.json"


def remember_roots(roots: Sequence[Path], home: Path | None = None) -> None:
    """Keep the roots last indexed by hand as the default when notes.roots is not set."""
    d = ensure_dir((home or recall_home()) / "notes")
    tmp = d / f"{_REMEMBERED}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps([str(r) for r in roots]), encoding="utf-8")
    os.replace(tmp, d / _REMEMBERED)


def remembered_roots(home: Path | None = None) -> list[str]:
    """The roots `remember_roots` kept, or [] (a missing or unreadable file is no default)."""
    try:
        data = json.loads(((home or recall_home()) / "notes" / _REMEMBERED).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return [str(r) for r in data] if isinstance(data, list) else []


def notes_key(roots: Sequence[Path]) -> str:
    """A stable file name for the index of this list of (resolved) roots."""
    return stable_key(roots[0].name if roots else "none", "\n".join(str(r) for r in roots))

"""Each note's access level (policy/access.py): by its name, and for a note public by name,
by what else on disk is the same file (a hard link or a symlink under a personal name makes
it personal)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from ...core.config import NotesConfig
from ...policy import access
from ...stores.contracts import ChunkStore, FileRow


class NoteLevels:
    """The levels of one notes index's files."""

    def __init__(self, store: ChunkStore, ncfg: NotesConfig) -> None:
        self.store = store
        self.ncfg = ncfg
        self.by_name = access.level_matcher(ncfg.levels, ncfg.default_level)

    def all(self, files: dict[str, FileRow] | None = None) -> dict[str, str]:
        """Every indexed note's level, by name, real path and file identity (hard links).

        A note personal by name is personal whatever else holds, and never makes another
        note personal (only notes public by name are looked up on disk and grouped by
        identity in access.effective_levels), so only those are passed on."""
        files = self.store.files() if files is None else files
        out: dict[str, str] = {}
        items: list[access.NoteFile] = []
        for path, row in files.items():
            if self.by_name(path) != access.PUBLIC:
                out[path] = access.PERSONAL
                continue
            try:
                st = os.stat(row.abs_path)
                real = os.path.basename(os.path.realpath(row.abs_path))
                items.append(access.NoteFile(path, real, st.st_dev, st.st_ino, st.st_nlink))
            except OSError:
                items.append(access.NoteFile(path, path.rsplit("/", 1)[-1]))
        out.update(access.effective_levels(items, self.ncfg.levels, self.ncfg.default_level))
        return out

    def of(self, paths: Iterable[str]) -> dict[str, str]:
        """`all()` for these notes: personal by name needs nothing more; a note public by
        name needs every note's identity (a link elsewhere can make it personal)."""
        paths = set(paths)
        if all(self.by_name(p) != access.PUBLIC for p in paths):
            return {p: access.PERSONAL for p in paths}
        every = self.all()
        return {p: every.get(p, access.PERSONAL) for p in paths}

"""Code lineage: one git repository's commits and their hunks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class CommitRow:
    """One indexed commit: who, when (Unix seconds), the message, the paths it touched."""

    hash: str
    parents: tuple[str, ...]
    author: str
    author_mail: str
    author_time: int
    committer_time: int
    message: str
    files: tuple[str, ...] = ()
    truncated: bool = False  # its hunks or their text were cut to the reader's bounds


@dataclass(frozen=True)
class HunkRow:
    """One hunk of a commit's diff against its first parent (no context lines)."""

    commit: str
    path: str  # after the commit ("" for a deletion)
    old_path: str  # before it ("" for an addition)
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    added: str  # the added lines, bounded
    removed: str  # the removed lines, bounded


class LineageStore(Protocol):
    """The commits of one repository (stores/sqlite/lineage.py, stores/postgres/lineage.py):
    written a batch per transaction, read back by hash, by path, and by words of their
    messages. Errors of the database come out as StoreError."""

    @property
    def path(self) -> Any: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def known(self, hashes: Sequence[str]) -> set[str]: ...
    def put_commits(self, commits: Sequence[CommitRow], hunks: Sequence[HunkRow]) -> int: ...
    def commit(self, hash: str) -> CommitRow | None: ...
    def hunks(self, commit: str, path: str | None = None) -> list[HunkRow]: ...
    def commits_touching(self, path: str, limit: int) -> list[CommitRow]: ...
    def search(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...

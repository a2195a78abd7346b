"""Shared by the lineage modules: where a repository's lineage store lives, opening it, and
the row conversions between the git reader and the store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ...core.config import Config
from ...core.paths import recall_home, stable_key
from ...policy.scrub import scrub
from ...readers import git
from ...readers.git import Commit
from ...stores import registry
from ...stores.contracts import CommitRow, HunkRow, LineageStore

git.clean_stderr_with(scrub)  # git may quote a file it read: no credential leaves


def repo_key(root: Path) -> str:
    resolved = str(Path(root).resolve())
    return stable_key(Path(resolved).name, resolved)


def db_path(root: Path) -> Path:
    """The lineage database of the repository at `root`, under the recall home."""
    return recall_home() / "lineage" / f"{repo_key(root)}.sqlite"


def open_store(cfg: Config, root: Path) -> LineageStore:
    """The configured store of `root`'s commits (SQLite under the recall home, or a
    namespace of the PostgreSQL database `store`)."""
    store: LineageStore = registry.lineage_store(
        cfg.store, registry.lineage_namespace(repo_key(root)), db_path(root))
    return store


def rows(commit: Commit) -> tuple[CommitRow, list[HunkRow]]:
    """The store's rows of a commit the git reader read."""
    row = CommitRow(hash=commit.hash, parents=commit.parents, author=commit.author,
                    author_mail=commit.author_mail, author_time=commit.author_time,
                    committer_time=commit.committer_time, message=commit.message,
                    files=commit.files, truncated=commit.truncated)
    hunks = [HunkRow(commit=commit.hash, path=h.path, old_path=h.old_path,
                     old_start=h.old_start, old_lines=h.old_lines, new_start=h.new_start,
                     new_lines=h.new_lines, added=h.added, removed=h.removed)
             for h in commit.hunks]
    return row, hunks


def iso(seconds: int | float | None) -> str | None:
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary(message: str) -> str:
    return message.strip().split("\n", 1)[0][:300]

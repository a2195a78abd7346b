"""Indexing a repository's commits incrementally: the newest `max_commits` first, within a
time budget, older ones on demand.

What is indexed is keyed by commit hash, so a run only reads the commits the store does not
hold yet: after a pull, the new ones; after a rebase, the rewritten ones. The store records
the HEAD and the depth a complete run reached (`meta`), so a `why` on an unchanged
repository costs one meta read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...readers import git
from ...stores.contracts import LineageStore
from .common import rows

BATCH = 100  # commits read from git and written per transaction


@dataclass
class IndexReport:
    commits: int = 0  # added by this run
    wanted: int = 0  # commits in the window asked for
    missing: int = 0  # of them still not indexed (the budget ran out)
    skipped: list[str] = field(default_factory=list)  # why some could not be read

    def to_dict(self) -> dict[str, object]:
        return {"added": self.commits, "window": self.wanted, "pending": self.missing,
                "notes": self.skipped}


def is_current(store: LineageStore, repo: git.Repo, depth: int) -> bool:
    """Whether a complete run already covered `depth` commits back from today's HEAD."""
    if repo.head is None:
        return True
    if store.get_meta("head") != repo.head:
        return False
    try:
        return int(store.get_meta("depth") or 0) >= depth
    except ValueError:
        return False


def index_commits(store: LineageStore, repo: git.Repo, depth: int, budget_s: float,
                  timeout_s: float = git.DEFAULT_TIMEOUT_S) -> IndexReport:
    """Index the newest `depth` commits reachable from HEAD that the store lacks, newest
    first, until done or `budget_s` has passed (the rest wait for the next run)."""
    report = IndexReport()
    if repo.head is None or is_current(store, repo, depth):
        return report
    start = time.monotonic()
    hashes = git.rev_list(repo, depth, timeout_s=timeout_s)
    report.wanted = len(hashes)
    have = store.known(hashes)
    todo = [h for h in hashes if h not in have]
    done = 0
    for i in range(0, len(todo), BATCH):
        if time.monotonic() - start > budget_s:
            break
        batch = todo[i:i + BATCH]
        commits = read_commits(repo, batch, max(timeout_s, min(budget_s, 600.0)), report.skipped)
        commit_rows, hunk_rows = [], []
        for c in commits:
            row, hunks = rows(c)
            commit_rows.append(row)
            hunk_rows += hunks
        report.commits += store.put_commits(commit_rows, hunk_rows)
        done += len(batch)
        if len(commits) < len(batch):
            report.skipped.append(f"git gave {len(commits)} of {len(batch)} commits asked for")
    report.missing = len(todo) - done
    if report.missing == 0:
        store.set_meta("head", repo.head)
        store.set_meta("depth", str(max(depth, len(hashes))))
    return report


def read_commits(repo: git.Repo, hashes: list[str], timeout_s: float,
                 notes: list[str]) -> list[git.Commit]:
    """The commits with their hunks; when git cannot give a batch's patch within its bounds
    (a vendored import of a million lines), each commit alone, and one still too big
    without its hunks (marked truncated), so one commit never stops the index."""
    try:
        return git.log_commits(repo, hashes, timeout_s=timeout_s)
    except git.GitError as e:
        if len(hashes) > 1:
            return [c for h in hashes for c in read_commits(repo, [h], timeout_s, notes)]
        notes.append(f"{hashes[0][:10]}: indexed without its hunks ({e})")
        return git.log_commits(repo, hashes, timeout_s=timeout_s, patch=False)


def fetch_commit(store: LineageStore, repo: git.Repo, sha: str,
                 timeout_s: float = git.DEFAULT_TIMEOUT_S) -> bool:
    """Index one commit on demand (one older than the window a `why` found); whether it is
    in the store now."""
    if store.known([sha]):
        return True
    commits = read_commits(repo, [sha], timeout_s, [])
    for c in commits:
        row, hunks = rows(c)
        store.put_commits([row], hunks)
    return bool(commits)

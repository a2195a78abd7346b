"""The lineage source: a git repository's commits behind the one source contract.

`LineageService(cfg, workspace)`: `index()` brings the workspace repository's commit index
up to date (the newest `lineage.max_commits` first, within a budget; `commits=N` goes
further back), `search()` ranks commits by their messages, `why()` answers which commit
last changed a line and which agent session produced it, `status()`, `close()`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.config import Config, load_config
from ...core.errors import InputError, StoreError
from ...readers import git
from ...stores.contracts import CommitRow, HunkRow, LineageStore
from ..access.channel import Viewer
from ..base import Answer, backlog_item
from . import indexing, link
from .common import db_path, iso, open_store, summary
from .why import locate

INDEX_COMMAND = "dsh-recall lineage index"
INDEX_JOB = "lineage.index"
MESSAGE_CHARS = 1500
HUNK_CHARS = 800


class LineageService:
    """Code lineage as a source, for the repository holding `workspace` (and, for `why`,
    any repository under the allowed roots)."""

    name = "lineage"

    def __init__(self, cfg: Config | None = None, workspace: Path | None = None):
        self.cfg = cfg if cfg is not None else load_config(workspace=workspace)
        self.workspace = Path(workspace or Path.cwd()).resolve()
        self._stores: dict[Path, LineageStore] = {}

    def _timeout(self) -> float:
        return self.cfg.lineage.git_timeout_s

    def store_for(self, repo: git.Repo) -> LineageStore:
        root = repo.root.resolve()
        if root not in self._stores:
            self._stores[root] = open_store(self.cfg, root)
        return self._stores[root]

    def repo(self) -> git.Repo:
        return git.find_repo(self.workspace, timeout_s=self._timeout())

    # -- the source contract -----------------------------------------------------------------
    def index(self, commits: int | None = None, budget_s: float | None = None) -> dict[str, Any]:
        """Index the newest `commits` (default `lineage.max_commits`) of the workspace's
        repository the store lacks, within `budget_s` (default: no limit but git's)."""
        repo = self.repo()
        store = self.store_for(repo)
        depth = commits or self.cfg.lineage.max_commits
        t0 = time.monotonic()
        report = indexing.index_commits(store, repo, depth, budget_s or float("inf"), self._timeout())
        return {"repo": str(repo.root), "head": repo.head, "shallow": repo.shallow,
                **report.to_dict(), **store.stats(), "elapsed_ms": round((time.monotonic() - t0) * 1000, 1)}

    def search(self, query: str, *, viewer: Viewer | None = None, limit: int | None = None,
               offset: int = 0) -> Answer:
        """Commits of the workspace's repository whose messages match `query`, best first."""
        from ...rank.lexical import query_terms

        t0 = time.monotonic()
        limit = limit or self.cfg.limit
        repo = self.repo()
        store = self.store_for(repo)
        notes: list[str] = []
        backlog = []
        if not indexing.is_current(store, repo, self.cfg.lineage.max_commits):
            report = indexing.index_commits(store, repo, self.cfg.lineage.max_commits,
                                            self.cfg.lineage.index_budget_s, self._timeout())
            if report.missing:
                hint = f"`{INDEX_COMMAND}` indexes them"
                notes.append(f"{report.missing} commits are not indexed yet; {hint}")
                backlog.append(backlog_item("lineage", "commits", report.missing, INDEX_COMMAND,
                                            INDEX_JOB, hint))
        hits = store.search(query_terms(query), offset + limit + 1)
        results = []
        for sha, score in hits[offset:offset + limit]:
            c = store.commit(sha)
            if c is not None:
                results.append({**commit_out(c), "score": round(score, 4)})
        return Answer(source="lineage", query=query, results=results, notes=notes,
                      layers=["lexical"], backlog=backlog, offset=offset,
                      next_offset=offset + limit if len(hits) > offset + limit else None,
                      elapsed_ms=round((time.monotonic() - t0) * 1000, 1))

    def status(self) -> dict[str, Any]:
        try:
            repo = self.repo()
        except InputError as e:
            return {"repo": None, "error": str(e)}
        out = {"repo": str(repo.root), "head": repo.head, "shallow": repo.shallow}
        where = db_path(repo.root)
        if not self.cfg.store and repo.root.resolve() not in self._stores and not where.exists():
            # Looking never creates the database: a repository never indexed says so.
            return {**out, "db": str(where), "indexed": False, "indexed_head": None,
                    "commits": 0, "hunks": 0}
        store = self.store_for(repo)
        head = store.get_meta("head")
        return {**out, "db": str(store.path), "indexed": head is not None, "indexed_head": head,
                **store.stats()}

    def close(self) -> None:
        for s in self._stores.values():
            s.close()
        self._stores.clear()

    def __enter__(self) -> LineageService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- why -----------------------------------------------------------------------------------
    def why(self, path: str, line: int, *, cwd: Path | None = None,
            roots: Sequence[Path] | None = None, viewer: Viewer | None = None,
            sessions: bool = True) -> dict[str, Any]:
        """The commit that last changed line `line` of `path` (relative to `cwd`), its
        message and hunk, and the agent sessions that produced the change, as the viewer
        may see them. `roots`: the folders the path must be under (None: anywhere)."""
        t0 = time.monotonic()
        lc = self.cfg.lineage
        loc = locate(path, line, cwd=cwd or self.workspace, roots=roots, timeout_s=lc.git_timeout_s)
        out: dict[str, Any] = {"path": loc.rel, "line": line, "repo": str(loc.repo.root),
                               "text": loc.text[:400], "notes": []}
        notes: list[str] = out["notes"]
        if loc.head_line is None:
            out["status"] = "uncommitted"
            notes.append("not committed yet: " + (
                "the repository has no commits" if loc.repo.head is None else
                f"{loc.rel} is not in HEAD" if not loc.tracked else
                "the working copy changed this line since HEAD"))
            out["elapsed_ms"] = round((time.monotonic() - t0) * 1000, 1)
            return out
        blame = git.blame_line(loc.repo, loc.rel, loc.head_line, timeout_s=lc.git_timeout_s)
        store = self.store_for(loc.repo)
        pending = self._refresh(store, loc.repo)
        if pending:
            notes.append(f"{pending} recent commits are not indexed yet (lineage.index_budget_s "
                         f"ran out); `{INDEX_COMMAND}` indexes them")
        commit = store.commit(blame.commit)
        if commit is None:
            try:
                if indexing.fetch_commit(store, loc.repo, blame.commit, lc.git_timeout_s):
                    commit = store.commit(blame.commit)
            except InputError as e:  # git could not read it: what blame said stands
                notes.append(f"the commit could not be indexed ({e}); from git blame only")
        out["status"] = "committed"
        out["commit"] = commit_out(commit) if commit else blame_commit(blame)
        out["commit"]["orig_path"] = blame.filename
        out["commit"]["orig_line"] = blame.orig_line
        if loc.head_line != line:
            out["head_line"] = loc.head_line
        if blame.boundary:
            out["commit"]["boundary"] = True
            if loc.repo.shallow:
                notes.append("the history is shallow: the line may be older than this commit, "
                             "the oldest one this clone has")
        hunk = find_hunk(store.hunks(blame.commit, blame.filename), blame.filename, blame.orig_line)
        if hunk is not None:
            out["hunk"] = hunk_out(hunk, blame.orig_line)
        if sessions and commit is not None:
            out["sessions"] = self._sessions(commit, loc.rel, loc.text, viewer, notes)
        out["elapsed_ms"] = round((time.monotonic() - t0) * 1000, 1)
        return out

    def _refresh(self, store: LineageStore, repo: git.Repo) -> int:
        """Index new commits within the budget; how many of the window still wait."""
        lc = self.cfg.lineage
        if indexing.is_current(store, repo, lc.max_commits):
            return 0
        return indexing.index_commits(store, repo, lc.max_commits, lc.index_budget_s,
                                      lc.git_timeout_s).missing

    def _sessions(self, commit: CommitRow, rel: str, text: str, viewer: Viewer | None,
                  notes: list[str]) -> list[dict[str, Any]]:
        from ..history.common import db_path
        from ..history.common import open_store as open_history

        if self.cfg.store is None and not db_path().exists():
            return []  # nothing imported: no history to look in (and none to create)
        lc = self.cfg.lineage
        try:
            hist = open_history(cfg=self.cfg)
        except StoreError as e:
            notes.append(f"history unavailable: {e}")
            return []
        try:
            return link.linked_sessions(hist, commit, rel, text, viewer=viewer,
                                        window_s=lc.session_window_minutes * 60,
                                        max_turns=lc.max_turns, turn_chars=lc.turn_chars)
        finally:
            hist.close()


def find_hunk(hunks: Sequence[HunkRow], path: str, line: int) -> HunkRow | None:
    """The hunk of `path` whose new lines hold `line` (pure)."""
    for h in hunks:
        if h.path == path and h.new_start <= line < h.new_start + max(1, h.new_lines):
            return h
    return None


def commit_out(c: CommitRow) -> dict[str, Any]:
    msg = c.message.strip()
    return {"hash": c.hash, "short": c.hash[:10], "author": c.author, "author_mail": c.author_mail,
            "date": iso(c.author_time), "committed": iso(c.committer_time),
            "summary": summary(msg), "message": msg[:MESSAGE_CHARS] + ("…" if len(msg) > MESSAGE_CHARS else ""),
            "files": len(c.files)}


def blame_commit(b: git.BlameLine) -> dict[str, Any]:
    """What blame itself says of a commit the index could not read."""
    return {"hash": b.commit, "short": b.commit[:10], "author": b.author,
            "author_mail": b.author_mail, "date": iso(b.author_time),
            "committed": iso(b.committer_time), "summary": b.summary[:300], "message": b.summary}


def hunk_out(h: HunkRow, line: int, around: int = 3) -> dict[str, Any]:
    """The hunk's place, and its added lines around `line` (those the store kept)."""
    out: dict[str, Any] = {"path": h.path, "old_path": h.old_path, "old_start": h.old_start,
                           "old_lines": h.old_lines, "new_start": h.new_start,
                           "new_lines": h.new_lines}
    lines = h.added.split("\n") if h.added else []
    at = line - h.new_start
    if 0 <= at < len(lines):
        lo = max(0, at - around)
        excerpt = "\n".join(lines[lo:at + around + 1])
        out["excerpt_start"] = h.new_start + lo
        out["excerpt"] = excerpt if len(excerpt) <= HUNK_CHARS else excerpt[:HUNK_CHARS] + "…"
    return out

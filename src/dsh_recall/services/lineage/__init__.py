"""Code lineage: a git repository's commits (message, author, dates, hunks) indexed
incrementally, and `why PATH:LINE`: the commit that last changed a line, with the agent
session that produced it when history holds one.

The source is `LineageService` (service.py). Each subject has its module: why.py (the
file, its line and HEAD), indexing.py (which commits to read, within a budget), link.py
(the sessions behind a commit), common.py (where a repository's store is).
"""

from __future__ import annotations

from .service import INDEX_COMMAND, INDEX_JOB, LineageService
from .why import parse_target

__all__ = ["INDEX_COMMAND", "INDEX_JOB", "LineageService", "parse_target"]

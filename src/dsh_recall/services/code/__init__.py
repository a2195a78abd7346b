"""Code recall: index a workspace (plus extra source roots) and answer "where is X handled?"
with ranked, bounded excerpts. Policy lives here; SQL lives in the store; ranking math in
dsh_recall.rank.

service.py (CodeService: the source contract), indexing.py (the index sync), prepare.py
(reading and chunking one file, in worker processes for a large run), priors.py (ranking
priors over the fused layers), scope.py (workspace and scope), jobs.py (the index job file).
"""

from __future__ import annotations

from .indexing import IndexReport
from .prepare import embed_text
from .scope import find_workspace, indexed_workspaces
from .service import CodeService

__all__ = ["CodeService", "IndexReport", "embed_text", "find_workspace", "indexed_workspaces"]

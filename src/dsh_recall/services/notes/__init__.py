"""Notes recall: hybrid search over markdown memory roots, with access levels that fail closed.

The markdown files are the source of truth; the index is a rebuildable cache under
`<recall home>/notes/<key>.sqlite`, the key derived from the resolved list of roots.
Policy lives here: incremental indexing, the chunk-spec gate, the embedder fingerprint,
fusion, source weights, access filtering and the auto-recall gate. SQL lives in the store;
ranking math in dsh_recall.rank; chunking in dsh_recall.chunkers.notes.

Two exits: `search` (memory_search: raw passages) and `auto_recall` (a bounded block for a
system prompt, "" when nothing is relevant enough). Plain-dict functions (api.py:
`index_notes`, `search_notes`, `auto_recall`, `notes_status`, `eval_notes`) are what the
MCP server and hooks call.

service.py (NotesService: the source contract), indexing.py (the sync and the chunk-spec
gate), levels.py (each note's access level), roots.py (which roots, the index's key),
evaluate.py (the user's cases), api.py (plain-dict entry points, the backfill).
"""

from __future__ import annotations

from .api import auto_recall, backfill, eval_notes, index_notes, notes_status, search_notes
from .indexing import embed_text
from .roots import NO_ROOTS, notes_key, remember_roots, remembered_roots
from .service import LAYERS, NotesService, hit_text

__all__ = ["LAYERS", "NO_ROOTS", "NotesService", "auto_recall", "backfill",
           "embed_text", "eval_notes", "hit_text", "index_notes", "notes_key", "notes_status",
           "remember_roots", "remembered_roots", "search_notes"]

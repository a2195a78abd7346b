"""Searching offloaded objects: the log prior's rules from the config (`rank_config`), the
ranking of a search across every object a caller may see (`rank_objects`, behind
`ObjectService.search`), and a blob's search index as stored (`blob_search_parts`).

Pure over rows and line indexes: the service (service.py) reads the store, decides
who sees what and counts recalls; this module only orders what it is given. The service
loads it (and with it the line search, the log ranking and the line index) only where it
builds or reads an index: a range read never does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...core.codepoints import fold_case, scrub_surrogates
from ...rank import logrank
from ...rank.line_index import INDEX_VERSION, LineIndex, build_index
from ...rank.line_search import MAX_QUERY_CHARS, LineMatch, clean_query, failure_lines, near_lines, search_index
from ...stores.sqlite.objects import BlobParts, ObjectRow, blob_parts

# What the service reads from here when it runs (line index and search names included).
__all__ = ["INDEX_VERSION", "MAX_QUERY_CHARS", "OBJECTS_SCANNED", "LineIndex", "LineMatch",
           "blob_search_parts", "build_index", "clean_query", "failure_lines", "logrank",
           "rank_config", "rank_objects", "search_index"]

if TYPE_CHECKING:  # the config module pulls in pydantic: object get/search do without it
    from ...core.config import ObjectsConfig

# A search across objects reads the newest live objects, a few lines of each: it points at
# the object to open, it does not replace a search inside it.
OBJECTS_SCANNED = 30
OBJECT_LINES = 3


def blob_search_parts(data: bytes | None, text: str, idx: LineIndex | None = None) -> BlobParts:
    """`text`'s payload (when `data` is given) and search index, compressed."""
    idx = idx or build_index(text)
    return blob_parts(data, None if idx.view is text else idx.view, INDEX_VERSION,
                      [idx.starts, idx.shapes, idx.flags], idx.esc_at, idx.esc_cum)


def rank_config(cfg: ObjectsConfig | None) -> logrank.RankConfig | None:
    """The log prior's rules from the objects config (None: matches in file order, as
    before the prior); without a config, the defaults."""
    if cfg is None:
        return logrank.DEFAULT
    if not cfg.rank_log_prior:
        return None
    return logrank.RankConfig(
        error_shape=cfg.rank_error_shape, position=cfg.rank_position,
        after_success=cfg.rank_after_success, collapse_repeats=cfg.rank_collapse_repeats,
        trace_lines=cfg.rank_trace_lines, outcome_lines=cfg.rank_outcome_lines,
        fill_reserve=cfg.rank_fill_reserve)


def rank_objects(rows: Sequence[ObjectRow], index_of: Callable[[ObjectRow], LineIndex],
                 query: str) -> list[dict[str, Any]]:
    """Objects with lines matching `query`, best first: those whose best line holds the
    whole query, then all its words, then those holding all its words on neighbouring lines
    (`line_search.near_lines`: within `NEAR_LINES` lines, as a compiler prints its error
    and its reason a line apart), then the rest (fuzzy); within a tier in the order of
    `rows` (newest first). Evicted rows are skipped; [] for a query with nothing to find."""
    q, _ = clean_query(query)
    if not q:
        return []
    whole = fold_case(q)
    words = [w for w in whole.split() if w]
    scored: list[tuple[int, int, dict[str, Any]]] = []
    for n, row in enumerate(r for r in rows if r.sha is not None):
        idx = index_of(row)
        matches = search_index(idx, q, limit=OBJECT_LINES)
        best = fold_case(matches[0].text) if matches else ""
        tier = 0 if whole in best else 1 if matches and all(w in best for w in words) else 3
        if tier == 3:  # no line holds every word: do neighbouring lines?
            near = near_lines(idx, q, limit=OBJECT_LINES)
            if near:
                matches, tier = near, 2
        if not matches:
            continue
        scored.append((tier, n, {
            "id": row.id, "tool": row.tool, "chars": row.chars, "line": matches[0].line,
            "matches": [{"line": m.line, "offset": m.offset, "text": scrub_surrogates(m.text)}
                        for m in matches]}))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [r for _, _, r in scored]

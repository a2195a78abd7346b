"""`dsh-recall notes eval`: top-k hit rates of the user's own cases file (question ->
expected file or passage), as the owner (no access filtering: it is the user's tuning tool)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...rank.notes_rank import case_rank, load_cases

# The service's own ranking: (query, limit, allowed, layers, notes, used) -> hits.
Hits = Callable[[str, int, None, Sequence[str], list[str], list[str]], list[Any]]


def evaluate(ensure_indexed: Callable[[list[str]], None], ranked: Hits,
             cases: str | Path | list[dict[str, Any]], *,
             layers: Sequence[str], ks: Sequence[int] = (1, 3, 5)) -> dict[str, Any]:
    """Top-k hit rates and MRR over the service's `ranked` hits (NotesService._hits, after
    `ensure_indexed`). A file expectation counts distinct files; a passage expectation
    counts passages."""
    items = load_cases(cases) if not isinstance(cases, list) else cases
    notes: list[str] = []
    ensure_indexed(notes)
    kmax = max(ks)
    hits_at = {k: 0 for k in ks}
    rr = 0.0
    misses: list[dict[str, Any]] = []
    for case in items:
        used: list[str] = []
        hits = ranked(case["query"], kmax * 8, None, layers, notes, used)
        rank = case_rank(case, hits, kmax)
        for k in ks:
            hits_at[k] += int(rank is not None and rank <= k)
        rr += 1.0 / rank if rank else 0.0
        if rank is None or rank > 1:
            misses.append({"query": case["query"], "rank": rank,
                           "top": hits[0].row.path if hits else None})
    n = max(1, len(items))
    out: dict[str, Any] = {"cases": len(items), "layers": list(layers)}
    out.update({f"hit@{k}": round(hits_at[k] / n, 4) for k in ks})
    out["mrr"] = round(rr / n, 4)
    out["misses"] = misses
    out["notes"] = sorted(set(notes))
    return out

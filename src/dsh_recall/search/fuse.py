"""Reciprocal rank fusion: combine rankings by rank, never by raw score."""

from __future__ import annotations

from typing import Mapping, Sequence


def rrf(
    rankings: Mapping[str, Sequence[int]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse ranked id lists. Returns (item, score, {ranker: 1-based rank}) best first.

    score = sum over rankers of weight / (k + rank). Ties break by best single rank, then id,
    so the order is deterministic.
    """
    weights = weights or {}
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, items in rankings.items():
        w = weights.get(name, 1.0)
        seen: set[int] = set()
        rank = 0
        for item in items:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            ranks.setdefault(item, {})[name] = rank
            if w > 0:
                scores[item] = scores.get(item, 0.0) + w / (k + rank)
            else:
                scores.setdefault(item, 0.0)
    order = sorted(scores, key=lambda i: (-scores[i], min(ranks[i].values()), i))
    return [(i, scores[i], ranks[i]) for i in order]

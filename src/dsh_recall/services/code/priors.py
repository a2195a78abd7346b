"""Code ranking priors over the fused layers: where a chunk lives (tests, docs, build files),
whether it declares a name the query writes, and, for --files, one entry per file ordered by
file evidence (docs/code-ranking.md). The scoring math is in rank/ (fuse.path_prior,
code_files); this reads the rows it needs from the store."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from ...core.config import Config
from ...core.text import code_tokens
from ...rank import code_files
from ...rank.fuse import is_test_path, names_symbol, path_prior, wants_docs, wants_tests
from ...rank.query import Query
from ...stores.contracts import ChunkRow, ChunkStore

Fused = list[tuple[int, float, dict[str, int]]]  # (chunk id, score, {layer: rank}) best first


def pool_size(cfg: Config, limit: int) -> int:
    """How many candidates each layer ranks for an answer of `limit` hits (the priors and
    the fusion reorder them)."""
    return max(cfg.candidate_pool, limit * 4)


def apply_priors(store: ChunkStore, cfg: Config, query: Query, fused: Fused,
                 limit: int | None) -> tuple[Fused, dict[int, ChunkRow]]:
    """Re-weigh fused chunks by where they live (tests, docs, build files) and by whether
    they declare a name the query writes; returns them best first, with the rows read.
    What the query asks for reads its intent terms (none for a long paste, Query.intent).

    With a `limit`, only the head that can still reach the best `limit` is read: a prior
    never raises a score past `symbol_boost` times its fused score, so once the next
    fused score times that falls below the `limit`-th reweighed one, nothing after it
    can enter (the order is the one reading every candidate gives)."""
    terms = query.intent(cfg.long_query_words)
    named: frozenset[str] | set[str] = query.named if cfg.symbol_boost > 1 else set()
    if named and wants_tests(terms):  # "tests for parse_args" names test_parse_args too
        named |= {f"{p}{n}{s}" for n in named if "." not in n
                  for p, s in (("test_", ""), ("", "_test"), ("test", ""))}
    most = cfg.symbol_boost if named else 1.0
    by_path: dict[str, float] = {}  # many chunks share a file: its prior once

    def prior(row: Any) -> float:
        p = by_path.get(row.path)
        if p is None:
            p = by_path[row.path] = path_prior(row.path, terms, cfg.test_weight,
                                               cfg.doc_weight, cfg.config_weight)
        return p * (cfg.symbol_boost if named and names_symbol(row.symbols, named) else 1.0)

    rows: dict[int, ChunkRow] = {}
    out: Fused = []
    best: list[float] = []  # min-heap of the `limit` best reweighed scores so far
    start, block = 0, 32 if limit else len(fused)
    while start < len(fused):
        if limit and len(best) >= limit and fused[start][1] * most < best[0]:
            break
        part = fused[start:start + block]
        rows.update(store.chunks_by_id([i for i, _, _ in part], with_text=False))
        for i, s, r in part:
            row = rows.get(i)
            if row is None:
                continue  # gone since it was ranked
            final = s * prior(row)
            out.append((i, final, r))
            if limit:
                if len(best) < limit:
                    heapq.heappush(best, final)
                elif final > best[0]:
                    heapq.heapreplace(best, final)
        start += block
        block *= 2
    return sorted(out, key=lambda x: -x[1]), rows


def rank_files(store: ChunkStore, cfg: Config, query: Query, fused: Fused, rows: dict[int, ChunkRow],
               terms: Sequence[str], limit: int, prefix: str | None = None) -> Fused:
    """--files: one entry per file (its best chunk), ordered by file evidence: the sum of
    its best `file_chunks` chunks with decay, plus what the test files among the best
    `transfer_top` pass to the source files they test, times `path_boost` for a file
    whose path the query writes (docs/code-ranking.md). `terms`: the terms searched by
    (they pick a file's representative chunk)."""
    intent = query.intent(cfg.long_query_words)
    scored = [(rows[i].path, s) for i, s, _ in fused if i in rows]
    score = code_files.aggregate(scored, cfg.file_decay, cfg.file_chunks)
    best: dict[str, tuple[int, float, dict[str, int]]] = {}
    for item in fused:
        if item[0] in rows:
            best.setdefault(rows[item[0]].path, item)
    wants = wants_tests(intent)
    lookup_cache: dict[str, bool] = {}

    def lookup(path: str) -> bool:
        if path not in lookup_cache:
            inside = not prefix or path == prefix or path.startswith(prefix + "/")
            lookup_cache[path] = path in score or (inside and store.file(path) is not None)
        return lookup_cache[path]

    def admit(path: str) -> bool:
        """A file no layer ranked enters with the chunk holding most query terms."""
        if path in best:
            return True
        rep = representative_chunk(store, path, terms)
        if rep is None:
            return False
        rows[rep.id] = rep
        best[path] = (rep.id, 0.0, {})
        return True

    # A query asking for tests or docs wants those files, not what the tests test.
    if cfg.test_transfer > 0 and cfg.transfer_top > 0 and not wants and not wants_docs(intent):
        order = sorted(score, key=lambda p: -score[p])
        known = order[:50]
        gain: dict[str, float] = {}
        for t in order[:cfg.transfer_top]:
            if not is_test_path(t):
                continue
            raw = score[t] / (cfg.test_weight if cfg.test_weight > 0 else 1.0)
            for target in code_files.tested_files(t, head_text(store, t), lookup, known):
                gain[target] = max(gain.get(target, 0.0), cfg.test_transfer * raw)
        for target, g in gain.items():
            if admit(target):
                score[target] = score.get(target, 0.0) + g
    if cfg.path_boost > 1:
        written = query.paths
        named = code_files.resolve_written(written, lookup, score) if written else []
        named = [p for p in named if wants or not is_test_path(p)]
        if named:
            ranked = sorted(score.values(), reverse=True)
            floor = ranked[min(limit, len(ranked)) - 1] if ranked else 1.0
            for p in named:
                if p in score:
                    score[p] *= cfg.path_boost
                elif admit(p):  # named but ranked by no layer: just inside the answer
                    score[p] = floor * cfg.path_boost
    order = sorted((p for p in score if p in best), key=lambda p: -score[p])
    return [(best[p][0], score[p], best[p][2]) for p in order[: max(limit, 1) * 2]]


def head_text(store: ChunkStore, path: str, chars: int = 20_000) -> str:
    """The first chunks of an indexed file, in order (its imports live there)."""
    # a file's chunks go in in order, so its first ids are its head
    ids = sorted(store.chunk_ids_for_paths([path]))[:12]
    got = store.chunks_by_id(ids)
    text, n = [], 0
    for row in sorted(got.values(), key=lambda r: r.start_line):
        text.append(row.text)
        n += len(row.text)
        if n >= chars:
            break
    return "\n".join(text)


def representative_chunk(store: ChunkStore, path: str, terms: Sequence[str]) -> ChunkRow | None:
    """The chunk of `path` holding the most query terms (a file no layer ranked)."""
    got = store.chunks_by_id(store.chunk_ids_for_paths([path]))
    want = set(terms)
    best, best_n = None, -1
    for row in sorted(got.values(), key=lambda r: r.start_line):
        n = len(want & set(code_tokens(row.text)))
        if n > best_n:
            best, best_n = row, n
    return best


def weak(best: dict[str, Any], query: Query, weak_score: float) -> bool:
    """Weak: the best excerpt holds under `weak_score` of the query's terms."""
    terms = query.terms
    if not terms:
        return False
    have = set(code_tokens(best["excerpt"] + " " + best["path"]))
    return sum(1 for t in terms if t in have) / len(terms) < weak_score

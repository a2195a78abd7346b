"""Reciprocal rank fusion: combine rankings by rank, never by raw score."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from .query import Query


def rrf(
    rankings: Mapping[str, Sequence[int]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    unseen: Mapping[str, AbstractSet[int]] | None = None,
) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse ranked id lists. Returns (item, score, {ranker: 1-based rank}) best first.

    score = sum over rankers of weight / (k + rank). Ties break by best single rank, then id,
    so the order is deterministic.

    `unseen`: per ranker, items it never looked at (a vector layer's candidates that have no
    vector yet). A ranker cannot vote against what it has not seen: such an item's score is
    the sum over the rankers that did see it, scaled by all rankers' weight over theirs (as
    if the unseen one ranked it as they did on average), not the bare sum, which counted
    the missing vote as a vote against.
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
    if unseen:
        total = sum(max(0.0, weights.get(n, 1.0)) for n in rankings)
        for name, items_ in unseen.items():
            if name not in rankings:
                continue
            for item in items_:
                if item not in scores or name in ranks[item]:
                    continue
                missing = sum(max(0.0, weights.get(n, 1.0)) for n in unseen
                              if n in rankings and item in unseen[n] and n not in ranks[item])
                seen_w = total - missing
                if seen_w > 0:
                    scores[item] *= total / seen_w
    order = sorted(scores, key=lambda i: (-scores[i], min(ranks[i].values()), i))
    return [(i, scores[i], ranks[i]) for i in order]


# Paths whose kind is remembered (a search asks for each candidate's, 50-250 of them, and
# mostly the same files again the next search).
PATH_CACHE = 8192
_TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec", "specs", "e2e"}
_TEST_SUFFIXES = ("_test.py", "_test.go", "_test.rs", "_tests.py", "_spec.rb", "test.java",
                  "tests.java", ".test.js", ".test.ts", ".test.tsx", ".spec.js", ".spec.ts",
                  ".spec.tsx", ".test.jsx")


@functools.lru_cache(maxsize=PATH_CACHE)
def is_test_path(path: str) -> bool:
    """A test file by common layout conventions across languages."""
    parts = path.lower().split("/")
    name = parts[-1]
    if any(p in _TEST_DIRS for p in parts[:-1]):
        return True
    return name.startswith(("test_", "conftest")) or name.endswith(_TEST_SUFFIXES)


def wants_tests(terms: Sequence[str]) -> bool:
    return any(t in ("test", "tests", "testing", "spec", "fixture", "fixtures") for t in terms)


_DOC_EXTS = (".md", ".rst", ".txt", ".adoc", ".markdown")
_DOC_DIRS = {"doc", "docs", "documentation", "man"}
_DOC_WORDS = {"doc", "docs", "documentation", "documented", "readme", "guide", "tutorial",
              "changelog", "changes"}


_DOC_NAMES = ("license", "licence", "notice", "copying", "authors", "contributors", "changelog",
              "changes", "history", "news")


def wants_docs(terms: Sequence[str]) -> bool:
    return any(t in _DOC_WORDS for t in terms)


@functools.lru_cache(maxsize=PATH_CACHE)
def is_doc_path(path: str) -> bool:
    """Prose documentation by extension, folder, or a project's legal / release files."""
    parts = path.lower().split("/")
    name = parts[-1]
    return (name.endswith(_DOC_EXTS) or name.split(".")[0] in _DOC_NAMES
            or any(p in _DOC_DIRS for p in parts[:-1]))


def names_symbol(symbols: Sequence[str], named: AbstractSet[str]) -> bool:
    """Does the chunk declare something the query names? A dotted name matches the symbol
    or whole trailing parts of it (`Session.send` matches `Session.send` and
    `requests.Session.send`); a plain name matches the symbol or its last part (`send`
    matches `Session.send`)."""
    if not named:
        return False
    whole, plain = _named_index(frozenset(named))
    for sym in symbols:
        low = sym.lower()
        if low in whole:
            return True
        parts = low.split(".")
        if parts[-1] in plain:
            return True
        # a dotted name the query writes is a whole trailing part of the symbol
        for i in range(1, len(parts) - 1):
            if ".".join(parts[i:]) in whole:
                return True
    return False


@functools.lru_cache(maxsize=16)
def _named_index(named: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(every name, the names without a dot): a chunk's symbols are looked up, not compared
    with each of a pasted issue's dozens of names."""
    return named, frozenset(n for n in named if "." not in n)


# Build, packaging, CI and data files: what a project is configured with, not what it does.
_CONFIG_EXTS = {"json", "jsonc", "yaml", "yml", "toml", "ini", "cfg", "conf", "xml", "lock",
                "in", "properties", "gradle", "cmake", "mk", "plist", "env"}
_BUILD_NAMES = {"setup.py", "noxfile.py", "fabfile.py", "makefile", "gnumakefile",
                "dockerfile", "cmakelists.txt", "build.gradle", "vagrantfile", "jenkinsfile",
                "procfile", "justfile", "rakefile", "gemfile"}


@functools.lru_cache(maxsize=PATH_CACHE)
def is_config_path(path: str) -> bool:
    """A build, packaging, CI or data file (setup.py, tox.ini, .travis.yml, pyproject.toml,
    package.json, a dotfile, anything under a dot-folder such as .github/), not prose docs."""
    if is_doc_path(path):
        return False
    parts = path.lower().split("/")
    name = parts[-1]
    if name in _BUILD_NAMES or name.startswith(".") or any(p.startswith(".") for p in parts[:-1]):
        return True
    return "." in name and name.rsplit(".", 1)[-1] in _CONFIG_EXTS


def names_file(path: str, terms: Sequence[str]) -> bool:
    """Does the query name this file (its stem) or its format (its extension)?"""
    name = path.lower().rsplit("/", 1)[-1].lstrip(".")
    stem, _, ext = name.partition(".")
    return any(t == stem or (ext and t == ext.rsplit(".", 1)[-1]) for t in terms)


def path_prior(path: str, terms: Sequence[str], test_weight: float, doc_weight: float,
               config_weight: float = 1.0) -> float:
    """Score multiplier for where a chunk lives: code recall answers with implementation
    first; tests, prose docs and build / config files rank below it unless the query asks
    for them (`terms`: the query's intent terms, rank/query.Query.intent)."""
    w = 1.0
    if test_weight < 1 and is_test_path(path) and not wants_tests(terms):
        w *= test_weight
    if doc_weight < 1 and is_doc_path(path) and not wants_docs(terms):
        w *= doc_weight
    if config_weight < 1 and is_config_path(path) and not names_file(path, terms):
        w *= config_weight
    return w


def layer_weights(query: Query, lexical: float, vector: float, tilt: bool = True) -> dict[str, float]:
    """RRF weights by query shape. A question in plain words ("python check if a variable is
    iterable") is where word overlap misleads and meaning matters: the lexical layer counts
    for less. A few keywords, identifiers, paths and long pasted text keep both layers.

    `tilt` False: the vector layer found nothing close to the question while the lexical
    layer's best hit answers it (services/hybrid.rank decides, by the calibrated lines of
    rank/confidence.py): the tilt's premise, a layer that read the question, does not hold,
    and both layers count the same."""
    if tilt and query.plain:
        return {"lexical": lexical * NATURAL_LEXICAL_SHARE, "vector": vector}
    return {"lexical": lexical, "vector": vector}


NATURAL_LEXICAL_SHARE = 0.25


def fuse_layers(rankings: Mapping[str, Sequence[int]], query: Query, lexical_weight: float,
                vector_weight: float, k: int, title_weight: float = 0.0,
                unseen: Mapping[str, AbstractSet[int]] | None = None, tilt: bool = True,
                ) -> tuple[list[tuple[int, float, dict[str, int]]], float]:
    """The hybrid step code and notes share: the layers' rankings fused by RRF, weighted by
    the query's shape (layer_weights); a "title" ranking (a long query's title alone) counts
    `title_weight` times the lexical layer; `tilt` see layer_weights. Returns (fused best first, norm): `score * norm`
    puts a chunk ranked first by every layer that answered at 1.0."""
    if not rankings:
        return [], 1.0
    weights = layer_weights(query, lexical_weight, vector_weight, tilt)
    weights["title"] = weights["lexical"] * title_weight
    fused = rrf(rankings, k=k, weights=weights, unseen=unseen)
    return fused, (k + 1) / max(1e-9, sum(weights[n] for n in rankings))

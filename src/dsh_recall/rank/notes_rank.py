"""Pure ranking helpers for notes: source weights, the auto-recall relevance gate and its
bounded block, how sure an answer is (`judge`: its `match`, docs/notes.md#how-sure-an-answer-is),
and evaluation cases (reading a cases file, ranking a case)."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.text import code_tokens
from . import lexical as lex
from .query import MAX_QUERY_CHARS, Query


# -- pure helpers: source weights, the auto-recall gate and block, cases files -------------
@dataclass(frozen=True)
class Hit:
    """One ranked passage with what the auto-recall gate needs to judge it."""

    row: Any  # stores.contracts.ChunkRow
    score: float
    level: str
    cosine: float | None
    coverage: float
    ranks: dict[str, int]

    def as_result(self, stale: bool, explain: bool = False) -> dict[str, Any]:
        r = self.row
        out = {"path": r.path, "start_line": r.start_line, "end_line": r.end_line,
               "heading": " > ".join(r.symbols), "level": self.level, "score": self.score,
               "text": r.text, "source_path": r.abs_path, "stale": stale}
        if explain:
            out["ranks"] = self.ranks
            out["cosine"] = None if self.cosine is None else round(self.cosine, 4)
            out["coverage"] = round(self.coverage, 4)
        return out


def source_weight(path: str, weights: dict[str, float]) -> float:
    """Product of the multipliers of every glob matching the path (or its file name)."""
    w = 1.0
    name = path.rsplit("/", 1)[-1]
    for pattern, mult in weights.items():
        if fnmatch.fnmatchcase(path, pattern) or ("/" not in pattern and fnmatch.fnmatchcase(name, pattern)):
            w *= mult
    return w


def coverage(terms: Sequence[str], df: dict[str, int], total: int, text: str,
             heading: Sequence[str], path: str) -> float:
    """IDF-weighted share of the query's terms found in a passage, its headings or its path.

    Terms the index has never seen count at full weight: a message about something else
    entirely stays far from the gate however many of its words are common.
    """
    if not terms:
        return 0.0
    have = set(code_tokens(text + " " + " ".join(heading) + " " + path.replace("/", " ")))
    n = max(total, 1)
    weights = {t: lex.idf(df.get(t, 0), n) for t in terms}
    whole = sum(weights.values())
    return sum(w for t, w in weights.items() if t in have) / whole if whole > 0 else 0.0


# -- how sure an answer is (Answer["match"]) ---------------------------------------------------
# A passage's evidence adds what its words show and what its meaning shows, each counted
# against the amount that alone would settle it; 1 or more is a passage that answers.
WORDS_BAR = 0.5  # holding half the query's information (IDF-weighted terms) settles it
MEANING_BAR = 0.3  # so does a cosine this far above the index's mean cosine to the query
UNRELATED = 0.5  # under half the bar: unrelated (cut from the tail of a strong answer)
FAR_LESS = 0.5  # in a strong answer, under half the best passage's share of the terms: weak
MIN_KEPT = 3  # a strong answer cut at its tail keeps at least this many passages

_WORD_AT = re.compile(r"[A-Za-z0-9_]+")


def evidence(coverage: float, cosine: float | None, mean_cosine: float | None) -> float:
    """How much a passage shows it answers the query, 1.0 = enough (`WORDS_BAR`,
    `MEANING_BAR`). `coverage`: its share of the query's terms (`coverage()`); `cosine` its
    cosine to the query and `mean_cosine` the index's mean one, both None when the vector
    layer did not rank it over every passage (then the words alone count)."""
    meaning = 0.0 if cosine is None or mean_cosine is None else max(0.0, cosine - mean_cosine)
    return coverage / WORDS_BAR + meaning / MEANING_BAR


def written_names(query: Query) -> list[str]:
    """The words a query writes as names or identifiers, lower-cased: snake_case,
    camelCase, letters with digits (`v3`, `E4471`), ALL CAPS, and a Capitalized word after
    the first (a sentence's first word is capitalized anyway). A name the index has never
    seen is the query's subject, and no passage can speak of it."""
    out: list[str] = list(query.identifiers)
    for i, m in enumerate(_WORD_AT.finditer(query.text[:MAX_QUERY_CHARS])):
        w = m.group()
        has_digit, has_alpha = any(c.isdigit() for c in w), any(c.isalpha() for c in w)
        if ((has_digit and has_alpha) or (len(w) > 1 and w.isupper())
                or (i > 0 and w[:1].isupper() and w[1:].islower())):
            out.append(w.lower())
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Verdict:
    """How sure a notes answer is: its `match`, each kept passage's, and how many of the
    ranked passages it keeps (a strong answer drops its trailing unrelated ones)."""

    match: str  # "strong" | "weak" | "none"
    hits: tuple[str, ...]  # "strong" | "weak", one per kept passage
    keep: int


def judge(coverages: Sequence[float], cosines: Sequence[float | None],
          mean_cosine: float | None, *, unknown_names: Sequence[str] = ()) -> Verdict:
    """The match of an answer whose passages (best first) hold these shares of the query's
    terms and have these cosines; `mean_cosine` is None unless the vector layer ranked
    every passage (no vectors pending), and `unknown_names` are the names the query writes
    that the index has never seen (`written_names`).

    - strong: a passage's evidence reaches 1; each such passage is strong unless it holds
      under `FAR_LESS` of the terms the best-covered passage holds. Trailing passages
      under `UNRELATED` go (at least `MIN_KEPT` stay).
    - none: no passage reaches it with all the evidence in (the meaning was checked), or
      the query names something the index does not know.
    - weak: no passage reaches it from the words alone and the meaning could not be
      checked, but one holds some of them (`UNRELATED` or more).
    Every passage of a weak or none answer is weak."""
    n = len(coverages)
    if n == 0:
        return Verdict("none", (), 0)
    ev = [evidence(c, s, mean_cosine) for c, s in zip(coverages, cosines, strict=True)]
    if unknown_names:
        return Verdict("none", ("weak",) * n, n)
    best = max(coverages)
    strong = [e >= 1.0 and c >= FAR_LESS * best for e, c in zip(ev, coverages, strict=True)]
    if any(strong):
        keep = n
        while keep > MIN_KEPT and not strong[keep - 1] and ev[keep - 1] < UNRELATED:
            keep -= 1
        return Verdict("strong", tuple("strong" if s else "weak" for s in strong[:keep]), keep)
    checked = mean_cosine is not None
    match = "weak" if not checked and max(ev) >= UNRELATED else "none"
    return Verdict(match, ("weak",) * n, n)


def relevant(hit: Hit, min_coverage: float, min_cosine: float) -> bool:
    """The auto-recall gate: enough of the words, or close enough in meaning."""
    return hit.coverage >= min_coverage or (hit.cosine is not None and hit.cosine >= min_cosine)


_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}(\s|$)")
RECALL_HEADER = "Notes from memory that may be relevant (verify before relying on them):"


def recall_block(hits: Sequence[Hit], budget_chars: int) -> str:
    """A system-prompt block of at most budget_chars characters; "" for no hits.

    Each passage is headed by its file, line and heading path; passages are cut (on code
    points) to share the budget, best first; a passage that would not fit at all is left out.
    """
    if not hits or budget_chars <= len(RECALL_HEADER) + 20:
        return ""
    parts = [RECALL_HEADER]
    used = len(RECALL_HEADER)
    for i, h in enumerate(hits):
        r = h.row
        head = f"- {r.path}:{r.start_line}" + (f" ({' > '.join(r.symbols)})" if r.symbols else "") + ": "
        # The heading path is already in the line's head; repeating "# Title" wastes budget.
        body = " ".join(" ".join(ln for ln in r.text.split("\n") if not _HEADING_LINE.match(ln)).split())
        body = body or " ".join(r.text.split())
        room = budget_chars - used - 1 - len(head)  # 1 for the newline
        share = max(0, room // (len(hits) - i))  # leave room for the passages still to come
        if share < 20:
            break
        if len(body) > share:
            body = body[: max(0, share - 1)].rstrip() + "\u2026"
        line = head + body
        parts.append(line)
        used += 1 + len(line)
    return "\n".join(parts) if len(parts) > 1 else ""


_QUERY_KEYS = ("query", "question", "q")
_FILE_KEYS = ("expected_file", "expected_doc", "expectedDoc", "expected", "file", "files")
_PASSAGE_KEYS = ("expected_passage", "expected_text", "passage", "passages")


def _as_list(v: Any) -> list[str]:
    return [str(x) for x in (v if isinstance(v, list) else [v])]


def load_cases(path: str | Path) -> list[dict[str, Any]]:
    """Read a cases file: a JSON list (or {"cases": [...]}) or JSON lines. Each case has a
    query and an expected file (substring of the path) or an expected passage."""
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read cases file {p}: {e}") from e
    items: Any  # a list of cases, once checked below
    try:
        data = json.loads(raw)
    except ValueError:
        try:
            items = [json.loads(ln) for ln in raw.splitlines() if ln.strip()]
        except ValueError as e:
            raise InputError(f"cases file {p} is neither JSON nor JSON lines: {e}") from e
    else:
        # A dict is either {"cases": [...]} or the one case of a one-line JSON lines file.
        items = data.get("cases") if isinstance(data, dict) and "cases" in data else data
        items = [items] if isinstance(items, dict) else items
        if not isinstance(items, list):
            raise InputError(f"cases file {p} holds no list of cases (a JSON list, "
                             '{"cases": [...]} or one case per line)')
    if not items:
        raise InputError(f"cases file {p} has no cases: write one JSON object per line, "
                         'e.g. {"query": "...", "expected_file": "notes.md"}')
    out: list[dict[str, Any]] = []
    for n, it in enumerate(items, 1):
        if not isinstance(it, dict):
            raise InputError(f"case {n} in {p} is not an object")
        q = next((it[k] for k in _QUERY_KEYS if isinstance(it.get(k), str)), None)
        files = next((it[k] for k in _FILE_KEYS if it.get(k)), None)
        passages = next((it[k] for k in _PASSAGE_KEYS if it.get(k)), None)
        if not q or not (files or passages):
            raise InputError(f"case {n} in {p} needs a query and an expected file or passage "
                             f"(keys: {', '.join(_QUERY_KEYS)} / {', '.join(_FILE_KEYS + _PASSAGE_KEYS)})")
        out.append({"query": q, "files": _as_list(files) if files else [],
                    "passages": _as_list(passages) if passages and not files else []})
    return out


def case_rank(case: dict[str, Any], hits: list[Hit], kmax: int) -> int | None:
    """1-based rank of the first hit matching the case's expectation, within kmax."""
    want_files = [w.lower() for w in case.get("files", [])]
    want_text = [" ".join(w.lower().split()) for w in case.get("passages", [])]
    seen_files: list[str] = []
    for i, h in enumerate(hits):
        if want_files:
            p = h.row.path.lower()
            if p in seen_files:
                continue
            seen_files.append(p)
            if len(seen_files) > kmax:
                return None
            if any(w in p for w in want_files):
                return len(seen_files)
        else:
            if i >= kmax:
                return None
            t = " ".join(h.row.text.lower().split())
            if any(w in t or (len(t) >= 20 and t in w) for w in want_text):
                return i + 1
    return None

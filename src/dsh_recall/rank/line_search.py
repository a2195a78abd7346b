"""Line search inside one object: which lines match a query, best first, and where a log
failed. Pure functions over a `LineIndex` (`rank.line_index`).

The query is parsed its own way here (`clean_query`, `_query_words`): case is kept (an exact
case ranks first), a word matches inside a longer one, nothing is a stop word, and trigrams
of the words find the lines a typo missed. The term parse of the code, notes and history
indexes (`rank.query`) is for a token index and ranks whole tokens instead.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

from ..core.codepoints import fold_case, join_surrogates, scrub_surrogates
from . import logrank
from .line_index import LineIndex, build_index
from .line_limits import SEARCH_LIMIT

LINE_TEXT_MAX = 400

# Queries are cut to this many chars: a line search needs a phrase, not a pasted log, and the
# cut keeps every tier's work bounded (the words and trigram tiers cap their terms too).
MAX_QUERY_CHARS = 1000
MAX_QUERY_WORDS = 16
MAX_QUERY_GRAMS = 32
FUZZY_SEED_HITS = 4000


@dataclass(frozen=True)
class LineMatch:
    """A matching line: 1-based number, code-point offset of `text`, and the text.
    `context`: a line of the failure region shown with a failure query's matches, not a
    match itself (as grep -C shows lines around its matches)."""

    line: int
    offset: int
    text: str
    context: bool = False

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"line": self.line, "offset": self.offset, "text": self.text}
        if self.context:
            out["context"] = True
        return out


def clean_query(query: str) -> tuple[str, bool]:
    """The query as searched: surrogates joined, lone ones as U+FFFD, line breaks as spaces
    (a match never spans lines), trimmed, and cut to `MAX_QUERY_CHARS`. Returns (query,
    whether it was cut)."""
    q = scrub_surrogates(join_surrogates(query)).replace("\r", " ").replace("\n", " ").strip()
    if len(q) > MAX_QUERY_CHARS:
        return q[:MAX_QUERY_CHARS].rstrip(), True
    return q, False


def _grams(word: str) -> list[str]:
    return [word] if len(word) < 4 else [word[i:i + 3] for i in range(len(word) - 2)]


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _query_words(q: str) -> list[tuple[str, str]]:
    """(exact, folded) of each distinct word, at most `MAX_QUERY_WORDS` (the longest)."""
    seen: dict[str, str] = {}
    for w in q.split():
        w = w.strip("\"'`")
        if w:
            seen.setdefault(fold_case(w), w)
    words = [(e, f) for f, e in seen.items()]
    if len(words) > MAX_QUERY_WORDS:
        keep = sorted(range(len(words)), key=lambda i: (-len(words[i][1]), i))[:MAX_QUERY_WORDS]
        words = [words[i] for i in sorted(keep)]
    return words


class _Lines:
    """Line-at-a-time matching over one view: every scan is `str.find` in C, jumping to the
    next line after a line's first hit, so the Python work is one step per matching line."""

    def __init__(self, view: str, starts: Sequence[int], cap: int):
        self.view, self.starts, self.cap = view, starts, cap
        self.low = fold_case(view)

    def end(self, li: int) -> int:
        r"""Where line `li` ends (its \n included)."""
        return self.starts[li + 1] if li + 1 < len(self.starts) else len(self.view)

    def hits(self, folded: str) -> list[tuple[int, int]]:
        """(line, first hit) of every line holding `folded`, in file order, at most `cap`."""
        find, starts, n = self.low.find, self.starts, len(self.starts)
        out: list[tuple[int, int]] = []
        li = 0
        pos = find(folded)
        while pos != -1 and len(out) < self.cap:
            li = bisect.bisect_right(starts, pos, li) - 1
            out.append((li, pos))
            if li + 1 >= n:
                break
            pos = find(folded, starts[li + 1])
        return out

    def graded(self, exact: str, folded: str, li: int = 0,
               only: bool = False) -> list[tuple[int, int, int]]:
        """(grade, position, line) of the best hit of a term in every line holding it, in
        file order, at most `cap` lines. Grade 0: the exact case as a whole word, 1: a whole
        word in another case, 2: the exact case inside a longer word, 3: another case inside
        a longer word. A term in lower case asks for no case, so only the word test counts
        for it. From line `li` on (`only`: that line alone)."""
        view, starts, find = self.view, self.starts, self.low.find
        nlines, nview, n = len(starts), len(view), len(folded)
        left, right, cased = _is_word(folded[0]), _is_word(folded[-1]), exact != folded
        startswith = view.startswith
        out: list[tuple[int, int, int]] = []
        append, left_over = out.append, self.cap
        hi = self.end(li) if only else nview
        pos = find(folded, starts[li], hi)
        while pos != -1 and left_over:
            li = bisect.bisect_right(starts, pos, li) - 1
            le = starts[li + 1] if li + 1 < nlines else nview
            best, at, p = 4, pos, pos
            while p != -1:  # the line's hits, until a best one
                g = 1 if cased and not startswith(exact, p) else 0
                if left and p > 0:
                    c = view[p - 1]
                    if c.isalnum() or c == "_":
                        g += 2
                if g < 2 and right and p + n < nview:
                    c = view[p + n]
                    if c.isalnum() or c == "_":
                        g += 2
                if g < best:
                    best, at = g, p
                    if g == 0:
                        break
                p = find(folded, p + 1, le)
            append((best, at, li))
            left_over -= 1
            pos = find(folded, le, hi) if le < hi else -1
        return out


# Rarity of a term (which word or trigram to start from, which trigrams are on most lines) is
# estimated from this many evenly spread slices of this size: a full count per trigram was
# most of a fuzzy search's time on megabyte logs.
_SAMPLES, _SAMPLE_CHARS = 8, 16_384


def _rough_count(low: str, term: str) -> float:
    """About how often `term` occurs in `low` (exact below 8 x 16k chars)."""
    n = len(low)
    if n <= _SAMPLES * _SAMPLE_CHARS:
        return low.count(term)
    step = n // _SAMPLES
    found = sum(low.count(term, i * step, i * step + _SAMPLE_CHARS) for i in range(_SAMPLES))
    return found * n / (_SAMPLES * _SAMPLE_CHARS)


def _diversify(order: list[tuple[int, int, int]], shapes: Sequence[int], limit: int,
               per_shape: int = 2) -> list[tuple[int, int, int]]:
    """(grade, pos, line) candidates in the given order, but at most `per_shape` lines of one
    shape before every other shape."""
    first: list[tuple[int, int, int]] = []
    rest: list[tuple[int, int, int]] = []
    seen: dict[int, int] = {}
    get, n = seen.get, len(shapes)
    for t in order:
        if len(first) >= limit:
            break
        li = t[2]
        k = shapes[li] if li < n else -1
        c = seen[k] = get(k, 0) + 1
        if c <= per_shape:
            first.append(t)
        elif len(rest) < limit:
            rest.append(t)
    return (first + rest)[:limit]


# A query word that asks where something failed: such a query's answer is filled up to its
# limit with the failure region (marked `context`).
_FAILURE_WORD = re.compile(
    r"(?:errors?|err|fail(?:s|ed|ure|ures|ing)?|fatal|exception|traceback|panic(?:ked)?"
    r"|crash(?:ed)?|abort(?:ed)?|broken|assert(?:ion)?|stacktrace)")


def is_failure_query(query: str) -> bool:
    """Whether `query` asks where something failed (`error`, `FAILED`, `BUILD FAILURE`)."""
    return any(_FAILURE_WORD.fullmatch(w.strip("\"'`:!.,;()[]#*")) for w in
               fold_case(query).split())


def search_index(idx: LineIndex, query: str, limit: int = SEARCH_LIMIT,
                 max_line_chars: int = LINE_TEXT_MAX, cap: int = 200_000,
                 rank: logrank.RankConfig | None = logrank.DEFAULT,
                 fill: bool = False) -> list[LineMatch]:
    """Up to `limit` lines matching `query`, best first.

    Tiers: lines holding the whole query, then lines holding all its words, then fuzzy lines
    sharing at least 60% of the query's informative trigrams. Matching ignores case; within
    the literal tiers a whole-word hit ranks above one inside a longer word
    (`ShouldHaveFailed_create_Test` for `FAILED`), and when the query has capitals, its exact
    case above another case. Then, with `rank` and an index holding log flags, by the log
    prior (`logrank.prior`: lines of the failure region first, then error-shaped lines,
    later lines first); without, file order. Either way at most two lines of one shape
    (first words, digits ignored) before every other shape, so a log's thousand "Tests run:
    ..., Errors: 0" lines do not hide its one "[ERROR] ..." line. With `fill`, a failure
    query (`is_failure_query`) that matched fewer than `limit` lines gets the failure
    region's other lines after its matches, marked `context` (matches come first: the
    region's reserved places are at most a quarter of `limit`).

    Work is linear in the object's size: the query is cut to `MAX_QUERY_CHARS`, words to
    `MAX_QUERY_WORDS`, trigrams to `MAX_QUERY_GRAMS`, each scanned by C-level `str.find`,
    with one Python step per matching line (at most `cap` per term). The shown text comes
    from the view (escapes left out); `offset` is where it starts in the stored text.
    """
    exact, _ = clean_query(query)
    q = fold_case(exact)
    if not q or limit <= 0:
        return []
    lines = _Lines(idx.view, idx.starts, cap)
    picked: dict[int, int] = {}  # line index -> hit position, in answer order
    region: list[int] = []
    score = None
    if rank is not None and len(idx.flags) == len(idx.starts):
        region = logrank.failure_region(idx.view, idx.starts, idx.flags, SEARCH_LIMIT, rank)
        score = logrank.prior(idx.flags, region, rank)

    def take(graded: list[tuple[int, int, int]]) -> None:
        """Add (grade, pos, line) candidates, given in file order: by grade (a stable sort
        keeps file order within one), then the log prior, then by shape."""
        if score is None:
            graded.sort(key=itemgetter(0))
        else:
            keys = score.keys(graded)  # one comprehension, then a C-level sort
            graded = [graded[i] for i in sorted(range(len(graded)), key=keys.__getitem__)]
        if picked:
            graded = [t for t in graded if t[2] not in picked]
        for _, pos, li in _diversify(graded, idx.shapes, limit - len(picked)):
            picked[li] = pos

    take(lines.graded(exact, q))
    words = _query_words(exact)
    if len(picked) < limit and len(words) > 1:
        take(_all_words(lines, words, set(picked)))
    if len(picked) < limit and words:
        _fuzzy(lines, [f for _, f in words], limit, picked, score)
    out = [_shown(idx, li, pos, max_line_chars) for li, pos in picked.items()]
    if fill and region and is_failure_query(exact):
        others = [li for li in region if li not in picked]
        # Room for the region: what the matches left, and at least `fill_reserve` lines
        # of it in all (the lowest-ranked matches give way) when few of it matched. The
        # limit counts matches first: the reserve is at most a quarter of it (the default 5
        # of 20), so a small limit is never all context while real matches wait.
        held = len(region) - len(others)
        reserve = max(0, min(rank.fill_reserve if rank else 0, len(region), limit // 4) - held)
        keep = max(0, min(len(out), limit - min(reserve, len(others))))
        out = out[:keep]
        for li in others[:max(0, limit - keep)]:
            m = _shown(idx, li, idx.starts[li], max_line_chars)
            out.append(LineMatch(m.line, m.offset, m.text, context=True))
    return out


def failure_lines(idx: LineIndex, limit: int = SEARCH_LIMIT,
                  max_line_chars: int = LINE_TEXT_MAX,
                  rank: logrank.RankConfig | None = logrank.DEFAULT) -> list[LineMatch]:
    """Where did it fail? Up to `limit` lines of the likely failure region, in file order
    (`logrank.failure_region`). An index without log flags (or `rank` None) answers with
    the last non-empty lines."""
    if limit <= 0:
        return []
    if rank is None or len(idx.flags) != len(idx.starts):
        rank = rank or logrank.DEFAULT
        flags: Sequence[int] = array("H", bytes(2 * len(idx.starts)))
    else:
        flags = idx.flags
    region = logrank.failure_region(idx.view, idx.starts, flags, limit, rank)
    return [_shown(idx, li, idx.starts[li], max_line_chars) for li in region]


def _all_words(lines: _Lines, words: list[tuple[str, str]],
               skip: set[int]) -> list[tuple[int, int, int]]:
    """(grade, pos, line) of lines holding every word; a line's grade is its worst word's.
    Candidates are the lines of the rarest word; the others are looked for in each."""
    low = lines.low
    counts = [_rough_count(low, f) for _, f in words]
    order = sorted(range(len(words)), key=lambda i: counts[i])
    e0, f0 = words[order[0]]
    others = [words[i] for i in order[1:]]
    out: list[tuple[int, int, int]] = []
    for grade, pos, li in lines.graded(e0, f0):
        if li in skip:
            continue
        ls, le = lines.starts[li], lines.end(li)
        if all(low.find(f, ls, le) != -1 for _, f in others):
            for e, f in others:
                grade = max(grade, lines.graded(e, f, li, only=True)[0][0])
            out.append((grade, pos, li))
    return out


def _seeds(grams: list[str], counts: dict[str, float], enough: int) -> list[str]:
    """The trigrams whose lines are the fuzzy candidates. A line holding `need` of the m
    trigrams holds one of any m - need + 1 (`enough`) of them, so the rarest `enough` find
    every such line; but once the seeds so far are estimated at `FUZZY_SEED_HITS`
    occurrences, no commoner one is added: a line sharing only a query's common trigrams
    ("Failures: 0" for BUILD FAILURE on a big log) is noise, and walking its lines was most
    of the fuzzy tier's time."""
    out: list[str] = []
    total = 0.0
    for g in sorted(grams, key=lambda g: counts[g])[:enough]:
        if out and total + counts[g] > FUZZY_SEED_HITS:
            break
        out.append(g)
        total += counts[g]
    return out


def _fuzzy(lines: _Lines, words: list[str], limit: int, picked: dict[int, int],
           score: logrank.Prior | None = None) -> None:
    """Lines sharing at least 60% of the query's informative trigrams, most shared first,
    then by `score` (the log prior) when given, else file order (found from the rarest
    trigrams: see `_seeds`)."""
    low = lines.low
    grams = list(dict.fromkeys(g for w in words for g in _grams(w)))
    if len(grams) > MAX_QUERY_GRAMS:  # spread over the whole query
        step = len(grams) / MAX_QUERY_GRAMS
        grams = [grams[int(i * step)] for i in range(MAX_QUERY_GRAMS)]
    counts = {g: _rough_count(low, g) for g in grams}
    # A trigram on most lines tells nothing: leave it out (unless all are like that).
    informative = [g for g in grams if counts[g] <= len(lines.starts) // 2] or grams
    need = max(1, -(-len(informative) * 3 // 5))
    seeds = _seeds(informative, counts, len(informative) - need + 1)
    cands: dict[int, int] = {}
    for g in seeds:
        for li, pos in lines.hits(g):
            if li not in picked and pos < cands.get(li, pos + 1):
                cands[li] = pos
    shared: list[tuple[int, int, int]] = []  # (-trigrams shared, line, hit position)
    starts, last = lines.starts, len(lines.starts) - 1
    for li, pos in cands.items():
        line = low[starts[li]:starts[li + 1] if li < last else len(low)]
        n = sum(map(line.__contains__, informative))
        if n >= need:
            shared.append((-n, li, pos))
    scored: list[tuple[int, float, int, int]]
    if score is not None and shared:
        # ties in shared trigrams go by the prior: computed for all candidates at once
        pri = score.scores([li for _, li, _ in shared])
        scored = [(t[0], -p, t[1], t[2]) for t, p in zip(shared, pri, strict=True)]
    else:
        scored = [(t[0], 0.0, t[1], t[2]) for t in shared]
    scored.sort()
    for _, _, li, pos in scored[: limit - len(picked)]:
        picked[li] = pos


NEAR_LINES = 3  # a window: every query word within this many consecutive lines


def near_lines(idx: LineIndex, query: str, window: int = NEAR_LINES, limit: int = 3,
               max_line_chars: int = LINE_TEXT_MAX, cap: int = 20_000) -> list[LineMatch]:
    """The lines of the best window of at most `window` consecutive lines holding every word
    of `query` (two words or more) between them, in file order, at most `limit`: a
    compiler's "COMPILATION ERROR" above its "cannot find symbol" answers a query naming
    both, which no single line holds. The best window is the narrowest, then the latest (a
    log ends where it failed). [] when no window holds every word. Linear in the object:
    one `str.find` scan per word (at most `cap` lines each), a bisect per anchor line."""
    exact, _ = clean_query(query)
    words = [f for _, f in _query_words(exact)]
    if len(words) < 2 or limit <= 0 or window < 1:
        return []
    lines = _Lines(idx.view, idx.starts, cap)
    per_word = [[li for li, _ in lines.hits(f)] for f in words]
    if not all(per_word):
        return []
    rare = min(range(len(words)), key=lambda i: len(per_word[i]))
    best: tuple[int, int, list[int]] | None = None  # (span, -last line, lines)
    for a in per_word[rare]:
        chosen = [a]
        for i, hits in enumerate(per_word):
            if i == rare:
                continue
            j = bisect.bisect_left(hits, a)
            near = [hits[k] for k in (j - 1, j) if 0 <= k < len(hits)]
            chosen.append(min(near, key=lambda li: abs(li - a)))
        span = max(chosen) - min(chosen)
        if span >= window:
            continue
        key = (span, -max(chosen), sorted(set(chosen)))
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        return []
    low = lines.low
    out = []
    for li in best[2][:limit]:
        ls, le = idx.starts[li], lines.end(li)
        pos = min((p for p in (low.find(f, ls, le) for f in words) if p != -1), default=ls)
        out.append(_shown(idx, li, pos, max_line_chars))
    return out


def _shown(idx: LineIndex, li: int, pos: int, max_line_chars: int) -> LineMatch:
    r"""Line `li` as shown: the whole line, or for a progress-bar line (bare \r inside) the
    redraw holding the hit, or for a very long one a window around the hit."""
    view, starts = idx.view, idx.starts
    ls = starts[li]
    le = starts[li + 1] if li + 1 < len(starts) else len(view)
    while le > ls and view[le - 1] in "\r\n":
        le -= 1
    pos = min(max(pos, ls), le)
    if view.find("\r", ls, le) != -1:
        r = view.rfind("\r", ls, pos)
        e = view.find("\r", pos + 1, le)
        ls, le = (r + 1 if r != -1 else ls), (e if e != -1 else le)
    ws = ls
    if le - ls > max_line_chars:
        ws = max(ls, min(pos - max_line_chars // 4, le - max_line_chars))
    return LineMatch(li + 1, idx.text_offset(ws), view[ws:min(le, ws + max_line_chars)])


def search_lines(text: str, query: str, limit: int = SEARCH_LIMIT,
                 max_line_chars: int = LINE_TEXT_MAX, cap: int = 200_000,
                 rank: logrank.RankConfig | None = logrank.DEFAULT,
                 fill: bool = False) -> list[LineMatch]:
    """`search_index` over `text` indexed on the spot (the store keeps the index instead)."""
    return search_index(build_index(text), query, limit, max_line_chars, cap, rank, fill)

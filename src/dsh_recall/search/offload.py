"""Offload policy and in-object line search: pure functions over plain strings.

Everything here counts and slices in Unicode code points. Text that came from JSON may carry
UTF-16 surrogates (a pair for one astral character, or a lone half); `join_surrogates` turns
every valid pair into its one code point first, so no later slice can split a pair, and lone
halves stay single code points that `scrub_surrogates` can make printable without moving any
offset.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from ..core.config import ObjectsConfig

NOTE_MARKER = "[dsh-recall: "
RECALL_DEFAULT_CHARS = 8000
RECALL_MAX_CHARS = 24000
SEARCH_LIMIT = 20
LINE_TEXT_MAX = 400

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A harness's own "the full output is elsewhere" notice (Claude Code, dsh, shells): when the
# tail holds one it is kept whole so the agent still sees where the harness put the file.
_SPILL = re.compile(
    r"(?i)(?:full\s+(?:formatted\s+)?(?:result|output)|output\s+(?:too\s+large|truncated)"
    r"|(?:result|output)\s+(?:was\s+)?(?:stored|saved|written))"
)


def join_surrogates(text: str) -> str:
    """Replace every valid UTF-16 surrogate pair by the code point it encodes (lossless)."""
    if not _SURROGATE.search(text):
        return text
    return _PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + (ord(m[0][1]) - 0xDC00)), text
    )


def scrub_surrogates(text: str) -> str:
    """Lone surrogates -> U+FFFD, one for one, so the text encodes as UTF-8 and offsets hold."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def fold_case(text: str) -> str:
    """Lower-case `text` without changing its length (offsets in the result stay valid)."""
    low = text.lower()
    if len(low) == len(text):  # lower() never shrinks a char, so equal length means 1:1
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def make_id(session: str, seq: int, size: int, attempt: int = 0) -> str:
    """8 hex chars from (session, seq, size); bump `attempt` on a collision."""
    key = f"{session}\x00{seq}\x00{size}\x00{attempt}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:8]


def _joins_previous(text: str, i: int) -> bool:
    """True when a cut before text[i] would split a visible character (mark, ZWJ sequence)."""
    if i <= 0 or i >= len(text):
        return False
    c, prev = text[i], text[i - 1]
    o = ord(c)
    return (
        unicodedata.combining(c) != 0
        or unicodedata.category(c) in ("Mn", "Me")
        or c == "\u200d" or prev == "\u200d"
        or 0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF  # variation selectors
        or 0x1F3FB <= o <= 0x1F3FF  # emoji skin tones
        or (c == "\n" and prev == "\r")
    )


def _head_end(text: str, n: int) -> int:
    """Where the head stops: at most n, preferring a line end in the last quarter."""
    if n >= len(text):
        return len(text)
    j = text.rfind("\n", (3 * n) // 4, n)
    cut = j + 1 if j != -1 else n
    while cut > 0 and _joins_previous(text, cut):
        cut -= 1
    return cut


def _tail_start(text: str, n: int, spill_chars: int) -> int:
    """Where the tail starts: about n from the end, at a line start when one is near,
    moved earlier (by up to spill_chars) to hold a harness spill notice whole."""
    if n <= 0:
        start = len(text)
    else:
        start = max(0, len(text) - n)
        j = text.find("\n", start, start + n // 4)
        if j != -1 and j + 1 < len(text):
            start = j + 1
    if spill_chars > 0:
        lo = max(0, start - spill_chars)
        last = None
        for m in _SPILL.finditer(text, lo):
            last = m
        if last is not None and last.start() < start:
            # Keep the notice whole: back to its opening paren/bracket on the same line.
            line_start = text.rfind("\n", 0, last.start()) + 1
            opener = max(text.rfind("(", line_start, last.start()),
                         text.rfind("[", line_start, last.start()))
            begin = opener if opener != -1 else line_start
            if start - begin <= spill_chars:
                start = begin
    while 0 < start < len(text) and _joins_previous(text, start):
        start -= 1
    return start


@dataclass(frozen=True)
class Inline:
    """What stays in the conversation: text[:head_end] + note + text[tail_start:]."""

    text: str
    head_end: int
    tail_start: int


def render_note(obj_id: str, tool: str | None, total: int, start: int, end: int,
                first_line: int, last_line: int) -> str:
    """The one-paragraph pointer placed between head and tail."""
    what = f"this {tool} output" if tool else "this output"
    return (
        f"{NOTE_MARKER}{end - start:,} of {total:,} chars of {what} (chars {start}-{end}, "
        f"lines {first_line}-{last_line}) were moved out of the context as object {obj_id}. "
        f"Get them back with the recall tool (id={obj_id}, start + count for a range, at most "
        f"{RECALL_MAX_CHARS:,} per call; or query for matching lines with their offsets), or "
        f"`dsh-recall object get {obj_id} --start {start} --count {RECALL_DEFAULT_CHARS}` / "
        f"`dsh-recall object search {obj_id} QUERY`.]"
    )


def render_inline(text: str, obj_id: str, tool: str | None, cfg: ObjectsConfig) -> Inline | None:
    """Head + note + tail for `text` (already surrogate-joined), or None when the pointer
    form would not be shorter than the text itself."""
    head_end = _head_end(text, cfg.head_chars)
    tail_start = max(head_end, _tail_start(text, cfg.tail_chars, cfg.spill_notice_chars))
    if tail_start <= head_end:
        return None
    first_line = count_breaks(text, 0, head_end) + 1
    # The omitted span ends just before tail_start (often a line start): don't count the
    # newline that closes the last omitted line as another line.
    last_line = first_line + count_breaks(text, head_end, max(head_end, tail_start - 1))
    note = render_note(obj_id, tool, len(text), head_end, tail_start, first_line, last_line)
    head = text[:head_end]
    sep = "" if not head or head.endswith("\n") else "\n"
    out = f"{head}{sep}{note}\n{text[tail_start:]}"
    if len(out) >= len(text):
        return None
    return Inline(out, head_end, tail_start)


@dataclass(frozen=True)
class Candidate:
    """One tool result of a conversation, oldest first: its key (seq) and size."""

    seq: int
    chars: int
    tokens: int
    text: bool = True  # False for images and other non-text blocks


def plan_offloads(items: Sequence[Candidate], cfg: ObjectsConfig,
                  offloaded: frozenset[int] | set[int] = frozenset(),
                  context_tokens: int | None = None) -> list[int]:
    """Which results (by seq) to offload now.

    Never the newest `cfg.keep`, never non-text blocks, never one already offloaded (by the
    store's record of its seq, not by looking for the marker text), never one at or under
    `threshold_chars`. With `budget_tokens`, oldest first and only while the context
    (`context_tokens`, else the sum of the items) is still over budget.
    """
    keep = cfg.keep
    older = list(items[:-keep]) if keep and len(items) > keep else ([] if keep else list(items))
    eligible = [c for c in older
                if c.text and c.seq not in offloaded and c.chars > cfg.threshold_chars]
    if cfg.budget_tokens is None:
        return [c.seq for c in eligible]
    total = context_tokens if context_tokens is not None else sum(c.tokens for c in items)
    inline_tokens = (cfg.head_chars + cfg.tail_chars + len(NOTE_MARKER) + 400) // 4
    chosen: list[int] = []
    for c in eligible:
        if total <= cfg.budget_tokens:
            break
        chosen.append(c.seq)
        total -= max(0, c.tokens - inline_tokens)
    return chosen


def clamp_range(total: int, start: int | None, count: int | None) -> tuple[int, int]:
    """(start, end) of a recall range: default the first 8,000 chars, never over 24,000."""
    s = min(max(0, start or 0), total)
    n = RECALL_DEFAULT_CHARS if count is None else max(0, count)
    return s, min(total, s + min(n, RECALL_MAX_CHARS))


# ---- line search ------------------------------------------------------------------------


@dataclass(frozen=True)
class LineMatch:
    """A matching line: 1-based number, code-point offset of `text`, and the text."""

    line: int
    offset: int
    text: str


_BREAK = re.compile("\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """Code-point offset of the start of every line. A line ends at \\n, \\r\\n or a bare
    \\r (CI logs redraw progress bars with \\r; counted as lines, as log tools do)."""
    if "\r" not in text:
        return [0] + [m.end() for m in re.finditer("\n", text)]
    return [0] + [m.end() for m in _BREAK.finditer(text)]


def count_breaks(text: str, start: int = 0, end: int | None = None) -> int:
    """Line breaks in text[start:end], by the same rule as `line_starts`."""
    end = len(text) if end is None else end
    n = text.count("\n", start, end)
    if "\r" in text:
        n += text.count("\r", start, end) - text.count("\r\n", start, end)
    return n


def _find_all(hay: str, needle: str, cap: int) -> list[int]:
    out: list[int] = []
    i = hay.find(needle)
    while i != -1 and len(out) < cap:
        out.append(i)
        i = hay.find(needle, i + 1)
    return out


def _grams(word: str) -> list[str]:
    return [word] if len(word) < 4 else [word[i:i + 3] for i in range(len(word) - 2)]


# Terminal colour / cursor sequences (CI logs are full of them): ignored by search.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def _view_col_to_orig(line: str, col: int) -> int:
    """Offset in `line` (with escapes) of column `col` of the same line without them."""
    seen = pos = 0
    for m in _ANSI.finditer(line):
        if seen + (m.start() - pos) > col:
            break
        seen += m.start() - pos
        pos = m.end()
    return pos + (col - seen)


def search_lines(text: str, query: str, limit: int = SEARCH_LIMIT,
                 max_line_chars: int = LINE_TEXT_MAX, cap: int = 200_000) -> list[LineMatch]:
    """Up to `limit` lines of `text` matching `query`, best first.

    Tiers: lines holding the whole query (case-insensitive substring), then lines holding
    all its words, then fuzzy lines sharing at least 60% of the query's informative trigrams.
    Literal tiers keep file order but show at most two lines of the same shape (first words,
    digits ignored) before the others, so a log's thousand "Tests run: ..., Errors: 0" lines
    do not hide its one "[ERROR] ..." line. Each tier is a few C-level `str.find` scans, so
    megabyte objects answer in tens of milliseconds. ANSI escapes are ignored and left out of
    the shown line; `offset` is always an offset in `text` (escapes never hold a line break,
    so line numbers are the same with or without them).
    """
    if "\x1b" not in text:
        return _search(text, query, limit, max_line_chars, cap)
    view = _ANSI.sub("", text)
    vstarts = line_starts(view)
    ostarts = line_starts(text)
    out = []
    for m in _search(view, query, limit, max_line_chars, cap, vstarts):
        li = m.line - 1
        o_end = ostarts[li + 1] if li + 1 < len(ostarts) else len(text)
        col = _view_col_to_orig(text[ostarts[li]:o_end], m.offset - vstarts[li])
        out.append(LineMatch(m.line, ostarts[li] + col, m.text))
    return out


_SHAPE_WORD = re.compile(r"[^\W\d_]{3,}")


def _shape(line: str) -> str:
    """A line's shape: its first two words of letters (timestamps and numbers skipped)."""
    return " ".join(m.group(0).lower() for m in itertools.islice(_SHAPE_WORD.finditer(line), 2))


def _diversify(lines: list[int], text: str, starts: list[int], limit: int,
               per_shape: int = 2) -> list[int]:
    """File order, but at most `per_shape` lines of one shape before every other shape."""
    first: list[int] = []
    rest: list[int] = []
    seen: dict[str, int] = {}
    for li in lines:
        if len(first) >= limit:
            break
        end = starts[li + 1] if li + 1 < len(starts) else len(text)
        key = _shape(text[starts[li]:min(end, starts[li] + 200)])
        seen[key] = seen.get(key, 0) + 1
        (first if seen[key] <= per_shape else rest).append(li)
    return first + rest


def _search(text: str, query: str, limit: int, max_line_chars: int, cap: int,
            starts: list[int] | None = None) -> list[LineMatch]:
    q = fold_case(query.strip())
    if not q or limit <= 0:
        return []
    low = fold_case(text)
    starts = starts if starts is not None else line_starts(text)
    picked: dict[int, int] = {}  # line index -> hit position, in answer order

    def line_of(pos: int) -> int:
        return bisect.bisect_right(starts, pos) - 1

    phrase: dict[int, int] = {}
    for pos in _find_all(low, q, cap):
        phrase.setdefault(line_of(pos), pos)
    for li in _diversify(list(phrase), text, starts, limit)[:limit]:
        picked[li] = phrase[li]
    words = list(dict.fromkeys(w.strip("\"'`") for w in q.split()))
    words = [w for w in words if w]
    if len(picked) < limit and len(words) > 1:
        per_word = []
        for w in words:
            lines: dict[int, int] = {}
            for pos in _find_all(low, w, cap):
                lines.setdefault(line_of(pos), pos)
            per_word.append(lines)
        common = set(per_word[0]).intersection(*per_word[1:]) - picked.keys()
        for li in _diversify(sorted(common), text, starts, limit - len(picked))[: limit - len(picked)]:
            picked[li] = per_word[0][li]
    if len(picked) < limit:
        grams = list(dict.fromkeys(g for w in words for g in _grams(w)))
        # A trigram on most lines tells nothing (and costs the most): leave it out.
        common_grams = [g for g in grams if low.count(g) > len(starts) // 2]
        grams = [g for g in grams if g not in common_grams] if len(common_grams) < len(grams) else grams
        hits: dict[int, set[int]] = {}
        first: dict[int, int] = {}
        for gi, g in enumerate(grams):
            for pos in _find_all(low, g, cap):
                li = line_of(pos)
                hits.setdefault(li, set()).add(gi)
                first.setdefault(li, pos)
        need = max(1, -(-len(grams) * 3 // 5))  # at least 60% of the query's trigrams
        fuzzy = sorted((li for li, s in hits.items() if len(s) >= need and li not in picked),
                       key=lambda li: (-len(hits[li]), li))
        for li in fuzzy[: limit - len(picked)]:
            picked[li] = first[li]
    out: list[LineMatch] = []
    for li, pos in picked.items():
        ls = starts[li]
        le = starts[li + 1] if li + 1 < len(starts) else len(text)
        while le > ls and text[le - 1] in "\r\n":
            le -= 1
        ws = ls
        if le - ls > max_line_chars:  # a huge line: a window around the hit
            ws = max(ls, min(pos - max_line_chars // 4, le - max_line_chars))
        out.append(LineMatch(li + 1, ws, text[ws:min(le, ws + max_line_chars)]))
    return out

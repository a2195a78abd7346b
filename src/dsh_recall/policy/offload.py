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
import re
import unicodedata
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

from ..rank import logrank

if TYPE_CHECKING:  # the config module pulls in pydantic: object get/search do without it
    from ..core.config import ObjectsConfig

NOTE_MARKER = "[dsh-recall: "
RECALL_DEFAULT_CHARS = 8000
RECALL_MAX_CHARS = 24000
SEARCH_LIMIT = 20
LINE_TEXT_MAX = 400
# The inline form: a cut inside a line is marked with CUT; a failure-region line over
# REGION_LINE_MAX chars is shown cut; the finder is asked for at most REGION_LIMIT lines.
CUT = "\u2026"
REGION_LINE_MAX = 300
REGION_LIMIT = 20
NOTE_CHARS = 160  # about what a note costs (render_note), for plan_offloads

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
    if text.isascii() or not _SURROGATE.search(text):  # isascii is O(1) on str
        return text
    return _PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + (ord(m[0][1]) - 0xDC00)), text
    )


def scrub_surrogates(text: str) -> str:
    """Lone surrogates -> U+FFFD, one for one, so the text encodes as UTF-8 and offsets hold."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


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
    """Where the head stops: after its last whole line within n chars, or inside the first
    line when that line alone is longer than n."""
    if n <= 0:
        return 0
    if n >= len(text):
        return len(text)
    j = text.rfind("\n", 0, n)
    if j != -1:
        return j + 1
    cut = n
    while cut > 0 and _joins_previous(text, cut):
        cut -= 1
    return cut


def _tail_start(text: str, n: int, spill_chars: int) -> int:
    """Where the tail starts: at the first line start at most n from the end, or inside the
    last line when that line alone is longer than n; moved earlier (by up to spill_chars)
    to hold a harness spill notice whole, from its line's start when that fits."""
    size = len(text)
    if n <= 0:
        start = size
    elif n >= size:
        start = 0
    else:
        start = size - n
        j = text.find("\n", start - 1)
        if j != -1 and j + 1 < size:
            start = j + 1
    if spill_chars > 0 and start > 0:
        lo = max(0, start - spill_chars)
        last = None
        for m in _SPILL.finditer(text, lo):
            last = m
        if last is not None and last.start() < start:
            line_start = text.rfind("\n", 0, last.start()) + 1
            opener = max(text.rfind("(", line_start, last.start()),
                         text.rfind("[", line_start, last.start()))
            for begin in (line_start, opener):
                if begin != -1 and start - begin <= spill_chars:
                    start = min(start, begin)
                    break
    while 0 < start < size and _joins_previous(text, start):
        start -= 1
    return start


def _mid_line(text: str, pos: int) -> bool:
    """Whether a cut at `pos` falls inside a line (not at a line start, not at an end)."""
    return 0 < pos < len(text) and text[pos - 1] != "\n"


@dataclass(frozen=True)
class Inline:
    """What stays in the conversation: text[:head_end] + note + the failure region's lines
    (numbered, `region`: their 1-based numbers) + text[tail_start:]."""

    text: str
    head_end: int
    tail_start: int
    region: tuple[int, ...] = ()


def region_line(number: int, line: str) -> str:
    r"""A failure-region line as shown inline: `N| text`, the text after its last bare \r
    (what a terminal shows of a progress bar), cut after `REGION_LINE_MAX` chars with the
    count of chars left out."""
    line = line.rstrip("\r")
    r = line.rfind("\r")
    if r != -1:
        line = line[r + 1:]
    if len(line) > REGION_LINE_MAX:
        cut = REGION_LINE_MAX
        while cut > 0 and _joins_previous(line, cut):
            cut -= 1
        line = f"{line[:cut]}{CUT}[+{len(line) - cut:,} chars]"
    return f"{number}| {line}\n"


def render_note(obj_id: str, total_chars: int, total_lines: int, first_line: int,
                last_line: int, chars: tuple[int, int] | None = None) -> str:
    """The pointer between head and region: the omitted line range (and char range, when a
    cut fell inside a line), the object id, how to get more. Paid on every later request,
    so it is one short line."""
    span = f" (chars {chars[0]}-{chars[1]})" if chars else ""
    return (f"{NOTE_MARKER}lines {first_line}-{last_line}{span} of {total_lines:,} "
            f"({total_chars:,} chars) moved to object {obj_id}; recall id={obj_id} with "
            f"lines=a-b or query=...]")


# render_note's wording, for putting a pointer form back (search.restore).
POINTER_NOTE = re.compile(
    re.escape(NOTE_MARKER)
    + r"lines (?P<a>\d{1,15})-(?P<b>\d{1,15})(?: \(chars (?P<start>\d{1,15})-(?P<end>\d{1,15})"
    r"\))? of [\d,]{1,20} \([\d,]{1,20} chars\) moved to object (?P<id>[0-9a-f]{8}); "
    r"recall id=(?P=id) with lines=a-b or query=\.\.\.\]")
_REGION_NUMBER = re.compile(r"(\d{1,15})\| ")


def render_dropped_note(tool: str | None, total: int, start: int, end: int,
                        first_line: int, last_line: int, cap_bytes: int) -> str:
    """The note for a result over the store's size cap: its middle left the context and was
    not kept anywhere."""
    what = f"this {tool} output" if tool else "this output"
    return (
        f"{NOTE_MARKER}{end - start:,} of {total:,} chars of {what} (chars {start}-{end}, "
        f"lines {first_line}-{last_line}) were left out and not stored: the output is over the "
        f"object store's cap of {cap_bytes:,} bytes (objects.max_object_bytes). Re-run the "
        f"command with its output sent to a file and read the parts you need.]"
    )


def _fit_region(idx: LineIndex, lo: int, hi: int, room: int,
                rank: logrank.RankConfig) -> tuple[dict[int, str], bool]:
    """Failure-region lines between line indices lo (included) and hi (excluded), as shown
    (`region_line`), in file order, in at most `room` chars: taken in the order
    `logrank.digest` ranks them (the first lines of each failure, then more of the worst)
    while they fit; and whether the output has a failure signal at all (without one the
    region is empty)."""
    view, starts = idx.view, idx.starts
    shown: dict[int, str] = {}
    ranked = logrank.digest(view, starts, idx.flags, 2 * REGION_LIMIT, rank)
    for li in ranked:
        if not lo <= li < hi:
            continue
        ls, le = starts[li], starts[li + 1] - 1 if li + 1 < len(starts) else len(view)
        line = region_line(li + 1, view[ls:le])
        if len(line.split("| ", 1)[1].strip()) <= 1:  # pytest's bare `E` spacer lines
            continue
        if len(line) <= room:
            shown[li] = line
            room -= len(line)
    return dict(sorted(shown.items())), bool(ranked)


@dataclass(frozen=True)
class InlinePlan:
    """Where the pointer form of `text` cuts, and the region lines it shows: everything but
    the object's id, which the note alone names (its length does not depend on the id, so a
    form's size is known before the id is allocated)."""

    text: str
    head_end: int
    tail_start: int
    shown: dict[int, str]
    first: int  # first and last omitted line (1-based)
    last: int
    lines: int  # lines of the whole text
    over_cap: int | None

    def render(self, obj_id: str, tool: str | None = None) -> Inline | None:
        """The pointer form naming `obj_id` (`tool`: what made the output, for the note of
        one over the store's cap), or None when it is not shorter than the text."""
        text, head_end, tail_start = self.text, self.head_end, self.tail_start
        size = len(text)
        head_cut, tail_cut = _mid_line(text, head_end), _mid_line(text, tail_start)
        if self.over_cap is not None:
            note = render_dropped_note(tool, size, head_end, tail_start, self.first, self.last,
                                       self.over_cap)
        else:
            note = render_note(obj_id, size, self.lines, self.first, self.last,
                               (head_end, tail_start) if head_cut or tail_cut else None)
        head = text[:head_end]
        sep = CUT + "\n" if head_cut else ("" if not head or head.endswith("\n") else "\n")
        out = "".join([head, sep, note, "\n", *self.shown.values(), CUT if tail_cut else "",
                       text[tail_start:]])
        if len(out) >= size:
            return None
        return Inline(out, head_end, tail_start, tuple(li + 1 for li in self.shown))


def plan_inline(text: str, cfg: ObjectsConfig, over_cap: int | None = None,
                idx: LineIndex | None = None,
                rank: logrank.RankConfig | None = logrank.DEFAULT) -> InlinePlan | None:
    """The cut points of `text`'s pointer form (already surrogate-joined), or None when there
    is nothing to leave out.

    Head (whole lines, up to `head_chars`), the note, the failure region's lines numbered
    (`region_line`), then the tail (whole lines): all of it in `inline_chars`. The tail takes
    up to `tail_chars`; with a failure signal the region gets what is left and its unused
    room grows the tail a whole line at a time; without one (a green run, a listing) the form
    is head + note + tail. A line is cut (marked `CUT`) only when the head's first line or the
    tail's last line is alone longer than its share; then the note states the char range too.
    A harness spill notice near the tail is kept whole (up to `spill_notice_chars` more) when
    the budget has room for it. `idx` is `build_index(text)` when the caller has it; `rank`
    None: no region. With `over_cap` (the store's cap in bytes) there is no region and the
    note says the middle was too big to store.
    """
    size = len(text)
    budget = max(0, cfg.inline_chars)
    head_end = _head_end(text, min(cfg.head_chars, budget))
    tail_room = min(cfg.tail_chars, budget - head_end)
    spill_room = min(cfg.spill_notice_chars, max(0, budget - head_end - tail_room))
    tail_start = max(head_end, _tail_start(text, tail_room, spill_room))
    if tail_start <= head_end:
        return None
    shown: dict[int, str] = {}
    if over_cap is None and rank is not None:
        idx = idx if idx is not None else build_index(text)
        lo = count_breaks(text, 0, head_end) + (1 if _mid_line(text, head_end) else 0)
        hi = count_breaks(text, 0, tail_start)
        room = max(0, budget - head_end - (size - tail_start))
        shown, signal = _fit_region(idx, lo, hi, room, rank)
        if signal and not _mid_line(text, tail_start):
            # What the region left grows the tail, a whole line at a time (a region line
            # the tail takes in is shown once, in the tail).
            left = room - sum(map(len, shown.values()))
            li = hi - 1
            while tail_start > head_end and li >= lo:
                ps = max(head_end, text.rfind("\n", 0, tail_start - 1) + 1)
                cost = tail_start - ps - len(shown.get(li, ""))
                if cost > left or _mid_line(text, ps):
                    break
                left -= cost
                shown.pop(li, None)
                tail_start, li = ps, li - 1
            if tail_start <= head_end:
                return None
    first = count_breaks(text, 0, head_end) + 1
    # The omitted span ends just before tail_start (often a line start): don't count the
    # newline that closes the last omitted line as another line.
    last = first + count_breaks(text, head_end, max(head_end, tail_start - 1))
    lines = count_breaks(text) + (0 if text.endswith("\n") else 1)
    return InlinePlan(text, head_end, tail_start, shown, first, last, lines, over_cap)


def render_inline(text: str, obj_id: str, tool: str | None, cfg: ObjectsConfig,
                  over_cap: int | None = None, idx: LineIndex | None = None,
                  rank: logrank.RankConfig | None = logrank.DEFAULT) -> Inline | None:
    """The pointer form of `text` naming `obj_id` (`plan_inline`, then `InlinePlan.render`),
    or None when it would not be shorter than the text itself."""
    plan = plan_inline(text, cfg, over_cap, idx, rank)
    return plan.render(obj_id, tool) if plan is not None else None


def pointer_span(text: str, m: re.Match[str], original: str) -> tuple[int, int] | None:
    """Where the pointer form whose note is `m` (a `POINTER_NOTE` match in `text`) stands in
    `text`, as (start, end), when it is exactly a form of `original`: its head before the
    note, numbered lines that are `original`'s own lines after it, then its tail. None
    otherwise (a pasted note, another object's text around it)."""
    a, b = int(m["a"]), int(m["b"])
    starts: array | None = None  # line starts of `original`, built once when needed
    if m["start"] is not None:
        s, e = int(m["start"]), int(m["end"])
    else:
        starts = line_starts(original)
        if not 1 <= a <= b <= len(starts):
            return None
        s = starts[a - 1]
        e = starts[b] if b < len(starts) else len(original)
    if not 0 <= s <= e <= len(original):
        return None
    head = original[:s]
    before = head + (CUT + "\n" if _mid_line(original, s) else
                     "" if not head or head.endswith("\n") else "\n")
    lo = m.start() - len(before)
    if lo < 0 or text[lo:m.start()] != before or not text.startswith("\n", m.end()):
        return None
    p = m.end() + 1
    while (num := _REGION_NUMBER.match(text, p)) is not None:
        n = int(num[1])
        if not a <= n <= b:
            break
        if starts is None:
            starts = line_starts(original)
        ls = starts[n - 1]
        le = starts[n] - 1 if n < len(starts) else len(original)
        shown = region_line(n, _ANSI.sub("", original[ls:le]))
        if not text.startswith(shown, p):
            break
        p += len(shown)
    after = (CUT if _mid_line(original, e) else "") + original[e:]
    if not text.startswith(after, p):
        return None
    return lo, p + len(after)


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
    inline_tokens = (cfg.inline_chars + NOTE_CHARS) // 4
    chosen: list[int] = []
    for c in eligible:
        if total <= cfg.budget_tokens:
            break
        chosen.append(c.seq)
        total -= max(0, c.tokens - inline_tokens)
    return chosen


def reclaim_pays(chosen: Sequence[Candidate], cfg: ObjectsConfig,
                 surface: Sequence[tuple[int, int]]) -> bool:
    """Whether rewriting `chosen` results already in a conversation pays: a rewrite makes
    the provider's prompt cache miss once, from the first rewritten result to the end
    (`surface`: (seq, chars) of every message of the conversation, in order); what it
    removes is saved on each of the next `cfg.reclaim_horizon` requests."""
    if not chosen:
        return False
    first = min(c.seq for c in chosen)
    after = sum(chars for seq, chars in surface if seq >= first)
    inline = cfg.inline_chars + NOTE_CHARS
    saved = sum(max(0, c.chars - inline) for c in chosen)
    return saved * cfg.reclaim_horizon > after


def clamp_range(total: int, start: int | None, count: int | None) -> tuple[int, int]:
    """(start, end) of a recall range: default the first 8,000 chars, never over 24,000."""
    s = min(max(0, start or 0), total)
    n = RECALL_DEFAULT_CHARS if count is None else max(0, count)
    return s, min(total, s + min(n, RECALL_MAX_CHARS))


# ---- line search ------------------------------------------------------------------------


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


# Queries are cut to this many chars: a line search needs a phrase, not a pasted log, and the
# cut keeps every tier's work bounded (the words and trigram tiers cap their terms too).
MAX_QUERY_CHARS = 1000
MAX_QUERY_WORDS = 16
MAX_QUERY_GRAMS = 32
FUZZY_SEED_HITS = 4000
# Bump when what `build_index` stores changes: a stored index of another version is rebuilt.
# 3: a third array, the log shape flags of every line (search.logrank).
INDEX_VERSION = 3

# Terminal colour / cursor sequences (CI logs are full of them): ignored by search.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# A line's shape: its first two words of 3+ letters (timestamps and numbers skipped). Matches
# exactly once at every line start (an empty match for an empty line), so one findall over
# the folded text gives every line's shape in one C-level pass.
_SHAPES = re.compile(r"(?m)^(?:[^\n]*?([^\W\d_]{3,}))?(?:[^\n]*?([^\W\d_]{3,}))?[^\n]*")


def line_starts(text: str) -> array:
    r"""Code-point offset of the start of every line. Only \n ends a line (\r\n is a \n
    with a \r before it); a bare \r, a progress bar redrawing itself, stays inside its line,
    as in grep, editors and `wc -l`."""
    out = array("q", [0])
    find = text.find
    i = find("\n")
    while i != -1:
        out.append(i + 1)
        i = find("\n", i + 1)
    return out


def count_breaks(text: str, start: int = 0, end: int | None = None) -> int:
    r"""Line breaks in text[start:end], by the same rule as `line_starts` (\n only)."""
    return text.count("\n", start, len(text) if end is None else end)


def line_shapes(low: str, chunk: int = 1 << 20) -> array:
    """A shape id per line of `low` (folded text): lines with the same first two words share
    an id. Found `chunk` chars at a time (cut at a line end), so memory stays bounded."""
    ids: dict[tuple[str, str], int] = {}
    out = array("q")
    pos, n = 0, len(low)
    while True:
        end = low.find("\n", pos + chunk) if pos + chunk < n else -1
        stop = n if end == -1 else end
        # One match per line start in [pos, stop]: `stop` is a line end, never a start
        # unless the line before it is empty (then that empty line starts there).
        out.extend(ids.setdefault(k, len(ids)) for k in _SHAPES.findall(low, pos, stop))
        if end == -1:
            return out
        pos = end + 1


@dataclass(frozen=True)
class LineIndex:
    """What a search needs of one object, computed once when it is stored.

    `view` is the text without terminal escapes (the text itself when it has none),
    `starts` the view offset of every line start, `shapes` a shape id per line and `flags`
    its log shapes (`logrank.line_flags`; empty for an index without them: no log prior).
    `esc_at` / `esc_cum` map a view offset back into the stored text: the escapes removed at
    or before view offset esc_at[k] add up to esc_cum[k] chars. Escapes never hold a line
    break, so line numbers are the same in both.
    """

    view: str
    starts: Sequence[int]
    shapes: Sequence[int]
    esc_at: Sequence[int] = ()
    esc_cum: Sequence[int] = ()
    flags: Sequence[int] = ()

    def text_offset(self, pos: int) -> int:
        """The offset in the stored text of view offset `pos`."""
        if not self.esc_at:
            return pos
        k = bisect.bisect_right(self.esc_at, pos) - 1
        return pos + (self.esc_cum[k] if k >= 0 else 0)

    def line_span(self, first: int, last: int) -> tuple[int, int, int]:
        r"""(start, end, line count): where lines `first`..`last` (1-based, inclusive, line
        breaks included) are in the stored text. `last` past the end means the last line;
        `first` past it gives the empty span at the end. A line starts right after the
        stored \n, so an escape at the start of a line belongs to that line (the view offset
        of a line start would map past it). A final line break starts no line."""
        starts = self.starts
        n = len(starts)
        if n > 1 and starts[-1] >= len(self.view):
            n -= 1
        size = len(self.view) + (self.esc_cum[-1] if self.esc_cum else 0)

        def start(i: int) -> int:  # 0-based line i: just after the \n that ends line i - 1
            return 0 if i <= 0 else self.text_offset(starts[i] - 1) + 1

        if first > n:
            return size, size, n
        return start(first - 1), start(last) if last < n else size, n


def build_index(text: str) -> LineIndex:
    """The search index of `text` (already surrogate-joined): a pass for the escapes, one
    for the line starts, one for the shapes, one per log-shape keyword for the flags."""
    esc_at, esc_cum = array("q"), array("q")
    view = text
    if "\x1b" in text:
        removed = 0
        for m in _ANSI.finditer(text):
            removed += m.end() - m.start()
            esc_at.append(m.end() - removed)  # where the next char lands in the view
            esc_cum.append(removed)
        if esc_at:
            view = _ANSI.sub("", text)
    low = fold_case(view)
    starts = line_starts(view)
    return LineIndex(view, starts, line_shapes(low), esc_at, esc_cum,
                     logrank.line_flags(view, low, starts))


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
    region's other lines after its matches, marked `context`.

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
        # of it in all (the lowest-ranked matches give way) when few of it matched.
        held = len(region) - len(others)
        reserve = max(0, min(rank.fill_reserve if rank else 0, len(region)) - held)
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
           score=None) -> None:
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
    scored = []
    starts, last = lines.starts, len(lines.starts) - 1
    for li, pos in cands.items():
        line = low[starts[li]:starts[li + 1] if li < last else len(low)]
        n = sum(map(line.__contains__, informative))
        if n >= need:
            scored.append((-n, li, pos))
    if score is not None and scored:
        # ties in shared trigrams go by the prior: computed for all candidates at once
        pri = score.scores([li for _, li, _ in scored])
        scored = [(t[0], -p, t[1], t[2]) for t, p in zip(scored, pri)]
    else:
        scored = [(t[0], 0.0, t[1], t[2]) for t in scored]
    scored.sort()
    for _, _, li, pos in scored[: limit - len(picked)]:
        picked[li] = pos


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

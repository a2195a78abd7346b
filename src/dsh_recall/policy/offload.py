"""The offload policy: which tool results leave the conversation, and the pointer form that
stays in their place (head, a note naming the object, the failure region's lines, tail).
Pure functions over plain strings, counting and slicing in Unicode code points (text already
surrogate-joined: `core.codepoints`).
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.codepoints import joins_previous
from ..rank import logrank
from ..rank.line_index import ANSI, LineIndex, build_index, count_breaks, line_starts
from .forms.base import GAP_LINE, WIDE_MAX
from .forms.base import shown as form_line
from .forms.render import layout as form_layout

if TYPE_CHECKING:  # annotations only: object get/search never import the config module
    from ..core.config import ObjectsConfig

NOTE_MARKER = "[dsh-recall: "
# The inline form: a cut inside a line is marked with CUT; a failure-region line over
# REGION_LINE_MAX chars is shown cut; the finder is asked for at most REGION_LIMIT lines.
CUT = "\u2026"
REGION_LINE_MAX = 300
REGION_LIMIT = 20
NOTE_CHARS = 160  # about what a note costs (render_note), for plan_offloads

# A harness's own "the full output is elsewhere" notice (Claude Code, dsh, shells): when the
# tail holds one it is kept whole so the agent still sees where the harness put the file.
_SPILL = re.compile(
    r"(?i)(?:full\s+(?:formatted\s+)?(?:result|output)|output\s+(?:too\s+large|truncated)"
    r"|(?:result|output)\s+(?:was\s+)?(?:stored|saved|written))"
)


def make_id(session: str, seq: int, size: int, attempt: int = 0) -> str:
    """8 hex chars from (session, seq, size); bump `attempt` on a collision."""
    key = f"{session}\x00{seq}\x00{size}\x00{attempt}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:8]


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
    while cut > 0 and joins_previous(text, cut):
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
    while 0 < start < size and joins_previous(text, start):
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


def region_line(number: int, line: str, cap: int = REGION_LINE_MAX) -> str:
    r"""A failure-region line as shown inline: `N| text`, the text after its last bare \r
    (what a terminal shows of a progress bar), cut after `cap` chars (`REGION_LINE_MAX`)
    with the count of chars left out (`forms.base.shown`)."""
    return form_line(number, line, cap)


def render_note(obj_id: str, total_chars: int, total_lines: int, first_line: int,
                last_line: int, chars: tuple[int, int] | None = None) -> str:
    """The pointer between head and region: the omitted line range (and char range, when a
    cut fell inside a line), the object id, how to get more. Paid on every later request,
    so it is one short line."""
    span = f" (chars {chars[0]}-{chars[1]})" if chars else ""
    return (f"{NOTE_MARKER}lines {first_line}-{last_line}{span} of {total_lines:,} "
            f"({total_chars:,} chars) moved to object {obj_id}; recall id={obj_id} with "
            f"lines=a-b or query=...]")


# render_note's wording, for putting a pointer form back (policy.restore).
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


@dataclass(frozen=True)
class FormPlan:
    """A typed form of `text` (`forms.registry`): its own first lines, the note, numbered
    lines and named runs of left-out lines, its own last lines. Like `InlinePlan`, all but
    the object's id."""

    text: str
    kind: str
    head_end: int
    tail_start: int
    body: tuple[str, ...]
    numbers: tuple[int, ...]
    first: int
    last: int
    lines: int

    def render(self, obj_id: str, tool: str | None = None) -> Inline | None:
        """The form naming `obj_id`, or None when it is not shorter than the text."""
        note = render_note(obj_id, len(self.text), self.lines, self.first, self.last)
        out = "".join([self.text[:self.head_end], note, "\n", *self.body,
                       self.text[self.tail_start:]])
        if len(out) >= len(self.text):
            return None
        return Inline(out, self.head_end, self.tail_start, self.numbers)


FORM_HARD = 1.5  # a typed form's failure lines may take this many times `inline_chars`


def plan_form(text: str, cfg: ObjectsConfig, idx: LineIndex,
              rank: logrank.RankConfig) -> FormPlan | None:
    """The typed form of `text` when a detector names its type (`forms.registry.detect`)
    and the form is shorter than the text, else None. Every line is shown or inside a run
    the form names with its line range; failure lines (the form's own and the first of
    the failure finder's, for a log) may take up to FORM_HARD times the budget; a failure
    line left out is counted in its run's name. When they do not all fit, the finder's first
    hit goes in first, then every failure's first line before any failure's second, a log's
    failures above its last success line (`logrank.last_success`) after the others'."""
    # Here, not at import: every form's rules load only for a put (an object read or
    # search, a cold process, never needs them).
    from .forms import registry as form_registry

    view = idx.view
    lines = view.split("\n")
    if view.endswith("\n"):
        lines.pop()
    kind = form_registry.detect(lines)
    if kind is None:
        return None
    budget = max(0, cfg.inline_chars)
    hints: list[int] = []
    settled = -1
    if form_registry.FORMS[kind].log:
        hints = logrank.digest(view, idx.starts, idx.flags, 2 * REGION_LIMIT, rank)
        settled = logrank.last_success(idx.flags)
        while settled >= 0 and form_registry.module_line(lines[settled]):
            # a Maven reactor's summary line (`core .... SUCCESS`) ends no step
            settled = logrank.last_success(idx.flags, before=settled)
    sel = form_registry.select(lines, kind, budget, int(FORM_HARD * budget), hints, settled)
    starts = line_starts(text)
    lay = form_layout(text, lines, starts, sel)
    if lay is None:
        return None
    plan = FormPlan(text, kind, lay.head_end, lay.tail_start, lay.body, lay.numbers,
                    lay.first, lay.last, len(lines))
    return plan if plan.render("0" * 8) is not None else None


def plan_inline(text: str, cfg: ObjectsConfig, over_cap: int | None = None,
                idx: LineIndex | None = None,
                rank: logrank.RankConfig | None = logrank.DEFAULT,
                forms: bool = True) -> InlinePlan | FormPlan | None:
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
    note says the middle was too big to store. With `forms`, an output of a known type
    (a test run, a compiler's, JSON, a table, a diff, an install log) gets its typed form
    instead (`plan_form`).
    """
    if forms and over_cap is None and rank is not None:
        idx = idx if idx is not None else build_index(text)
        typed = plan_form(text, cfg, idx, rank)
        if typed is not None:
            return typed
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
                  rank: logrank.RankConfig | None = logrank.DEFAULT,
                  forms: bool = False) -> Inline | None:
    """The pointer form of `text` naming `obj_id` (`plan_inline`, then its `render`), or
    None when it would not be shorter than the text itself. The generic form (head +
    failure lines + tail) unless `forms` (what `ObjectService.put` plans: typed forms on)."""
    plan = plan_inline(text, cfg, over_cap, idx, rank, forms)
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
    pieces: list[tuple[int, int]] = []  # the line ranges shown or named, in order
    typed = False
    while True:
        gap = GAP_LINE.match(text, p)  # a typed form's named run of left-out lines
        if gap is not None:
            typed = True
            if not a <= int(gap[1]) <= int(gap[2]) <= b:
                break
            pieces.append((int(gap[1]), int(gap[2])))
            p = gap.end()
            continue
        num = _REGION_NUMBER.match(text, p)
        if num is None:
            break
        n = int(num[1])
        if not a <= n <= b:
            break
        if starts is None:
            starts = line_starts(original)
        ls = starts[n - 1]
        le = starts[n] - 1 if n < len(starts) else len(original)
        line = ANSI.sub("", original[ls:le])
        for cap in (REGION_LINE_MAX, WIDE_MAX):
            got = region_line(n, line, cap)
            if text.startswith(got, p):
                p += len(got)
                pieces.append((n, n))
                break
        else:
            break
    # A typed form's lines and named runs tile the omitted range exactly.
    if typed:
        at = a
        for first, last in pieces:
            if first != at:
                return None
            at = last + 1
        if at != b + 1:
            return None
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



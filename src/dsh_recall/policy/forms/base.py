"""What every per-type inline form shares: lines marked with a rank (what to keep first) and
a category (what a left-out line is), fitted into a budget, every left-out run of lines named
with its line range.

Pure functions over lists of strings (one line each, terminal escapes already out), counting
code points. A line is shown as `region_line` shows it (`N| text`, a progress bar's last
redraw, cut after a cap with the count of chars left out); a left-out run as `gap_line`
(`… lines a-b: 118 passing tests, 2 blank lines`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ...core.codepoints import joins_previous

CUT = "\u2026"
# Ranks: lower is kept first. MUST ranks (failures and the run's summary) may spend up to
# the hard budget; the others only the form's budget.
SUMMARY, NAME, ERROR, DETAIL, WHERE = 0, 1, 2, 3, 4
MUST = WHERE
CONTEXT, NEAR, SAMPLE = 5, 6, 7
SHOWN_MAX = 300  # a numbered line's cut, as offload.REGION_LINE_MAX
WIDE_MAX = 800  # a failure record's cut (an NDJSON error record, a long error line)
GAP_COST = 60  # about what a "… lines a-b: ..." line costs, for the first fit

# CI runners' line prefixes: GitHub Actions' "job<TAB>step<TAB>" and ISO timestamps.
_PREFIX = re.compile(r"^(?:[^\t\n]{1,200}\t[^\t\n]{1,200}\t)?"
                     r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?)?")
GAP_LINE = re.compile(CUT + r" lines (\d{1,15})-(\d{1,15}): [^\n]{1,200}\n")


def bare(line: str) -> str:
    """`line` without a CI runner's job/step/timestamp prefix."""
    if not line[:1].isdigit() and "\t" not in line:
        return line
    m = _PREFIX.match(line)
    return line[m.end():] if m and m.end() else line


def shown(number: int, line: str, cap: int = SHOWN_MAX) -> str:
    r"""Line `number` (1-based) as a form shows it: `N| text`, the text after its last bare
    \r (what a terminal shows of a progress bar), cut after `cap` chars with the count of
    chars left out."""
    line = line.rstrip("\r")
    r = line.rfind("\r")
    if r != -1:
        line = line[r + 1:]
    if len(line) > cap:
        cut = cap
        while cut > 0 and joins_previous(line, cut):
            cut -= 1
        line = f"{line[:cut]}{CUT}[+{len(line) - cut:,} chars]"
    return f"{number}| {line}\n"


def gap_line(lo: int, hi: int, what: str) -> str:
    """The line naming left-out lines lo..hi (0-based, inclusive) and what they are."""
    return f"{CUT} lines {lo + 1}-{hi + 1}: {what}\n"


@dataclass
class Marks:
    """Per-line decisions of one form: `rank` (kept first when lower; unranked lines are
    left out), `fail` (a failure line: a run holding one says how many), `cat` (a singular
    noun for what the line is, counted in the name of a run left out), `wide` (shown up to
    WIDE_MAX chars)."""

    kind: str
    lines: list[str]
    rank: dict[int, int] = field(default_factory=dict)
    fail: set[int] = field(default_factory=set)
    cat: dict[int, str] = field(default_factory=dict)
    wide: set[int] = field(default_factory=set)
    # Set by `registry.select`: `first` lines are taken before all others (the output's
    # first and last lines, the failure finder's first hit); `late` failure lines come from
    # a build step that a later step's success followed (taken after the others' failure
    # lines); `hint` lines are the failure finder's, not the form's own (they never begin a
    # failure of their own when they follow one).
    first: set[int] = field(default_factory=set)
    late: set[int] = field(default_factory=set)
    hint: set[int] = field(default_factory=set)
    # A form that knows where a failure's lines are (jest: from a `●` header to the next)
    # names the line each belongs to; `order` guesses the others.
    part: dict[int, int] = field(default_factory=dict)

    def keep(self, li: int, rank: int, fail: bool = False, cat: str | None = None,
             wide: bool = False) -> None:
        """Keep line `li` at `rank` (the best rank given wins)."""
        old = self.rank.get(li)
        if old is None or rank < old:
            self.rank[li] = rank
        if fail:
            self.fail.add(li)
        if cat is not None:
            self.cat[li] = cat
        if wide:
            self.wide.add(li)

    def drop(self, li: int, cat: str) -> None:
        """Name what line `li` is when it is left out."""
        self.cat.setdefault(li, cat)


@dataclass(frozen=True)
class Selection:
    """Which lines a form shows (0-based, sorted) and the runs it leaves out: (first, last,
    label), 0-based and inclusive. Shown lines and runs cover every line once."""

    kind: str
    keep: tuple[int, ...]
    gaps: tuple[tuple[int, int, str], ...]
    wide: frozenset[int]
    must: frozenset[int]  # the shown lines of a MUST rank


def _plural(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    if noun.endswith(("s", "x", "ch", "sh")):
        return f"{n:,} {noun}es"
    if noun.endswith("y") and not noun.endswith(("ey", "ay", "oy")):
        return f"{n:,} {noun[:-1]}ies"
    return f"{n:,} {noun}s"


def label(marks: Marks, lo: int, hi: int) -> str:
    """What lines lo..hi (inclusive, left out) are: their failure lines first, then the two
    commonest categories."""
    counts: Counter[str] = Counter()
    fails = 0
    cat, lines, fail = marks.cat, marks.lines, marks.fail
    for li in range(lo, hi + 1):
        c = cat.get(li)
        if li in fail:
            fails += 1
            if c == "failure line":  # counted as one already
                continue
        if c is None:
            c = "blank line" if not lines[li].strip() else "line"
        counts[c] += 1
    parts = [_plural(fails, "failure line")] if fails else []
    common = [(c, n) for c, n in counts.most_common() if c != "blank line"] or \
        list(counts.most_common())
    parts += [_plural(n, c) for c, n in common[:2]]
    if len(common) > 2:
        parts.append(f"{sum(n for _, n in common[2:]):,} other")
    return ", ".join(parts)


def gaps_of(marks: Marks, keep: tuple[int, ...]) -> tuple[tuple[int, int, str], ...]:
    """Every run of lines `keep` leaves out, named."""
    gaps: list[tuple[int, int, str]] = []
    prev = -1
    for li in (*keep, len(marks.lines)):
        if prev + 1 <= li - 1:
            gaps.append((prev + 1, li - 1, label(marks, prev + 1, li - 1)))
        prev = li
    return tuple(gaps)


def body_chars(marks: Marks, keep: tuple[int, ...],
               gaps: tuple[tuple[int, int, str], ...]) -> int:
    """Chars of the form's lines and gap names (the note aside)."""
    lines, wide = marks.lines, marks.wide
    return sum(len(shown(li + 1, lines[li], WIDE_MAX if li in wide else SHOWN_MAX))
               for li in keep) + sum(len(gap_line(lo, hi, what)) for lo, hi, what in gaps)


JOIN_GAP = 20  # lines a failure's later lines may stand below its first (no blank between)


def order(marks: Marks) -> list[tuple[int, int, int]]:
    """(line, rank, round) of the ranked lines in the order `fit` takes them: `first` lines; then
    MUST lines round-robin over failures (every failure's first MUST line before any
    failure's second one; within a round summaries, then names and errors in file order,
    then details), those of `late` steps
    after the others; then the other ranked lines by rank and file order.

    A failure begins at a failure line of rank ERROR or better that is the form's own (or
    at a MUST line that is no failure line), and holds the DETAIL/WHERE failure lines and
    the finder's lines below it (no blank line between, at most JOIN_GAP lines down); any
    other MUST line begins its own. The lines of a failure that begins with a repeat (a
    failure line `registry.repeats` put back to NEAR) wait with it, at NEAR."""
    lines, rank, fail = marks.lines, marks.rank, marks.fail
    n = len(lines)
    eff = {li: r for li, r in rank.items() if 0 <= li < n}
    round_of: dict[int, int] = {}
    count: dict[int, int] = {}  # MUST lines so far of each failure (by its first line)
    repeat: dict[int, bool] = {}  # the failure begins with a repeat
    cur = last = -1  # the failure being read, and its last line
    for li in sorted(li for li, r in eff.items() if r <= MUST or li in fail):
        r = eff[li]
        head = marks.part.get(li, -1)
        if head in count and head != li:
            fid = head
        elif last < 0 or li - last > JOIN_GAP or (li not in marks.hint and li in fail and (
                r <= ERROR or r > MUST)) or (r <= MUST and li not in fail) or any(
                not lines[k].strip() for k in range(last + 1, li)):
            fid = cur = li
            count[fid], repeat[fid] = 0, r > MUST
            round_of[li] = 0
            last = li
            continue
        else:
            fid = cur
            last = li
        if repeat[fid] and r <= MUST and li not in marks.first:
            eff[li] = NEAR
        elif r <= MUST:
            count[fid] += 1
        round_of[li] = count[fid]

    def key(li: int) -> tuple[int, int, int, int]:
        r = eff[li]
        if li in marks.first:
            return (0, 0, r, li)
        if r <= MUST:  # summaries, then names and errors in file order, then details
            return (2 if li in marks.late else 1, round_of[li],
                    0 if r == SUMMARY else 1 if r <= ERROR else 2, li)
        return (3, 0, r, li)

    return [(li, eff[li], round_of.get(li, 0) if eff[li] <= MUST and li not in marks.first
             else 0) for li in sorted(eff, key=key)]


def fit(marks: Marks, budget: int, hard: int) -> Selection:
    """Keep ranked lines in `order`: a MUST line while the form stays within `hard` chars
    (none of a later round once one did not fit), any other while it stays within `budget`;
    then leave out
    other lines, worst first, until the form (gap names counted) is within `budget` or holds
    MUST lines only. Every run left out is named (`gaps_of`)."""
    lines = marks.lines
    kept: set[int] = set()
    used = GAP_COST
    full = None  # the round of the first MUST line that did not fit
    for li, r, rnd in order(marks):
        if r <= MUST and full is not None and rnd > full:
            continue
        cost = len(shown(li + 1, lines[li], WIDE_MAX if li in marks.wide else SHOWN_MAX))
        if li - 1 not in kept and li + 1 not in kept:
            cost += GAP_COST
        if used + cost <= (hard if r <= MUST else budget):
            kept.add(li)
            used += cost
        elif r <= MUST and full is None:
            full = rnd
    optional = sorted((li for li in kept if marks.rank[li] > MUST),
                      key=lambda li: (marks.rank[li], li))
    keep = tuple(sorted(kept))
    gaps = gaps_of(marks, keep)
    while optional and (excess := body_chars(marks, keep, gaps) - budget) > 0:
        # Worst first, enough of them at once to pay the excess (gap names change with
        # what is kept, so measured again after each batch).
        while optional and excess > 0:
            li = optional.pop()
            kept.discard(li)
            excess -= len(shown(li + 1, lines[li], WIDE_MAX if li in marks.wide else SHOWN_MAX))
        keep = tuple(sorted(kept))
        gaps = gaps_of(marks, keep)
    # A short run whose lines cost less than its name is shown instead (never a failure
    # line: those stay counted in their run's name).
    for lo, hi, what in gaps:
        if hi - lo < 3 and not any(li in marks.fail for li in range(lo, hi + 1)) and sum(
                len(shown(li + 1, lines[li])) for li in range(lo, hi + 1)) <= \
                len(gap_line(lo, hi, what)):
            kept.update(range(lo, hi + 1))
    if len(kept) > len(keep):
        keep = tuple(sorted(kept))
        gaps = gaps_of(marks, keep)
    must = frozenset(li for li in keep if marks.rank.get(li, SAMPLE) <= MUST)
    return Selection(marks.kind, keep, gaps, frozenset(marks.wide & kept), must)

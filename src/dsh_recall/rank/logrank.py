"""Where did a log fail? The failure region and a log prior: pure functions over stored
lines and their log shapes (`rank.logflags`).

A tool result that failed (a CI log, a test run, a build) usually says why in a few lines:
an error or exception message, a failing test, an assertion's expected/actual, a stack
trace, then an outcome line (`BUILD FAILED`, `exit code 1`). `logflags.line_flags` marks
each line's shapes once, when the object is stored (a `str.find` per anchor word, then a
pattern check of the lines holding one); `failure_region` and `Prior` read those flags at
search time, so a search never scans the text for them.

Rules (`RankConfig`, which `ObjectsConfig` carries as `objects.rank_*`; docs/objects.md has
each one's measured effect):

- error shape: lines weigh by kind: a message (`error:`, `FooException:`, `fatal:`), a
  failing test (`FAILED`, `--- FAIL`), an assertion diff (`expected: <1> but was: <2>`,
  `AssertionError`, pytest's `E   ` lines), a trace head (`Traceback`, `Caused by:`,
  `panic:`) most; an error phrase and an outcome (`BUILD FAILED`, `exit code 1`, `make:
  ***`: it says that it failed, not why) less; a stack frame a little; advice (`Re-run
  Maven using -X`, `Run with --stacktrace`), passes and `Errors: 0` summaries nothing;
- position: later lines weigh more (a log ends where it failed);
- first failure after the last success: error lines are grouped into blocks; a block after
  the log's last step success (`BUILD SUCCESS`, not a passing test) weighs more, blocks
  before it are not shown, and a block is shown from its first line;
- repeats collapsed: a message shown once per answer, digits ignored (Maven prints every
  compile error twice); another line when it repeats the line before it;
- stack traces and outcomes: a block keeps each trace's head and first frames, and the last
  outcome lines after it are shown beside it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .logflags import (
    ASSERT,
    BITS,
    CAUSE,
    DONE,
    ERROR,
    EXIT,
    FAIL,
    HINT,
    OK,
    PHRASE,
    TRACE,
    WARN,
    ZERO,
)

# ---- ranking ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RankConfig:
    """The log prior's rules (`objects.rank_*` in the config); 0 or False turns one off."""

    error_shape: float = 1.0      # error-shaped lines weigh by kind (0: any flagged line 1)
    position: float = 1.0         # the last line weighs 1 + this much more than the first
    after_success: float = 1.0    # a block after the log's last success weighs 1 + this
    collapse_repeats: bool = True  # a line shown once (digits ignored) is not shown again
    trace_lines: int = 3          # stack frames kept per trace run in a failure region
    outcome_lines: int = 3        # outcome lines (exit code, BUILD FAILED) kept beside it
    fill_reserve: int = 5         # region lines a failure query's answer always holds


DEFAULT = RankConfig()

# What each shape weighs. A line weighs its best kind plus a quarter of the others; a block
# weighs each kind it holds once (a message, a trace and an assertion say more than fifty
# messages alike), plus a little for how many strong lines it has.
_WEIGHTS = {ERROR: 3.0, FAIL: 3.0, ASSERT: 3.0, CAUSE: 3.0, PHRASE: 1.5, EXIT: 1.5,
            TRACE: 0.5}
_STRONG = ERROR | FAIL | ASSERT | CAUSE
_FLAGGED = _STRONG | PHRASE | EXIT | TRACE
_MASK = (1 << BITS) - 1


def effective(flag: int) -> int:
    """The kinds a line counts as: an outcome line (`##[error]Process completed with exit
    code 1`, `FAILURE: Build failed`) says that it failed, not why, so its ERROR and FAIL
    words do not count; a success or advice line counts as nothing unless it also holds
    an assertion or trace head."""
    f = flag & _MASK
    if f & HINT:
        return 0
    if f & EXIT:
        f &= ~(ERROR | FAIL)
    if f & (OK | ZERO | DONE) and not f & _STRONG:
        return 0
    return f & _FLAGGED


def _base_weight(flag: int) -> float:
    """How error-shaped a line of this (masked) flag is, before RankConfig.error_shape."""
    e = effective(flag)
    ws = sorted((w for bit, w in _WEIGHTS.items() if e & bit), reverse=True)
    w = ws[0] + 0.25 * sum(ws[1:]) if ws else 0.0
    return w * 0.3 if flag & WARN and not e & _STRONG else w


class _Table(dict[int, float]):
    """flag (masked) -> weight, each computed on first use: a log holds a few dozen of the
    4,096 flag values, and computing all of them cost a cold object search about 8 ms."""

    def __init__(self, of: Callable[[int], float]) -> None:
        super().__init__()
        self._of = of

    def __missing__(self, flag: int) -> float:
        w = self[flag] = self._of(flag)
        return w


_TABLE = _Table(_base_weight)


def line_weight(flag: int, cfg: RankConfig = DEFAULT) -> float:
    """How error-shaped a line is (0: not at all)."""
    w = _TABLE[flag & _MASK]
    if cfg.error_shape <= 0:
        return 1.0 if w > 0 else 0.0
    return w * cfg.error_shape


@functools.lru_cache(maxsize=8)
def weights(cfg: RankConfig = DEFAULT) -> Mapping[int, float]:
    """`line_weight` of each flag value under `cfg` (index by `flag & MASK`), computed as
    each value is first asked for."""
    return _Table(lambda f: line_weight(f, cfg))



_NUM = re.compile(r"\d+")
# A leading timestamp, GitHub Actions job/step columns, a log level in brackets: left out
# when comparing lines for repeats and when telling an empty line.
_PREFIX = re.compile(r"^(?:[^\t\n]*\t)*(?:\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\s*)?"
                     r"(?:\[?\s*(?:error|info|warn(?:ing)?|debug|fatal)\s*\]?:?\s*)?", re.I)


def content(line: str) -> str:
    """A line without its timestamp, CI columns and log level."""
    return _PREFIX.sub("", line, count=1).strip()


@dataclass(frozen=True)
class Block:
    """A run of error-shaped lines (with the plain or indented lines between and under
    them): first and last line index, the kinds it holds, its score."""

    first: int
    last: int
    kinds: int
    score: float


def _line_bounds(view: str, starts: Sequence[int], li: int) -> tuple[int, int]:
    """[start, end) of line `li` without its line break."""
    ls = starts[li]
    le = starts[li + 1] if li + 1 < len(starts) else len(view)
    while le > ls and view[le - 1] in "\r\n":
        le -= 1
    return ls, le


def _under(view: str, starts: Sequence[int], li: int) -> bool:
    """A line that belongs to the message above it: indented ("  symbol: x") or empty,
    once a CI prefix is left out."""
    ls, le = _line_bounds(view, starts, li)
    line = view[ls:le]
    c = content(line)
    if not c:
        return True
    rest = line[line.find(c[0]):] if c else line
    j = line.find(c)
    lead = line[:j] if j >= 0 else ""
    return rest[:1] in " \t" or lead.endswith(("  ", "\t")) or lead.endswith("] ") \
        and line[j - 3:j - 1] == "  "


def last_success(flags: Sequence[int], before: int | None = None) -> int:
    """Index of the log's last success line (a step: `BUILD SUCCESS`, `Successfully
    installed`; not a passing test), or -1; with `before`, the last one above that line."""
    for i in range(min(len(flags), len(flags) if before is None else before) - 1, -1, -1):
        f = flags[i]
        if f & DONE and not f & _STRONG:
            return i
    return -1


def blocks(view: str, starts: Sequence[int], flags: Sequence[int],
           cfg: RankConfig = DEFAULT, gap: int = 2, under: int = 12) -> list[Block]:
    """Error-shaped lines grouped into blocks, in file order. Two of them share a block
    when at most `gap` plain lines, or at most `under` indented ones, lie between, and no
    success line. A block scores each kind it holds once (plus a little per strong line),
    times the position prior (1 + `position` x where its last line is in the log) and the
    after-success bonus (1 + `after_success` when it starts after the log's last success
    line: the first failure after the last success)."""
    n = len(flags)
    weigh = weights(cfg)
    flagged = [i for i, f in enumerate(flags) if f and weigh[f & _MASK] > 0]
    if not flagged:
        return []
    last_ok = last_success(flags)
    out: list[Block] = []
    start = prev = flagged[0]
    kinds, strong = 0, 0

    def close() -> None:
        base = sum(w for bit, w in _WEIGHTS.items() if kinds & bit)
        if cfg.error_shape <= 0:
            base = 1.0
        else:
            base = base * cfg.error_shape + 0.5 * math.log2(1 + strong)
        pos = 1.0 + cfg.position * (prev / max(1, n - 1))
        bonus = 1.0 + (cfg.after_success if start > last_ok >= 0 else 0.0)
        out.append(Block(start, prev, kinds, base * pos * bonus))

    for i in flagged:
        between = i - prev - 1
        split = between > gap and not (
            between <= under and all(_under(view, starts, j) for j in range(prev + 1, i)))
        if i != start and (split or prev < last_ok < i):
            close()
            start, kinds, strong = i, 0, 0
        e = effective(flags[i])
        kinds |= e
        strong += 1 if e & _STRONG else 0
        prev = i
    close()
    return out


def failure_region(view: str, starts: Sequence[int], flags: Sequence[int], limit: int = 20,
                   cfg: RankConfig = DEFAULT, found: Sequence[Block] | None = None) -> list[int]:
    """Up to `limit` line indices (in file order) where the log most likely failed.

    The best block (see `blocks`) from its first line: its messages, the first
    `trace_lines` frames of each trace run, the lines under a message; beside it up to
    `outcome_lines` outcome lines from after it (`BUILD FAILED`, `exit code 1`); with
    room left, the frames left out, then the next blocks scoring at least half the best.
    Empty lines, advice and (with `collapse_repeats`) repeats are left out. A log without
    an error-shaped line answers with its last non-empty lines. `found`: the log's
    `blocks`, when the caller has them already.
    """
    n = len(starts)
    if limit <= 0 or n == 0:
        return []
    chosen: set[int] = set()
    # Repeats (digits ignored): a message is shown once in the whole answer (Maven prints
    # every compile error twice); any other line is left out when it repeats the line
    # shown just before it (a progress line, a recursion's frames), so a second traceback
    # keeps its own "Traceback (most recent call last):".
    seen_messages: set[str] = set()
    last_key = [""]

    def take(li: int) -> bool:
        if li in chosen:
            return False
        ls, le = _line_bounds(view, starts, li)
        line = view[ls:le]
        c = content(line)
        if not any(ch.isalnum() for ch in c):
            return False
        if cfg.collapse_repeats:
            key = _NUM.sub("0", c)
            message = bool(effective(flags[li]) & (ERROR | ASSERT | FAIL | PHRASE))
            if key == last_key[0] or (message and key in seen_messages):
                return False
            last_key[0] = key
            if message:
                seen_messages.add(key)
        chosen.add(li)
        return True

    found = blocks(view, starts, flags, cfg) if found is None else found
    if not found:
        for li in range(n - 1, -1, -1):
            if len(chosen) >= limit:
                break
            take(li)
        return sorted(chosen)
    ranked = sorted(found, key=lambda b: (-b.score, -b.last))
    best = ranked[0]
    outcomes = [i for i in range(best.last + 1, n) if effective(flags[i]) & EXIT]
    outcomes = outcomes[-cfg.outcome_lines:] if cfg.outcome_lines > 0 else []
    room = limit - len(outcomes)
    skipped: list[int] = []

    def take_block(b: Block, room: int) -> None:
        last_key[0] = ""
        frames = 0
        li = b.first
        while li < n and len(chosen) < room:
            f = flags[li]
            if li > b.last and (f & _FLAGGED or not _under(view, starts, li)
                                or li > b.last + 8):
                break
            if f & HINT:
                li += 1
                continue
            if f & TRACE and not effective(f) & ~TRACE:
                frames += 1
                if frames > cfg.trace_lines:
                    skipped.append(li)
                    li += 1
                    continue
            elif content(view[slice(*_line_bounds(view, starts, li))]):
                frames = 0
            take(li)
            li += 1

    take_block(best, room)
    for li in skipped:
        if len(chosen) >= room - 2:
            break
        take(li)
    # Errors before the last success were got over (a retry, an optional step): once the
    # best block comes after it, they are not shown.
    last_ok = last_success(flags) if best.first > last_success(flags) >= 0 else -1
    for b in ranked[1:]:
        if len(chosen) >= room or b.score < 0.5 * best.score:
            break
        if b.first > last_ok:
            take_block(b, room)
    for li in outcomes:
        if len(chosen) >= limit:
            break
        take(li)
    return sorted(chosen)[:limit]


class Prior:
    """The log prior of a line (higher first): error shape, position, and a bonus for
    lines of the failure region. Call it with a line index, or `keys` for sort keys of
    many (grade, pos, line) candidates at once."""

    REGION_BONUS = 10.0

    def __init__(self, flags: Sequence[int], region: Sequence[int], cfg: RankConfig = DEFAULT):
        self.flags, self.inside = flags, set(region)
        self.table = weights(cfg)
        self.step = cfg.position / max(1, len(flags) - 1)

    def __call__(self, li: int) -> float:
        f = self.flags[li] & _MASK if li < len(self.flags) else 0
        s = (1.0 + self.table[f]) * (1.0 + self.step * li)
        return s + self.REGION_BONUS if li in self.inside else s

    def scores(self, lines: Sequence[int]) -> list[float]:
        """The prior of many lines at once (one comprehension, no call per line)."""
        fl, tab, step, inside, bonus = self.flags, self.table, self.step, self.inside, \
            self.REGION_BONUS
        return [(1.0 + tab[fl[li] & _MASK]) * (1.0 + step * li)
                + (bonus if li in inside else 0.0) for li in lines]

    def keys(self, graded: Sequence[tuple[int, int, int]]) -> list[float]:
        """Ascending sort keys of (grade, pos, line) candidates: grade first, then the
        prior, highest first (a prior stays under 1e6)."""
        fl, tab, step, inside, bonus = self.flags, self.table, self.step, self.inside, \
            self.REGION_BONUS
        return [g * 1e6 - (1.0 + tab[fl[li] & _MASK]) * (1.0 + step * li)
                - (bonus if li in inside else 0.0) for g, _, li in graded]


def prior(flags: Sequence[int], region: Sequence[int], cfg: RankConfig = DEFAULT) -> Prior:
    """The log prior of `flags` with `region` as the failure region (see `Prior`)."""
    return Prior(flags, region, cfg)


def digest(view: str, starts: Sequence[int], flags: Sequence[int], limit: int = 40,
           cfg: RankConfig = DEFAULT, per_block: int = 2) -> list[int]:
    """Line indices of the failure region in priority order, for a view that shows a few
    lines of each failure rather than many of one (the inline form of an offloaded result):
    first the first `per_block` message lines (a message, a failing test, an assertion, a
    trace head, an outcome) of every block scoring at least half the best, best block
    first; then `failure_region`'s lines. Blocks before the log's last success are left
    out once the best block comes after it; repeats are left out as there. Empty when the
    log has no failure signal (see `failure_region`)."""
    found = blocks(view, starts, flags, cfg)
    if not any(b.kinds & (_STRONG | EXIT) for b in found):
        return []
    ranked = sorted(found, key=lambda b: (-b.score, -b.last))
    best = ranked[0]
    ok = last_success(flags)
    after = best.first > ok >= 0
    out: list[int] = []
    seen: set[int] = set()
    keys: set[str] = set()
    for b in ranked:
        if b.score < 0.5 * best.score:
            break
        if after and b.first <= ok:
            continue
        taken = 0
        for li in range(b.first, b.last + 1):
            if taken >= per_block or len(out) >= limit:
                break
            e = effective(flags[li])
            if not e & (_STRONG | EXIT | PHRASE):
                continue
            ls, le = _line_bounds(view, starts, li)
            key = _NUM.sub("0", content(view[ls:le]))
            if cfg.collapse_repeats and key in keys:
                continue
            keys.add(key)
            seen.add(li)
            out.append(li)
            taken += 1
    for li in failure_region(view, starts, flags, limit, cfg, found):
        if li not in seen and len(out) < limit:
            seen.add(li)
            out.append(li)
    return out

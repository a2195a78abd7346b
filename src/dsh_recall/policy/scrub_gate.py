"""Where a scrub rule can match, found without running it (policy/scrub.py).

A rule's regex is read once (the standard library's own parser) for two facts:
- the literals one of which every match contains (`secret` or `token` or ... for the
  password pair, `AKIA`, `ASIA`, ... for an AWS key id), lowercase when any of them is
  matched case-blind (then searched in a lowercased copy of the text);
- whether the rule is one-line: no part of it can match a `\\n` (and no `$`), so no match
  spans a line and no attempt reads past the line's `\\n`.

One pass of RE2 over the text (an RE2 set of every rule's literals; its DFA costs about
what one literal-prefixed regex pass costs) says which literals occur, so a rule none of
whose literals occurs is not run at all; a rule with a literal present runs whole, except
that on a text of 8 KB or more a one-line rule runs only over the lines holding one of its
literals, as `pattern.search(text, pos, endpos)` over the whole text: lookbehinds and the
checks after a match see the real text around, and an attempt inside a line reads nothing
past its `\\n`, so each search returns the match the whole-text search would
(tests/test_scrub_gate.py compares both on every corpus). Two rules with no selective
literal (Telegram's and Discord's tokens) are gated by an RE2 regex matching a superset of
what they match (SUPERSETS). When RE2 is missing or gives up, `str.__contains__` decides.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_parser: Any = importlib.import_module("re._parser")

_CAP = 64  # alternatives a literal set may hold before it is given up
Lits = tuple[frozenset[str], bool]  # the strings, and whether they are lowercased (case-blind)


@dataclass(frozen=True)
class Gate:
    literals: tuple[str, ...] = ()  # every match holds one of these (empty: none known)
    folded: bool = False  # the literals are lowercase: look in the lowercased text
    one_line: bool = False  # no match spans a line, no attempt reads past its `\n`
    superset: str = ""  # an RE2 regex that matches wherever the rule does (SUPERSETS)


@dataclass
class _Info:
    exact: Lits | None = None  # the whole node is one of these strings
    prefix: Lits | None = None  # every match of the node starts with one of these
    req: Lits | None = None  # every match of the node holds one of these


def _ascii_lits(strings: set[str] | frozenset[str], folded: bool) -> Lits | None:
    if len(strings) > _CAP or not all(s.isascii() for s in strings):
        return None
    return (frozenset(s.lower() for s in strings) if folded else frozenset(strings)), folded


def _product(a: Lits | None, b: Lits | None) -> Lits | None:
    if a is None or b is None or len(a[0]) * len(b[0]) > _CAP:
        return None
    folded = a[1] or b[1]
    return _ascii_lits({x + y for x in a[0] for y in b[0]}, folded)


def _union(parts: list[Lits | None]) -> Lits | None:
    if not parts or any(p is None for p in parts):
        return None
    folded = any(p[1] for p in parts if p is not None)
    return _ascii_lits({s for p in parts if p is not None for s in p[0]}, folded)


def _better(a: Lits | None, b: Lits | None) -> Lits | None:
    """The more selective: the longer shortest string, then the fewer strings."""
    def score(x: Lits) -> tuple[int, int]:
        return min((len(s) for s in x[0]), default=0), -len(x[0])
    if a is None or not a[0] or min(len(s) for s in a[0]) == 0:
        return b
    if b is None or not b[0] or min(len(s) for s in b[0]) == 0:
        return a
    return a if score(a) >= score(b) else b


def _char(c: int, icase: bool) -> Lits | None:
    ch = chr(c)
    if not ch.isascii():
        return None
    return frozenset({ch.lower() if icase else ch}), icase and ch.isalpha()


def _node(op: Any, av: Any, icase: bool) -> _Info:
    name = op.name
    if name == "LITERAL":
        e = _char(av, icase)
        return _Info(e, e, e)
    if name == "IN":
        if all(o.name == "LITERAL" for o, _ in av) and len(av) <= 8:
            e = _union([_char(c, icase) for _, c in av])
            return _Info(e, e, e)
        return _Info()
    if name in ("SUBPATTERN", "ATOMIC_GROUP"):
        if name == "SUBPATTERN":
            _group, add, dele, sub = av
            icase = (icase or bool(add & re.IGNORECASE)) and not dele & re.IGNORECASE
        else:
            sub = av
        return _seq(sub, icase)
    if name == "BRANCH":
        infos = [_seq(s, icase) for s in av[1]]
        return _Info(_union([i.exact for i in infos]), _union([i.prefix for i in infos]),
                     _union([i.req for i in infos]))
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        lo, hi, sub = av
        inner = _seq(sub, icase)
        if lo == 0:  # optional: `[_-]?` is one of `_`, `-` or nothing
            empty: Lits = (frozenset({""}), False)
            opt = _union([inner.exact, empty]) if hi == 1 and inner.exact is not None else None
            return _Info(opt, opt, None)
        exact = None
        if lo == hi and inner.exact is not None:
            exact = inner.exact
            for _ in range(lo - 1):
                exact = _product(exact, inner.exact)
        return _Info(exact, inner.prefix, inner.req)
    if name in ("ASSERT", "ASSERT_NOT", "AT"):  # zero-width: literals either side stay adjacent
        nothing: Lits = (frozenset({""}), False)
        return _Info(nothing, nothing, None)
    return _Info()  # anything else (a back reference ...): nothing known


def _seq(items: Any, icase: bool) -> _Info:
    run: Lits | None = (frozenset({""}), False)  # the exact strings since the last unknown node
    prefix: Lits | None = None
    best: Lits | None = None
    whole = True
    for op, av in items:
        info = _node(op, av, icase)
        if info.exact is not None and run is not None:
            joined = _product(run, info.exact)
            if joined is not None:
                run = joined
                continue
        if info.exact is not None:  # too many alternatives: start a new run here
            best = _better(best, run)
            if whole:  # the node is no longer one of a few strings, it starts with one
                prefix = run
            whole = False
            run = info.exact
            continue
        joined = _product(run, info.prefix) if info.prefix is not None else run
        best = _better(_better(best, joined), info.req)
        if whole:
            prefix = joined
        whole = False
        run = (frozenset({""}), False)
    if whole:
        return _Info(run, run, run)
    return _Info(None, prefix, _better(best, run))


def _reads_newline(items: Any, dotall: bool) -> bool:
    """Whether any part of a parsed pattern may match (or look ahead at) a `\\n`, or test
    for the end of the text (`$`); unknown parts count as yes."""
    for op, av in items:
        name = op.name
        if name == "LITERAL":
            if av == 10:
                return True
        elif name == "NOT_LITERAL":
            if av != 10:
                return True
        elif name == "ANY":
            if dotall:
                return True
        elif name == "IN":
            if _class_has_newline(av):
                return True
        elif name == "AT":
            if av.name not in ("AT_BEGINNING", "AT_BEGINNING_STRING", "AT_BEGINNING_LINE",
                               "AT_BOUNDARY", "AT_NON_BOUNDARY"):
                return True
        elif name == "SUBPATTERN":
            _group, add, dele, sub = av
            inner = (dotall or bool(add & re.DOTALL)) and not dele & re.DOTALL
            if _reads_newline(sub, inner):
                return True
        elif name == "ATOMIC_GROUP":
            if _reads_newline(av, dotall):
                return True
        elif name == "BRANCH":
            if any(_reads_newline(s, dotall) for s in av[1]):
                return True
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if _reads_newline(av[2], dotall):
                return True
        elif name in ("ASSERT", "ASSERT_NOT"):
            direction, sub = av
            # A lookbehind reads the text before the position it stands at: inside the line
            # or before it, never past the line's end.
            if direction > 0 and _reads_newline(sub, dotall):
                return True
        else:
            return True
    return False


_NEWLINE_CATEGORIES = {"CATEGORY_SPACE": True, "CATEGORY_NOT_SPACE": False, "CATEGORY_DIGIT": False,
                       "CATEGORY_NOT_DIGIT": True, "CATEGORY_WORD": False, "CATEGORY_NOT_WORD": True}


def _class_has_newline(items: Any) -> bool:
    negate = False
    has = False
    for op, av in items:
        name = op.name
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            has = has or av == 10
        elif name == "RANGE":
            has = has or av[0] <= 10 <= av[1]
        elif name == "CATEGORY" and av.name in _NEWLINE_CATEGORIES:
            has = has or _NEWLINE_CATEGORIES[av.name]
        else:
            return True
    return has != negate


@functools.cache
def gate(pattern: str, flags: int) -> Gate:
    """What a rule's regex says about where it can match (see the module's doc)."""
    parsed = _parser.parse(pattern, flags)
    flags = parsed.state.flags  # with the pattern's own leading `(?i)`, `(?s)`
    if flags & re.LOCALE:  # case folds of the locale: not known here
        return Gate()
    info = _seq(parsed.data, bool(flags & re.IGNORECASE))
    one_line = not _reads_newline(parsed.data, bool(flags & re.DOTALL))
    lits = info.req
    superset = SUPERSETS.get(pattern, "")
    if lits is None or not lits[0] or min(len(s) for s in lits[0]) == 0:
        return Gate(one_line=one_line, superset=superset)
    return Gate(tuple(sorted(lits[0])), lits[1], one_line, superset)


GATES_FILE = "scrub_gates.json"  # beside this module: the stored gates, data not code


def table(patterns: list[tuple[str, int]]) -> str:
    """The text of policy/scrub_gates.json: the gate of each (pattern, flags), read once
    here so that a process scrubbing one text does not parse 47 regexes (~10 ms).
    tests/test_scrub_gate.py keeps it equal to what `gate` reads now."""
    rows = []
    for p, f in patterns:
        g = gate(p, f)
        rows.append({"pattern": p, "flags": f, "literals": list(g.literals), "folded": g.folded,
                     "one_line": g.one_line, "superset": g.superset})
    return json.dumps({"written_by": "python -m dsh_recall.policy.scrub (do not edit by hand)",
                       "gates": rows}, indent=1, ensure_ascii=False) + "\n"


def stored() -> dict[tuple[str, int], Gate]:
    """The gates policy/scrub_gates.json holds, by (pattern, flags)."""
    data = json.loads(Path(__file__).with_name(GATES_FILE).read_text(encoding="utf-8"))
    return {(r["pattern"], r["flags"]): Gate(tuple(r["literals"]), r["folded"], r["one_line"],
                                             r["superset"]) for r in data["gates"]}


def fold(text: str) -> str | None:
    """`text` lowercased position for position, so that where a case-blind regex matches
    an ASCII letter the copy holds that letter in lowercase (`K` (Kelvin) -> `k`, `ı` ->
    `i`, `ſ` -> `s`); None when lowercasing changes the length (`İ`): then no gate."""
    low = text.lower()
    if len(low) != len(text):
        return None
    if not low.isascii():
        low = low.replace("\u0131", "i").replace("\u017f", "s")
    return low


# Rules with no selective literal (`\d{8,10}:...`: only `:`), and a regex RE2 runs that
# matches wherever the rule does (Python's Unicode `\d` and `\w` taken as any non-ASCII
# character too): where it finds nothing, the rule is not run.
SUPERSETS: dict[str, str] = {
    r"\d{8,10}:[0-9A-Za-z_-]{35}": r"(?:[0-9]|[^\x00-\x7f]){8}:[0-9A-Za-z_-]{35}",
    r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}":
        r"[MNO](?:[a-zA-Z0-9_-]|[^\x00-\x7f]){23,25}\.(?:[a-zA-Z0-9_-]|[^\x00-\x7f]){6}"
        r"\.(?:[a-zA-Z0-9_-]|[^\x00-\x7f]){27}",
}
_SENTINEL = "\x00scrub-gate-end\x00"
MIN_TEXT = 512  # shorter texts: every rule over the whole text (planning would cost more)
MIN_WINDOWS_TEXT = 8192  # shorter texts: a rule with a literal in them runs over all of it
MIN_RE2_TEXT = 4096  # shorter texts: `in` per literal (the RE2 set costs more than it saves)
# A process that has not imported RE2 yet (a hook, a one-shot CLI call) imports it only for
# a text this long: importing it and building the set costs about 5 ms, which `in` per
# literal spends on about 60 KB (measured on a CI log: 24 KB 3.3 against 6.2 ms, 64 KB 8.1
# against 7.1 ms, 128 KB 17.1 against 8.5 ms, each the first scrub of a fresh process).
MIN_RE2_IMPORT_TEXT = 65536
MIN_SET_LITERAL = 3  # shorter literals (`:`, `AC`) match too often for the set: `in`


def _escape(lit: str) -> str:
    return "".join(c if c.isalnum() else f"\\x{ord(c):02x}" for c in lit)


@functools.cache
def _re2_set(literals: tuple[str, ...], supersets: tuple[str, ...]) -> Any:
    """One RE2 set of `literals`, `supersets` and the sentinel last (None: no RE2 here)."""
    patterns = tuple(_escape(lit) for lit in literals) + supersets
    try:
        re2: Any = importlib.import_module("re2")
        options = re2.Options()
        options.max_mem = 64 << 20
        found = re2.Set.SearchSet(options)
        for p in patterns:
            found.Add(p)
        found.Add(_escape(_SENTINEL))
        found.Compile()
        return found
    except Exception:  # noqa: BLE001 - no RE2, or a pattern it refuses: str.find instead
        return None


def _present(hay: str, literals: tuple[str, ...], supersets: tuple[str, ...]) -> set[str]:
    """Which of `literals` and `supersets` occur in `hay`, in one pass of RE2 over it (a
    superset counts as present when RE2 cannot run or fails, which the sentinel at the
    end of the text tells)."""
    n = len(hay)
    warm = "re2" in sys.modules
    found = (_re2_set(literals, supersets)
             if n >= MIN_RE2_IMPORT_TEXT or (warm and n >= MIN_RE2_TEXT) else None)
    hits = None
    if found is not None:
        try:
            data = (hay + _SENTINEL).encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            data = None
        if data is not None:
            hits = found.Match(data) or []
            if len(literals) + len(supersets) not in hits:  # the DFA gave up before the end
                hits = None
    if hits is None:
        return {lit for lit in literals if lit in hay} | set(supersets)
    names = literals + supersets
    return {names[i] for i in hits if i < len(names)}


_SEARCHED: dict[int, tuple[tuple[Gate, ...], tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]] = {}


def _searched(gates: tuple[Gate, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What one RE2 pass looks for: the literals matched as they are and the supersets;
    the lowercase literals (in the lowercased text). Kept per tuple of gates (by identity:
    hashing 47 gates per call would cost more than a small text's scan)."""
    known = _SEARCHED.get(id(gates))
    if known is not None and known[0] is gates:
        return known[1]

    def lits(case_blind: bool) -> tuple[str, ...]:
        return tuple(sorted({lit for g in gates if g.folded == case_blind for lit in g.literals
                             if len(lit) >= MIN_SET_LITERAL}))
    searched = lits(False), tuple(sorted({g.superset for g in gates if g.superset})), lits(True)
    _SEARCHED[id(gates)] = (gates, searched)
    return searched


def plan(text: str, gates: tuple[Gate, ...]) -> list[list[tuple[int, int]] | None]:
    """For each gate, the spans of whole lines its rule's every match lies in ([]: it
    cannot match in `text`); None: run it over the whole text."""
    if len(text) < MIN_TEXT:
        return [None] * len(gates)
    raw, sups, blind = _searched(gates)
    folded = fold(text) if blind else None
    present = {(False, x) for x in _present(text, raw, sups)}
    if folded is not None:
        present |= {(True, x) for x in _present(folded, blind, ())}
    memo: dict[int, list[tuple[int, int]] | None] = {}
    out: list[list[tuple[int, int]] | None] = []
    for g in gates:
        key = id(g)
        if key not in memo:
            memo[key] = _windows(text, folded, g, present)
        out.append(memo[key])
    return out


# A literal on more lines than this per MB: the rule runs whole (a window per line would
# cost more than the regex's own pass).
MAX_LINES_PER_MB = 1500
GAP = 2048  # windows this close are searched as one


def _windows(text: str, folded: str | None, g: Gate,
             present: set[tuple[bool, str]]) -> list[tuple[int, int]] | None:
    if g.superset and (False, g.superset) not in present:
        return []
    if not g.literals:
        return None
    hay = folded if g.folded else text
    if hay is None:
        return None
    blind = g.folded
    if not g.one_line or len(text) < MIN_WINDOWS_TEXT:
        return None if any((blind, lit) in present if len(lit) >= MIN_SET_LITERAL else lit in hay
                           for lit in g.literals) else []
    lits = [lit for lit in g.literals
            if ((blind, lit) in present if len(lit) >= MIN_SET_LITERAL else lit in hay)]
    if not lits:
        return []
    limit = max(8, len(text) * MAX_LINES_PER_MB // 1_000_000)
    spans: list[tuple[int, int]] = []
    for lit in lits:
        i = hay.find(lit)
        while i >= 0:
            if len(spans) >= limit:
                return None
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            end = len(text) if end < 0 else end + 1
            spans.append((start, end))
            i = hay.find(lit, end)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1] + GAP:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


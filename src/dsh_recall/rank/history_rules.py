"""Ranking rules for history search over conversation turns. Pure: no I/O.

The history service fuses its layers into one scored list of blocks, then applies these
rules (each one a `history` config key, 0 = off; docs/history.md gives each one's measured
effect on LoCoMo):

- answer partner (`answer_share`): a turn that asks a question passes a share of its score
  to the next turn by another speaker, which is usually where the answer is (past the tool
  calls and output an agent runs before it replies).
- speaker (`speaker_boost`): a question that names one of the conversation's speakers
  prefers that speaker's turns.
- time (`time_boost`): a "when" question prefers turns that carry a time expression.
- dates (`date_boost`): a question that names a date ("in May 2023", "on 7 July") prefers
  turns dated in it: the session's date, or the date a turn's own "yesterday" / "last week"
  points to from its session's date.
- session (`session_boost`): sessions are scored by their best turns first, and the turns of
  the best sessions are lifted.
- decision (`decision_boost`): a question about what was decided, agreed or chosen, or why,
  prefers the turns that state one ("Decision: we keep X because ...", "we'll go with Y"),
  said by a person or the agent, never a tool's output: the words of a question match its
  own asking and the config a tool printed as well as the answer.
- pseudo-relevance feedback (`prf_terms`): `feedback_terms` picks expansion terms from the
  first pass's top turns; the service runs them as one more lexical ranking.

Time and decision words are English only; a question in another language simply triggers
neither rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Protocol

from .history_query import QUESTION_WORDS, STOPWORDS
from .history_query import terms as query_terms

# Roles of agent transcripts: not speaker names a question could mean.
PLAIN_ROLES = frozenset({"user", "assistant", "tool", "summary", "system"})

MONTHS = {m: i + 1 for i, m in enumerate(
    "january february march april may june july august september october november december".split())}
MONTHS.update({m[:3]: i for m, i in list(MONTHS.items())})
MONTHS["sept"] = 9
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DAY_MONTH = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b\.?,?(?:\s+{_YEAR}\b)?", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+{_DAY}\b(?!\s*(?:am|pm|:))(?:,?\s+{_YEAR}\b)?", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+{_YEAR}\b", re.I)
# A bare month only after "in" / "during" / "of" / "since" ("may" alone is a verb).
_IN_MONTH = re.compile(rf"\b(?:in|during|of|since|early|late|mid)\s+{_MONTH}\b(?!\s*\d)", re.I)
_YEAR_ONLY = re.compile(rf"\b(?:in|during|of|since|year)\s+{_YEAR}\b|\b{_YEAR}\b", re.I)
_ISO = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")

# Relative expressions in a turn, as day offsets back from its session's date (lo, hi).
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}
_NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_NUMBERS.update({"a": 1, "an": 1, "a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4})
_AGO = re.compile(r"\b(\d+|a couple of|couple of|a few|few|several|an|a|one|two|three|four|five|six|seven"
                  r"|eight|nine|ten)\s+(days?|weeks?|months?|years?)\s+ago\b", re.I)
_RELATIVE = [
    (re.compile(r"\b(yesterday|last night)\b", re.I), (1, 1)),
    (re.compile(r"\b(today|tonight|this (?:morning|afternoon|evening))\b", re.I), (0, 0)),
    (re.compile(r"\b(the other day|recently|lately|just now)\b", re.I), (0, 6)),
    (re.compile(r"\blast weekend\b", re.I), (1, 9)),
    (re.compile(r"\b(last|this past|past) week\b", re.I), (4, 13)),
    (re.compile(r"\b(last|this past) (?:mon|tues|wednes|thurs|fri|satur|sun)(?:day)?\b", re.I), (1, 8)),
    (re.compile(r"\blast month\b", re.I), (20, 62)),
    (re.compile(r"\blast year\b", re.I), (180, 730)),
    (re.compile(r"\b(tomorrow)\b", re.I), (-1, -1)),
    (re.compile(r"\bnext (?:week|weekend)\b", re.I), (-13, -1)),
    (re.compile(r"\bnext month\b", re.I), (-62, -20)),
]
# Words that place a turn in time. Narrow on purpose: "since", "weeks" or "may" alone
# are as common in explanations as in dates (a "when" question about code should not lift
# every turn that says "since").
_TIME_WORDS = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last (?:night|week|weekend|month|year|"
    r"mon|tues|wednes|thurs|fri|satur|sun)|next (?:week|weekend|month|year)|this (?:morning|"
    r"afternoon|evening|week|weekend|month|year|past)|the other day|weekend|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?|(?:19|20)\d\d|january|february|march|"
    r"april|june|july|august|september|october|november|december|(?:in|on|of) may|may \d)\b", re.I)
_WHEN = re.compile(r"^\s*(when|what (?:date|day|year|month|time)|which (?:date|day|year|month)|"
                   r"how long ago|in what year|in which (?:year|month))\b", re.I)


# A question about a decision: what was decided / agreed / chosen / settled, or why.
_DECISION_QUESTION = re.compile(
    r"\b(decid(?:e|ed|ing)|decisions?|agree(?:d|ment)?|cho(?:se|ose|osen|ice)|why|settle[ds]?|"
    r"picked|opt(?:ed)?|went with|go(?:ing)? with|conclu(?:de|ded|sion))\b", re.I)
# A turn that states one. Past or settled forms only: "we need to decide" states nothing.
_DECISION_TURN = re.compile(
    r"\b(decision|decided|agreed|chose|chosen|settled on|opted (?:for|to)|concluded|because|"
    r"we (?:keep|stay with|stick with|went with)|(?:we|i)(?:['’]ll| will) (?:keep|stay with|"
    r"stick with|go with|use)|(?:let['’]s|we['’]re|we are|i['’]m) (?:going with|keeping|"
    r"sticking with)|that['’]s why|the reason (?:is|was))\b", re.I)
_SENTENCE_END = re.compile(r"[.!?;\n]")
# Roles and block kinds of tool traffic: output and calls state no decision.
TOOL_ROLES = frozenset({"tool"})
TOOL_KINDS = frozenset({"tool_call", "tool_result"})


@dataclass(frozen=True)
class Turn:
    """A candidate block as the rules see it."""

    id: int
    session: str
    ord: int
    role: str
    text: str
    day: date | None = None  # its session's (or event's) date, when known
    kind: str = "text"  # the block's kind (chunkers/transcript: text, tool_call, tool_result, ...)


# -- speakers -------------------------------------------------------------------------------

def named_speakers(query: str, roles: Iterable[str]) -> set[str]:
    """The roles (speaker names, never the plain agent roles) the query writes as a word."""
    words = set(re.findall(r"\w+", query.lower()))
    return {r for r in set(roles)
            if r and r.lower() not in PLAIN_ROLES and all(w in words for w in r.lower().split())}


# -- time -----------------------------------------------------------------------------------

def is_when_question(query: str) -> bool:
    """Does the question ask for a time ("When did...", "What year...", "How long ago...")?"""
    return bool(_WHEN.search(query))


def has_time_expression(text: str) -> bool:
    return bool(_TIME_WORDS.search(text))


def _month_range(year: int, month: int) -> tuple[date, date]:
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return date(year, month, 1), nxt - timedelta(days=1)


def _safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def question_dates(query: str, years: Sequence[int] = ()) -> list[tuple[date, date]]:
    """Date ranges the query names: a day, a month of a year, a year, or a month alone
    (then in each of `years`, the years the scope's sessions span). Relative words in the
    query are not resolved: their anchor (now? the last session?) is a guess."""
    return _dates(query, years)[0]


def date_words(query: str) -> set[str]:
    """The query's words that belong to a date it names ("may", "3", "2023" of "on May 3,
    2023"): a turn dated in it holds them, whether or not its text writes them."""
    return {w for a, b in _dates(query, ())[1] for w in re.findall(r"\w+", query[a:b].lower())}


def _dates(query: str, years: Sequence[int]) -> tuple[list[tuple[date, date]], list[tuple[int, int]]]:
    out: list[tuple[date, date]] = []
    used: list[tuple[int, int]] = []

    def free(m: re.Match) -> bool:
        return not any(a < m.end() and m.start() < b for a, b in used)

    for m in _ISO.finditer(query):
        d = _safe_date(int(m[1]), int(m[2]), int(m[3]))
        if d:
            out.append((d, d))
            used.append(m.span())
    for rx, order in ((_DAY_MONTH, "dmy"), (_MONTH_DAY, "mdy")):
        for m in rx.finditer(query):
            if not free(m):
                continue
            day_s, mon_s = (m[1], m[2]) if order == "dmy" else (m[2], m[1])
            mon = MONTHS.get(mon_s.lower().rstrip("."))
            if mon is None or not 1 <= int(day_s) <= 31:
                continue
            for y in ([int(m[3])] if m[3] else list(years)):
                d = _safe_date(y, mon, int(day_s))
                if d:
                    out.append((d, d))
            used.append(m.span())
    for m in _MONTH_YEAR.finditer(query):
        if free(m) and (mon := MONTHS.get(m[1].lower())):
            out.append(_month_range(int(m[2]), mon))
            used.append(m.span())
    for m in _IN_MONTH.finditer(query):
        if free(m) and (mon := MONTHS.get(m[1].lower())):
            out += [_month_range(y, mon) for y in years]
            used.append(m.span())
    for m in _YEAR_ONLY.finditer(query):
        if free(m):
            y = int(m[1] or m[2])
            out.append((date(y, 1, 1), date(y, 12, 31)))
            used.append(m.span())
    return out, used


def turn_dates(text: str, day: date | None) -> list[tuple[date, date]]:
    """The dates a turn speaks of: its session's day, the days its relative expressions
    point to from that day ("yesterday", "last week", "two months ago"), and dates it
    writes out (a month alone or a day without a year take the session's year)."""
    if day is None:
        return []
    out = [(day, day)]
    for rx, (lo, hi) in _RELATIVE:
        if rx.search(text):
            out.append((day - timedelta(days=hi), day - timedelta(days=lo)))
    for m in _AGO.finditer(text):
        n = m[1].lower()
        k = int(n) if n.isdigit() else _NUMBERS.get(n, 1)
        back = k * _UNITS[m[2].lower()]
        slack = max(1, back // 4)
        out.append((day - timedelta(days=back + slack), day - timedelta(days=max(0, back - slack))))
    out += question_dates(text, years=(day.year,))
    return out


def dates_overlap(a: Sequence[tuple[date, date]], b: Sequence[tuple[date, date]]) -> bool:
    return any(lo1 <= hi2 and lo2 <= hi1 for lo1, hi1 in a for lo2, hi2 in b)


# -- decisions ------------------------------------------------------------------------------

class _Block(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def kind(self) -> str: ...


def is_tool(block: _Block) -> bool:
    """Is the block (a Turn, a store's row) tool traffic, a call or its output, rather than
    someone's turn?"""
    return block.role in TOOL_ROLES or block.kind in TOOL_KINDS


def asks_decision(query: str) -> bool:
    """Does the question ask what was decided, agreed or chosen, or why?"""
    return bool(_DECISION_QUESTION.search(query))


def states_decision(turn: Turn) -> bool:
    """Is the turn someone stating a decision or its reason: a marker ("decided", "because",
    "we'll go with") in a sentence that does not end in a question mark, said by a person
    or the agent, not by a tool?"""
    if is_tool(turn):
        return False
    for m in _DECISION_TURN.finditer(turn.text):
        end = _SENTENCE_END.search(turn.text, m.end())
        if end is None or end.group() != "?":
            return True
    return False


# -- score rules over a fused list ---------------------------------------------------------

def answer_partner(scores: Mapping[int, float], turns: Mapping[int, Turn],
                   next_turn: Mapping[int, int], share: float) -> dict[int, float]:
    """Each turn that asks something ('?') passes `share` of its score to the next turn
    when another speaker says it: the answer sits right after its question. `next_turn`
    maps a turn to the next one that is not tool traffic (an agent reads and runs things
    before it replies); tool traffic neither asks nor answers."""
    out = dict(scores)
    if share <= 0:
        return out
    for i, s in scores.items():
        t, n = turns.get(i), next_turn.get(i)
        if t is None or n is None or n not in turns or "?" not in t.text or is_tool(t) or is_tool(turns[n]):
            continue
        if turns[n].role != t.role:
            out[n] = out.get(n, 0.0) + share * s
    return out


def boost(scores: Mapping[int, float], chosen: Iterable[int], factor: float) -> dict[int, float]:
    """Multiply the chosen ids' scores by (1 + factor)."""
    out = dict(scores)
    for i in chosen:
        if i in out:
            out[i] *= 1.0 + factor
    return out


def session_lift(scores: Mapping[int, float], turns: Mapping[int, Turn], factor: float,
                 top_turns: int = 3) -> dict[int, float]:
    """Session-then-turn: a session scores the sum of its best `top_turns` turn scores; each
    turn gains `factor` x its session's score over the best session's, times its own."""
    if factor <= 0 or not scores:
        return dict(scores)
    per: dict[str, list[float]] = {}
    for i, s in scores.items():
        if i in turns:
            per.setdefault(turns[i].session, []).append(s)
    sess = {k: sum(sorted(v, reverse=True)[:top_turns]) for k, v in per.items()}
    best = max(sess.values(), default=0.0)
    if best <= 0:
        return dict(scores)
    return {i: s * (1.0 + factor * sess[turns[i].session] / best) if i in turns else s
            for i, s in scores.items()}


def ranked(scores: Mapping[int, float], order: Sequence[int]) -> list[tuple[int, float]]:
    """(id, score) best first; ties keep `order` (then new ids by id)."""
    pos = {i: k for k, i in enumerate(order)}
    return sorted(scores.items(), key=lambda x: (-x[1], pos.get(x[0], len(pos)), x[0]))


# -- pseudo-relevance feedback -------------------------------------------------------------

def feedback_terms(query: str, top_texts: Sequence[str], df: Mapping[str, int], n_docs: int,
                   n_terms: int, exclude: Iterable[str] = ()) -> list[str]:
    """Up to `n_terms` expansion terms from the first pass's best turns: words that recur
    across them and are rare in scope (tf x idf summed over the turns, a term must appear in
    two of them when there are several), never the query's own terms, function words or
    `exclude` (speaker names). `df` maps a term to its document frequency in scope."""
    if n_terms <= 0 or not top_texts:
        return []
    own = set(query_terms(query)) | {w.lower() for w in exclude}
    weight: dict[str, float] = {}
    seen_in: dict[str, int] = {}
    for text in top_texts:
        toks = [t for t in re.findall(r"[a-z][a-z']+", text.lower()) if len(t) > 2]
        counts: dict[str, int] = {}
        for t in toks:
            t = t.strip("'")
            if t.endswith("'s"):
                t = t[:-2]
            if t in STOPWORDS or t in QUESTION_WORDS or t in own or len(t) < 3:
                continue
            counts[t] = counts.get(t, 0) + 1
        for t, c in counts.items():
            seen_in[t] = seen_in.get(t, 0) + 1
            weight[t] = weight.get(t, 0.0) + (1 + math.log(c))
    need = 2 if len(top_texts) > 2 else 1
    scored = []
    for t, w in weight.items():
        if seen_in[t] < need or t not in df:
            continue
        idf = math.log((n_docs + 1) / (df[t] + 0.5))
        if idf > 0:
            scored.append((w * idf, t))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [t for _, t in scored[:n_terms]]


def candidate_words(top_texts: Sequence[str]) -> list[str]:
    """The words of the top turns whose document frequency `feedback_terms` needs."""
    out: dict[str, None] = {}
    for text in top_texts:
        for t in re.findall(r"[a-z][a-z']+", text.lower()):
            t = t.strip("'")
            if t.endswith("'s"):
                t = t[:-2]
            if len(t) >= 3 and t not in STOPWORDS and t not in QUESTION_WORDS:
                out[t] = None
    return list(out)

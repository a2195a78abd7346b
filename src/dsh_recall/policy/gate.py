"""The auto-recall gate: should this user message pull earlier conversation back in?

A pure, deterministic function (no model call, no I/O): the caller hands in what the older
turns contain (any container answering `term in older`, e.g. a set, or an object probing a
fuzzy index) and the live-injection state; the gate answers fire / stay quiet, why, and what
to search for.

It fires on two kinds of message:
- (P) process commands: the whole message is "continue", "go on", "I restarted", "resume",
  继续, 我重启了 ... The model lost its thread; recall the previous turn's topics.
- (A) past references: "as we discussed", "what did we decide", "remember when", 之前说,
  记得吗 ... but only when the referring segments (the message's own content words and CJK
  bigrams, minus the trigger wording) hit older turns. "As we discussed, use Kafka" fires
  only if Kafka was discussed.

An injection stays live for 3 turns (1 after a restore: "I restarted", "resume"), and the
gate does not fire again while one is live.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Container, Sequence
from dataclasses import dataclass

from ..core.text import cjk_bigrams, is_cjk

GATE_VERSION = "gate-1"
TTL_TURNS = 3
TTL_AFTER_RESTORE = 1
MAX_PROCESS_WORDS = 12
MAX_PROCESS_CJK = 16

_POLITE = r"(?:ok(?:ay)?|alright|right|yes|yeah|sure|so|now|please|pls|thanks|thank you|hey|hi|cool|great|good)"
_PROC_EN = [
    r"continue(?: (?:please|now|on|from (?:there|here)|where (?:we|you) (?:left off|stopped)))?",
    r"(?:please )?go on", r"go ahead", r"keep (?:going|on)", r"carry on", r"proceed", r"next step",
    r"resume(?: (?:please|the (?:task|work|session)|where (?:we|you) left off))?",
    r"pick up where (?:we|you) left off", r"where were we", r"where did we (?:leave off|stop)",
    r"(?:i|we)(?:'ve| have)? (?:just )?(?:restarted|rebooted|reloaded|reopened)(?: (?:the |my )?(?:session|app|server|terminal|cli|editor|machine|computer|agent|ide))?",
    r"(?:i|we)(?:'m| am| are) back", r"back again", r"let'?s continue", r"let'?s resume",
    r"continue with (?:the|that|what you were doing)(?: task| work| plan)?",
]
_RESTORE_WORDS = re.compile(r"restart|reboot|reload|reopen|resume|back|重启|重开|恢复|回来")
_PROC_ZH = re.compile(
    r"^(?:好的?|嗯|那|请|麻烦)*(?:继续|接着(?:做|来|干|写|弄)?|往下(?:做|走)?|我?(?:刚|已经)?重启了?"
    r"(?:一下|会话|程序|服务|电脑)?|我?回来了?|恢复(?:工作|任务|会话)?|继续刚才的(?:工作|任务|事)?"
    r"|我们继续|继续之前的(?:工作|任务)?|下一步)+$")
_ZH_FILLER = re.compile(r"[吧啊呢了呀哈吗嘛哦噢，。！？、,.!?\s~～…]+")

_PAST_EN = [
    r"as (?:we|i|you) (?:discussed|said|mentioned|agreed|decided|planned|talked about)",
    r"(?:like|what) (?:you|we|i) (?:said|mentioned|suggested|decided|agreed)",
    r"(?:you|we) (?:already )?(?:mentioned|discussed|decided|agreed|talked about|said earlier|were saying|settled on|went with|chose|picked)",
    r"you told me", r"i told you", r"i (?:said|mentioned) (?:earlier|before)",
    r"remember (?:when|what|how) (?:we|you)\b", r"remember when i\b",
    r"remember (?:the|that|those|our|your|my) (?:\S+ ){0,5}(?:i|we|you) (?:told|said|mentioned|talked|discussed|showed|suggested)",
    r"(?:do|did|can|don'?t) you (?:still )?remember", r"(?:i|we) (?:do )?remember you (?:mentioning|saying|telling|talking)",
    r"what did (?:we|you|i) (?:decide|say|agree|choose|pick|conclude|settle|use|do)",
    r"what was (?:the|that|our) .{0,40}(?:again|we (?:used|chose|picked|decided))",
    r"last time (?:we|you|i)\b", r"earlier (?:you|we)\b", r"(?:you|we) (?:said|did) (?:before|earlier|previously)",
    r"the (?:one|thing|plan|idea|fix|approach) (?:we|you) (?:discussed|mentioned|talked about|suggested)",
]
# A question that opens with "remember ..." ("Remember the festival I told you about?").
_REMEMBER_Q = re.compile(r"(?:^|[.!] )remember (?:the|that|those|our|when)\b[^.!?]*\?")
# Greetings that mention the past without referring to any content.
_SINCE = re.compile(r"\bsince (?:we (?:last )?(?:talked|spoke|chatted|met)|(?:our )?last (?:time|chat|talk)|we spoke last)\b")
_PAST_ZH = re.compile(
    r"之前(?:说|讲|提|讨论|聊|决定|定|用|改|做)|先前|记得吗|还记得|记不记得|你记得|上次|上回|刚才(?:说|提|讲)"
    r"|前面(?:说|提|讲)|我们(?:讨论|聊|说|商量|决定|定)(?:过|好|的)|(?:你|我)(?:说|提)过|说好的|当时(?:说|决定)")
_IMPERATIVE_REMEMBER = re.compile(r"^(?:just |but |and |also |always |please )?remember(?:,| to | that (?!we |you |time))")
_REMEMBER_TYPO = re.compile(r"\brem[ae]n?m?ber\b|\bremmeber\b|\bremeber\b")

_STOP = frozenset("""a about above after again against all also am an and any are aren as at be because been
before being below between both but by can could did didn do does doesn doing don down during each
few for from further had has have having he her here hers herself him himself his how i if in into is
isn it its itself just let like me more most my myself no nor not now of off on once only or other our
ours ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was wasn we were weren what when
where which while who whom why will with would you your yours yourself yourselves ok okay yes yeah hey hi
thanks thank please really so much many lot lots thing things stuff something anything one get got
going go make made use used want need know think say said tell told talk talked mention mentioned
discuss discussed decide decided remember remembered agree agreed last time earlier before previously
again still already back ago day days week weeks today yesterday well good great awesome cool nice
since sometimes lately recently fun wow totally definitely maybe
""".split())
_ZH_STOP_CHARS = set("的了是在我你他她它们这那就都也还和与把被说吗呢吧啊之前上次记得刚才前面讨论过决定好个一有没不要会什么么怎样哪")


@dataclass(frozen=True)
class GateState:
    """Live-injection state: the turn number now, and the last turn an injection covers."""

    turn: int = 0
    live_until: int | None = None

    @property
    def live(self) -> bool:
        return self.live_until is not None and self.turn <= self.live_until


@dataclass(frozen=True)
class GateDecision:
    fire: bool
    kind: str | None  # "process" | "past_reference" | None
    reason: str
    query_terms: tuple[str, ...] = ()
    segments: tuple[str, ...] = ()
    matched: tuple[str, ...] = ()
    ttl: int = 0
    restore: bool = False

    def expires_after(self, turn: int) -> int | None:
        """The last turn this injection stays live (None when it did not fire)."""
        return turn + self.ttl - 1 if self.fire else None


def normalize(message: str) -> str:
    """NFKC, lower case, curly quotes straightened, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", message).lower()
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text).strip()


_PROC_EN_RE = re.compile(
    rf"^(?:{_POLITE}[ ,.!]*)*(?:{'|'.join(_PROC_EN)})(?:[ ,.!]*(?:{_POLITE}|and|then))*[ .!?]*$")


def is_process_command(message: str) -> tuple[bool, bool]:
    """(is a process command, is a restore). Every clause must be one; short messages only."""
    text = normalize(message)
    if not text:
        return False, False
    if any(is_cjk(c) for c in text):
        compact = _ZH_FILLER.sub("", text)
        if not compact or len(compact) > MAX_PROCESS_CJK:
            return False, False
        ok = bool(_PROC_ZH.match(compact))
        return ok, ok and bool(_RESTORE_WORDS.search(compact))
    if len(text.split()) > MAX_PROCESS_WORDS:
        return False, False
    clauses = [c.strip() for c in re.split(r"[,;.!?]+| and | then ", text) if c.strip()]
    polite = re.compile(rf"^(?:{_POLITE}[ ]*)+$")
    clauses = [c for c in clauses if not polite.match(c)]
    ok = bool(clauses) and all(_PROC_EN_RE.match(c) for c in clauses)
    return ok, ok and bool(_RESTORE_WORDS.search(text))


_PAST_EN_RE = re.compile(r"\b(?:" + "|".join(_PAST_EN) + r")\b")


def past_reference(message: str) -> str | None:
    """The past-reference wording found in the message, or None."""
    text = normalize(message)
    m = _PAST_ZH.search(text)
    if m:
        return m.group(0)
    text = _REMEMBER_TYPO.sub("remember", text)
    text = _SINCE.sub(" ", text)
    text = re.sub(r"(^|[.!?] )" + _IMPERATIVE_REMEMBER.pattern[1:], r"\1", text)
    m = _PAST_EN_RE.search(text) or _REMEMBER_Q.search(text)
    return m.group(0).strip(" .!") if m else None


def referring_segments(message: str) -> tuple[str, ...]:
    """The message's content words (>= 3 chars, no stop words) and CJK bigrams, in order.

    Trigger wording and function words are left out: they say *that* the user refers back,
    not *what* to; only the rest can be looked up in older turns.
    """
    text = _REMEMBER_TYPO.sub("remember", normalize(message))
    out: list[str] = []
    for w in re.findall(r"[a-z0-9_][a-z0-9_\-./]*", text):
        w = w.strip("-./")
        if len(w) >= 3 and w not in _STOP and not w.isdigit():
            out.append(w)
            if w.endswith("s") and len(w) > 4:
                out.append(w[:-1])  # plural -> singular, a cheap stem
    for bg in cjk_bigrams(text):
        if len(bg) == 2 and not (bg[0] in _ZH_STOP_CHARS and bg[1] in _ZH_STOP_CHARS) \
                and not _PAST_ZH.search(bg):
            if bg[0] in _ZH_STOP_CHARS or bg[1] in _ZH_STOP_CHARS:
                continue
            out.append(bg)
    return tuple(dict.fromkeys(out))  # each once, first place kept


def gate(message: str, older: Container[str], previous_turn_terms: Sequence[str] = (),
         state: GateState = GateState(), min_hits: int = 1, min_share: float = 0.2) -> GateDecision:
    """Decide whether to inject recalled history before the model sees `message`.

    older: answers `segment in older` for segments of older turns (the fuzzy index).
    previous_turn_terms: topics of the previous turn, recalled on a process command.
    """
    if state.live:
        return GateDecision(False, None, f"an injection is live until turn {state.live_until}")
    proc, restore = is_process_command(message)
    if proc:
        terms = tuple(dict.fromkeys(previous_turn_terms))[:12]
        if not terms:
            return GateDecision(False, "process", "process command, but no previous turn to recall")
        ttl = TTL_AFTER_RESTORE if restore else TTL_TURNS
        return GateDecision(True, "process", "process command: recall the previous turn",
                            terms, (), (), ttl, restore)
    wording = past_reference(message)
    if wording is None:
        return GateDecision(False, None, "no process command and no past-reference wording")
    segs = referring_segments(message)
    if not segs:
        return GateDecision(False, "past_reference", f"'{wording}' but nothing it refers to")
    matched = tuple(s for s in segs if s in older)
    need = max(min_hits, math.ceil(min_share * len(segs)))
    if len(matched) < need:
        return GateDecision(False, "past_reference",
                            f"'{wording}' but {len(matched)}/{len(segs)} segments hit older turns",
                            (), segs, matched)
    return GateDecision(True, "past_reference",
                        f"'{wording}' and {len(matched)}/{len(segs)} segments hit older turns",
                        matched, segs, matched, TTL_TURNS)


def vocabulary(texts: Sequence[str]) -> frozenset[str]:
    """The segments of some older turns, as a set `gate` can probe (for tests and the bench)."""
    out: set[str] = set()
    for t in texts:
        out.update(referring_segments(t))
    return frozenset(out)

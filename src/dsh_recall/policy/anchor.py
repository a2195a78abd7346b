"""The compaction anchor: one bounded block injected right after a compaction.

Pure: given the compaction summary and the original events it replaced, keep the summary
plus up to 4 key original fragments (the turns that state a decision, a reason or an open
task, the user's own first), each cut to a share of the budget, and say how to get the exact
text back (one recall call). The anchor lives for 3 turns; it does not silence the history
gate (a question about something the summary lost still gets its own recall).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

ANCHOR_TTL_TURNS = 3


def pointer(label: str, session: str) -> str:
    """How to fetch an event's exact text, valid under either MCP tool profile: the compact
    one's `recall` (the one dsh mounts) and the full set's `history_detail`."""
    return (f"{label}: recall id=\"{session}#<seq>\" (full tool set: history_detail "
            f"session=\"{session}\" around=<seq>).")
MAX_FRAGMENTS = 4


@dataclass(frozen=True)
class Fragment:
    seq: int
    role: str
    text: str
    full_chars: int


@dataclass(frozen=True)
class Anchor:
    session: str
    summary: str
    fragments: tuple[Fragment, ...] = field(default_factory=tuple)
    ttl: int = ANCHOR_TTL_TURNS

    def as_dict(self) -> dict[str, Any]:
        return {"session": self.session, "summary": self.summary, "ttl": self.ttl,
                "fragments": [f.__dict__ for f in self.fragments]}

    def render(self) -> str:
        """The text a harness injects (e.g. Claude Code additionalContext)."""
        lines = [f"[dsh-recall] Context was compacted. Summary of session {self.session}:",
                 self.summary.strip()]
        if self.fragments:
            lines.append("Key original fragments (verbatim, possibly cut):")
            for f in self.fragments:
                cut = f" (cut; {f.full_chars} chars in all)" if len(f.text) < f.full_chars else ""
                lines.append(f"- seq {f.seq} {f.role}{cut}: {f.text}")
        lines.append(pointer("Exact original text", self.session)
                     + " Search more: recall source=history (full tool set: history_search).")
        return "\n".join(lines)


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


# What a decision or an open task sounds like, in the user's words or the agent's: the
# fragments a summary most often loses and the next turns most need.
_DECISION = re.compile(
    r"\b(decid\w*|agreed?|chose|choose|keep|kept|don'?t|do not|never|always|must|should|"
    r"instead|because|so that|we'?ll|let'?s|plan|todo|next|still|remaining|left to|open|"
    r"blocked|wait(?:ing)? for|later|follow[- ]up)\b", re.I)


def _weight(e: dict[str, Any]) -> tuple[int, int]:
    text = e.get("text") or ""
    cues = len(_DECISION.findall(text[:4000]))
    return (min(cues, 6) + (2 if e.get("role") == "user" else 0), int(e["seq"]))


def build_anchor(session: str, summary: str, events: Sequence[dict[str, Any]],
                 budget_chars: int = 2400, max_fragments: int = MAX_FRAGMENTS) -> Anchor:
    """Summary + up to `max_fragments` fragments of `events` ({seq, role, text}), within
    `budget_chars` in all. Fragments are the turns (the user's or the agent's) that state a
    decision, a reason or an open task, weighted to the user's own words and then to the
    newest; tool output is never a fragment (it is recallable on demand)."""
    summary_part = _cut(summary, max(200, budget_chars // 2))
    turns = [e for e in events if e.get("role") in ("user", "assistant") and (e.get("text") or "").strip()]
    picked: list[dict[str, Any]] = sorted(turns, key=_weight, reverse=True)[:max_fragments]
    picked.sort(key=lambda e: int(e["seq"]))
    room = max(0, budget_chars - len(summary_part))
    share = room // max(1, len(picked))
    frags = tuple(Fragment(int(e["seq"]), str(e["role"]), _cut(e["text"], share), len(e["text"]))
                  for e in picked if share >= 40)
    return Anchor(session, summary_part, frags)

"""The compaction anchor: one bounded block injected right after a compaction.

Pure: given the compaction summary and the original events it replaced, keep the summary
plus up to 3 key original fragments (the user's own messages first, then the longest text
blocks), each cut to a share of the budget, and say how to get the exact text back (one
history_detail call). The anchor lives for 3 turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

ANCHOR_TTL_TURNS = 3
MAX_FRAGMENTS = 3


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
        lines.append(f"Exact original text: history_detail(session=\"{self.session}\", "
                     "around=<seq>). Search more with history_search.")
        return "\n".join(lines)


def _cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


def build_anchor(session: str, summary: str, events: Sequence[dict[str, Any]],
                 budget_chars: int = 2400, max_fragments: int = MAX_FRAGMENTS) -> Anchor:
    """Summary + up to `max_fragments` fragments of `events` ({seq, role, text}), within
    `budget_chars` in all. User messages come first (newest first), then the longest
    assistant text blocks; tool output is never a fragment (it is recallable on demand)."""
    summary_part = _cut(summary, max(200, budget_chars // 2))
    users = [e for e in events if e.get("role") == "user" and (e.get("text") or "").strip()]
    others = [e for e in events if e.get("role") == "assistant" and (e.get("text") or "").strip()]
    picked: list[dict[str, Any]] = sorted(users, key=lambda e: -int(e["seq"]))[:max_fragments]
    if len(picked) < max_fragments:
        longest = sorted(others, key=lambda e: (-len(e["text"]), int(e["seq"])))
        picked += longest[: max_fragments - len(picked)]
    picked.sort(key=lambda e: int(e["seq"]))
    room = max(0, budget_chars - len(summary_part))
    share = room // max(1, len(picked))
    frags = tuple(Fragment(int(e["seq"]), str(e["role"]), _cut(e["text"], share), len(e["text"]))
                  for e in picked if share >= 40)
    return Anchor(session, summary_part, frags)

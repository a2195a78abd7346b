"""What the object service answers: an offload (`PutResult`), a range (`GetResult`), the
lines of one object (`SearchResult`), a search across objects (`ObjectsAnswer`), and what
`reclaim` is given (`ResultText`). Plain data, JSON-ready through `to_dict`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ...core.errors import InputError
from ..base import Answer

if TYPE_CHECKING:  # an object read loads no line search (rank/line_limits.py)
    from ...rank.line_search import LineMatch

LINES = re.compile(r"\s*(\d+)\s*-\s*(\d+)\s*")


def line_range(value: str) -> tuple[int, int]:
    """(a, b) of a line range "a-b" with 1 <= a <= b (what every offload notice says:
    `lines=a-b`), else an InputError."""
    m = LINES.fullmatch(value)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise InputError(f"lines must be 'a-b' with 1 <= a <= b (e.g. lines=\"120-160\"); "
                         f"got {value[:40]!r}")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class PutResult:
    """`inline` is what stays in the conversation; `id` is None when nothing was stored.
    `dropped`: the result was over the size cap, so its middle left the context unstored."""

    id: str | None
    inline: str
    chars: int
    offloaded: bool
    dropped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GetResult:
    id: str
    start: int
    text: str
    total: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ResultText:
    """One tool result of a conversation for `reclaim`: text None for a non-text block."""

    seq: int
    text: str | None
    tool: str | None = None


@dataclass(frozen=True)
class SearchResult:
    """Matching lines of one object, best first; `note` says when the query was cut.
    `failures`: the lines are the failure finder's (no query), in file order."""

    id: str
    matches: list[LineMatch] = field(default_factory=list)
    note: str | None = None
    failures: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "matches": [m.to_dict() for m in self.matches]}
        if self.failures:
            out["failures"] = True
        if self.note:
            out["note"] = self.note
        return out


class ObjectsAnswer(Answer, total=False):
    """A search across objects. Each result: `id`, `tool`, `chars` (the object's size),
    `line` (its best line) and `matches` (up to OBJECT_LINES lines: line, offset, text)."""

    scanned: int  # live objects searched (the newest OBJECTS_SCANNED the viewer may see)

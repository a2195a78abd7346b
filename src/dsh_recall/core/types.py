"""Plain, frozen data passed between layers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Chunk:
    """A span of one file: lines [start_line, end_line], 1-based and inclusive."""

    path: str
    start_line: int
    end_line: int
    text: str
    language: str = "text"
    symbols: tuple[str, ...] = ()
    kind: str = "block"  # declaration | heading | block | ...


@dataclass(frozen=True)
class SourceFile:
    """A file found by a walker, not yet read into the index."""

    path: str  # display path: relative to the workspace, or "<root label>/<rel>"
    abs_path: str
    root: str  # "" for the workspace itself, else the source root's label
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Ranked:
    """One ranker's answer: an item id and its 1-based rank."""

    item: int
    rank: int
    score: float = 0.0


@dataclass(frozen=True)
class Fused:
    item: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)

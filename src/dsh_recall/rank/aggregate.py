"""Event aggregation: block hits close together in a session become one event. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class BlockHit:
    """A ranked block: `ord` is its position among the session's blocks, `seq` its event."""

    block: int
    session: str
    ord: int
    seq: int
    score: float
    layers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Event:
    """Hits of one session no more than `gap` blocks apart, spanning seqs [start_seq..end_seq]."""

    session: str
    start_seq: int
    end_seq: int
    hits: tuple[BlockHit, ...]  # best first
    score: float

    @property
    def best(self) -> BlockHit:
        return self.hits[0]


def aggregate(hits: Iterable[BlockHit], gap: int) -> list[Event]:
    """Group hits into events, best event first.

    Within a session, hits sorted by block position merge while the distance from the
    previous hit is at most `gap` blocks. An event scores as its best hit plus a small share
    of the next three, so several agreeing hits lift an event without letting a long run of weak
    ones beat one strong hit.
    """
    by_session: dict[str, list[BlockHit]] = {}
    for h in hits:
        by_session.setdefault(h.session, []).append(h)
    events: list[Event] = []
    for sid, group in by_session.items():
        group.sort(key=lambda h: (h.ord, -h.score))
        run: list[BlockHit] = []
        for h in group:
            if run and h.ord - run[-1].ord > gap:
                events.append(_event(sid, run))
                run = []
            run.append(h)
        if run:
            events.append(_event(sid, run))
    events.sort(key=lambda e: (-e.score, e.session, e.start_seq))
    return events


def _event(session: str, run: list[BlockHit]) -> Event:
    ranked = tuple(sorted(run, key=lambda h: (-h.score, h.ord)))
    score = ranked[0].score + 0.1 * sum(h.score for h in ranked[1:4])
    return Event(session, min(h.seq for h in run), max(h.seq for h in run), ranked, score)

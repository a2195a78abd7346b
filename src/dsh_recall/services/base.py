"""The one source contract: every source (code, notes, history, objects) is a service with
the same surface, takes the caller as one value (a Viewer), and answers with one shape.

An Answer is a plain JSON-ready mapping (the CLI prints it, the MCP server renders it, the
dashboard sends it): typing it as a TypedDict keeps that, and lets the type checker hold
every source to the same keys. Source-specific keys (a code answer's `scope`, a history
answer's `sessions`) ride along beside the common ones.

`backlog` is how a source says what it has not done yet (vectors still to embed, files still
to index) and who fills it: a front end that runs background work (services/indexing/background.py)
reads it, never the wording of a note. A source that tells a person how to fill it ends one
note (or one layer's status) with the item's `hint`; a front end that fills it itself puts
its own words in place of that clause (services/indexing/background.say), knowing nothing of the
source's wording.
"""

from __future__ import annotations

from typing import Any, NotRequired, Protocol, TypedDict, runtime_checkable

from .access.channel import Viewer

__all__ = ["MATCHES", "Answer", "Backlog", "Source", "Viewer", "backlog_item", "match_note"]

# An answer's confidence, most sure first (Answer["match"]).
MATCHES = ("strong", "weak", "none")


class Backlog(TypedDict):
    """One kind of work a source still owes."""

    source: str  # "code" | "notes" | "history" | "objects"
    what: str  # what waits: "vectors", "files", ...
    pending: int  # how many of them (0 when unknown but non-empty is not allowed: say 1)
    command: str  # the CLI command that fills it, for a person
    job: str  # the background job that fills it (services/indexing/background.py JOBS)
    # The clause that ends a note (or a layer's status) of this answer telling a person how
    # to fill it, e.g. "`dsh-recall index` embeds them"; absent when no note says so.
    hint: NotRequired[str]


class Answer(TypedDict, total=False):
    """What every source's search() returns."""

    source: str
    query: str
    results: list[dict[str, Any]]  # the hits, best first
    notes: list[str]  # what a person should know about this answer
    layers: list[str]  # the layers that answered ("lexical", "vector", ...)
    backlog: list[Backlog]  # what is still owed; empty when the source is complete
    # How sure the answer is (MATCHES): "strong" (its best hit answers the query), "weak"
    # (the closest hits, none of which clearly does) or "none" (nothing related found; any
    # hits shown are the closest, each marked weak). Every hit carries its own `match` too
    # ("strong" | "weak"). How each source decides is in its docs (docs/code-ranking.md
    # #confidence for code).
    match: str
    offset: int
    next_offset: int | None
    elapsed_ms: float


def backlog_item(source: str, what: str, pending: int, command: str, job: str,
                 hint: str = "") -> Backlog:
    item = Backlog(source=source, what=what, pending=max(1, int(pending)), command=command, job=job)
    if hint:
        item["hint"] = hint
    return item


def match_note(match: str) -> str:
    """The one sentence a front end shows beside an answer that is not strong."""
    if match == "none":
        return "no good match: nothing here clearly answers this; the hits shown are the closest"
    if match == "weak":
        return "weak match: the hits shown are the closest, none clearly answers this"
    return ""


@runtime_checkable
class Source(Protocol):
    """The surface federated search, evaluation and every front end use."""

    name: str

    def index(self) -> Any:
        """Bring the index up to date (lexical first; vectors within the source's budget)."""
        ...

    def search(self, query: str, *, viewer: Viewer | None = None, limit: int | None = None,
               offset: int = 0) -> Answer:
        """Ranked hits the viewer may see; never raises on query syntax."""
        ...

    def status(self) -> dict[str, Any]:
        ...

    def close(self) -> None:
        ...

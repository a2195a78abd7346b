"""Objects: offload big tool results, recall them by id, range or search; stats; retention.

One `ObjectService` serves the CLI, the hooks, the MCP proxy and the MCP server. Policy
(thresholds, ids, ranges, what to evict) lives here and in search.offload; SQL lives in
stores.objects.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.config import ObjectsConfig
from ..core.errors import InputError
from ..core.paths import recall_home
from ..core.text import estimate_tokens
from ..search.offload import (
    SEARCH_LIMIT,
    Candidate,
    LineMatch,
    clamp_range,
    join_surrogates,
    make_id,
    plan_offloads,
    render_inline,
    scrub_surrogates,
    search_lines,
)
from ..stores.objects import ObjectRow, ObjectStore, encode_text, text_sha

DB_NAME = "objects.sqlite"
DEFAULT_SESSION = "cli"
RECENT = 12


def default_path() -> Path:
    """The one object store of this user: `<recall home>/objects.sqlite`."""
    return recall_home() / DB_NAME


@dataclass(frozen=True)
class PutResult:
    """`inline` is what stays in the conversation; `id` is None when nothing was offloaded."""

    id: str | None
    inline: str
    chars: int
    offloaded: bool

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
class SearchResult:
    id: str
    matches: list[LineMatch] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "matches": [asdict(m) for m in self.matches]}


@dataclass(frozen=True)
class ResultText:
    """One tool result of a conversation for `reclaim`: text None for a non-text block."""

    seq: int
    text: str | None
    tool: str | None = None


class ObjectService:
    """Use cases over the object store. The store opens lazily, on first need."""

    def __init__(self, cfg: ObjectsConfig | None = None, path: Path | str | None = None,
                 clock: Callable[[], float] = time.time):
        self.cfg = cfg or ObjectsConfig()
        self.path = Path(path) if path is not None else default_path()
        self.clock = clock
        self._store: ObjectStore | None = None

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            self._store = ObjectStore(self.path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> "ObjectService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- offload ----------------------------------------------------------------------------

    def put(self, text: str, session: str | None = None, seq: int | None = None,
            tool: str | None = None) -> PutResult:
        """Offload `text` if it is over the threshold and the pointer form is shorter.

        (session, seq) makes it idempotent: a second put of the same pair returns the stored
        object. Without `seq` the session's next seq is used.
        """
        text = join_surrogates(text)
        chars = len(text)
        if chars <= self.cfg.threshold_chars:
            return PutResult(None, text, chars, False)
        # The note's length does not depend on the id's value, so the cut points and the
        # inline size are known before the id is allocated.
        probe = render_inline(text, "0" * 8, tool, self.cfg)
        if probe is None:
            return PutResult(None, text, chars, False)
        session = session or DEFAULT_SESSION
        data = encode_text(text)
        sha = text_sha(data)
        row = ObjectRow(
            id="", session=session, seq=-1 if seq is None else seq, tool=tool, chars=chars,
            tokens=estimate_tokens(text), inline_chars=len(probe.text),
            inline_tokens=estimate_tokens(probe.text), raw_bytes=len(data), created=self.clock(),
            sha=sha, evicted=None,
        )
        stored, created = self.store.put(
            row, data, lambda s, attempt: make_id(session, s, chars, attempt))
        if not created and stored.sha != sha:
            # Already offloaded under this (session, seq): what we were given is the pointer
            # form (or something else): leave it as it is.
            return PutResult(stored.id, text, stored.chars, True)
        final = render_inline(text, stored.id, tool, self.cfg)
        assert final is not None
        if created and (self.cfg.max_age_days is not None or self.cfg.max_bytes is not None):
            self.gc()
        return PutResult(stored.id, final.text, chars, True)

    def reclaim(self, session: str, results: Sequence[ResultText],
                context_tokens: int | None = None) -> dict[int, PutResult]:
        """Apply the whole policy to a conversation's results (oldest first): keep the newest
        `keep`, honour `budget_tokens`, skip what the store already offloaded. Returns the
        rewritten results by seq."""
        done = self.store.offloaded_seqs(session)
        items = [Candidate(r.seq, len(r.text or ""), estimate_tokens(r.text or ""), r.text is not None)
                 for r in results]
        chosen = set(plan_offloads(items, self.cfg, done, context_tokens))
        out: dict[int, PutResult] = {}
        for r in results:
            if r.seq in chosen and r.text is not None:
                res = self.put(r.text, session=session, seq=r.seq, tool=r.tool)
                if res.offloaded:
                    out[r.seq] = res
        return out

    # -- recall -----------------------------------------------------------------------------

    def _text(self, obj_id: str) -> str:
        obj_id = obj_id.strip().lower()
        row = self.store.get(obj_id)
        if row is None:
            raise InputError(f"no object '{obj_id}' in {self.path}; ids come from the note "
                             "left in the conversation (8 hex chars)")
        if row.sha is None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.evicted or 0))
            raise InputError(f"object '{obj_id}' was evicted on {when} by the retention "
                             "settings (objects.max_age_days / objects.max_bytes); its text is "
                             "gone, re-run the tool if you need it")
        data = self.store.payload(row.sha)
        if data is None:  # pragma: no cover - prevented by the evict transaction
            raise InputError(f"object '{obj_id}' has no payload; run `dsh-recall object gc`")
        return data.decode("utf-8", "surrogatepass")

    def size(self, obj_id: str) -> int:
        """Total chars of a live object, without reading its payload or counting a recall."""
        row = self.store.get(obj_id.strip().lower())
        if row is None or row.sha is None:
            self._text(obj_id)  # raises the same "no object" / "evicted" error as a recall
        assert row is not None
        return row.chars

    def get(self, obj_id: str, start: int | None = None, count: int | None = None) -> GetResult:
        """The first 8,000 chars, or `count` chars from `start` (code points, max 24,000)."""
        text = self._text(obj_id)
        s, e = clamp_range(len(text), start, count)
        self.store.bump("recalls")
        return GetResult(obj_id.strip().lower(), s, scrub_surrogates(text[s:e]), len(text))

    def search(self, obj_id: str, query: str, limit: int = SEARCH_LIMIT) -> SearchResult:
        """Up to `limit` (max 20) lines matching `query`, literal first then fuzzy."""
        if not query.strip():
            raise InputError("empty query; give words to look for, or use get for a range")
        text = self._text(obj_id)
        matches = search_lines(text, query, limit=max(1, min(limit, SEARCH_LIMIT)))
        self.store.bump("recalls")
        return SearchResult(obj_id.strip().lower(), [
            LineMatch(m.line, m.offset, scrub_surrogates(m.text)) for m in matches])

    # -- stats and retention -----------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts derived by query, plus the last 12 offloads."""
        t = self.store.totals()
        now = self.clock()
        disk = 0
        for suffix in ("", "-wal"):
            try:
                disk += os.stat(str(self.path) + suffix).st_size
            except OSError:
                pass
        offloaded = t["objects"]
        return {
            "path": str(self.path),
            "offloaded": offloaded,
            "live": offloaded - t["evicted"],
            "evicted": t["evicted"],
            "chars_offloaded": t["chars"],
            "chars_kept_out": t["chars_kept_out"],
            "tokens_kept_out": t["tokens_kept_out"],
            "recalls": t["recalls"],
            "recall_ratio": round(t["recalls"] / offloaded, 3) if offloaded else 0.0,
            "raw_bytes": t["raw_bytes"],
            "blobs": t["blobs"],
            "stored_bytes": t["blob_stored_bytes"],
            "disk_bytes": disk,
            "recent": [
                {"id": r.id, "tool": r.tool, "chars": r.chars,
                 "age_s": round(max(0.0, now - r.created), 1), "evicted": r.sha is None}
                for r in self.store.recent(RECENT)
            ],
        }

    def gc(self, max_age_days: float | None = None, max_bytes: int | None = None) -> dict[str, Any]:
        """Evict oldest first by age and by stored size; both off unless configured/asked."""
        age = max_age_days if max_age_days is not None else self.cfg.max_age_days
        cap = max_bytes if max_bytes is not None else self.cfg.max_bytes
        now = self.clock()
        live = self.store.live()
        victims: list[str] = []
        if age is not None:
            cutoff = now - age * 86400
            victims = [obj_id for obj_id, created, _, _ in live if created < cutoff]
        if cap is not None:
            gone = set(victims)
            refs: dict[str, int] = {}
            size: dict[str, int] = {}
            for obj_id, _, sha, stored in live:
                if obj_id not in gone:
                    refs[sha] = refs.get(sha, 0) + 1
                    size[sha] = stored
            total = sum(size.values())
            for obj_id, _, sha, _ in live:
                if total <= cap:
                    break
                if obj_id in gone:
                    continue
                victims.append(obj_id)
                refs[sha] -= 1
                if refs[sha] == 0:  # a shared blob frees bytes only with its last object
                    total -= size[sha]
        n = self.store.evict(victims, now)
        return {"evicted": n, "ids": victims, "max_age_days": age, "max_bytes": cap,
                "stored_bytes": self.store.totals()["blob_stored_bytes"]}

"""Objects: offload big tool results, recall them by id, range or search; stats; retention.

One `ObjectService` serves the CLI, the hooks, the MCP proxy and the MCP server. Policy
(thresholds, ids, ranges, what to evict) lives here and in policy.offload; line search and
the ranking across objects in search.py; SQL in stores.sqlite.objects.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.clean import as_body, as_count, as_int, as_limit, as_name, as_offset, as_query, cleaned
from ...core.codepoints import join_surrogates, scrub_surrogates
from ...core.errors import InputError
from ...core.paths import recall_home
from ...core.text import estimate_tokens
from ...policy.ranges import clamp_range
from ...rank.line_limits import SEARCH_LIMIT
from ...stores.sqlite.objects import ObjectRow, ObjectStore, encode_text, text_sha
from .. import report
from ..access import forgotten
from ..access.channel import Viewer
from .types import GetResult, ObjectsAnswer, PutResult, ResultText, SearchResult

if TYPE_CHECKING:  # the config module pulls in pydantic: object get/search do without it
    from ...core.config import ObjectsConfig, ScrubConfig
    from ...rank.line_index import LineIndex

DB_NAME = "objects.sqlite"
DEFAULT_SESSION = "cli"
RECENT = 12
# Over this a result is not stored (objects.max_object_bytes): head and tail stay inline.
DEFAULT_MAX_OBJECT_BYTES = 64 * 1024 * 1024

# Whether the caller may see objects of a channel (None: none); others are unknown ids to it.
CanSee = Callable[[str | None], bool]


def _sees(viewer: Viewer | None) -> CanSee | None:
    """The viewer's item predicate; None (no filter) for the user and unfiltered channels."""
    return None if viewer is None or viewer.unfiltered else viewer.can_see


def default_path() -> Path:
    """The one object store of this user: `<recall home>/objects.sqlite`."""
    return recall_home() / DB_NAME


def _clean(value: str | None) -> str | None:
    """A name from outside (id, session, tool, channel) made storable: lone surrogates -> U+FFFD."""
    return None if value is None else scrub_surrogates(join_surrogates(value))


def _non_negative(name: str, value: float | None) -> None:
    if value is not None and not (value >= 0 and math.isfinite(value)):  # nan compares false
        raise InputError(f"{name} must be a finite number, 0 or more, not {value}")


class ObjectService:
    """Use cases over the object store. The store opens lazily, on first need.

    Every read by id (`get`, `lines`, `search_in`, `failures`, `size`), the search across
    objects (`search`) and every listing (`stats`, `gc`, `reclaim`) takes an optional
    `viewer` (services.access.channel.Viewer; None: the user, unfiltered): an object of a channel
    it may not see is answered exactly as an unknown id (same message, no recall counted)
    and left out of listings. `put(channel=...)` records the channel that produced a result."""

    name = "objects"

    def __init__(self, cfg: ObjectsConfig | None = None, path: Path | str | None = None,
                 clock: Callable[[], float] = time.time, max_object_bytes: int | None = None,
                 scrub: ScrubConfig | None = None):
        self._cfg = cfg
        self._scrub = scrub
        self.path = Path(path) if path is not None else default_path()
        self.clock = clock
        cap = max_object_bytes if max_object_bytes is not None else (
            cfg.max_object_bytes if cfg is not None else None)
        self.max_object_bytes = DEFAULT_MAX_OBJECT_BYTES if cap is None else int(cap)
        if self.max_object_bytes < 1:
            raise InputError(f"max_object_bytes must be 1 or more, not {self.max_object_bytes}")
        self._store: ObjectStore | None = None

    @property
    def cfg(self) -> ObjectsConfig:
        if self._cfg is None:
            from ...core.config import ObjectsConfig
            self._cfg = ObjectsConfig()
        return self._cfg

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            self._store = ObjectStore(self.path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> ObjectService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def index(self) -> dict[str, Any]:
        """Nothing to bring up to date: an object's line index is written when it is stored."""
        return {}

    def status(self) -> dict[str, Any]:
        """What the store holds (`stats` for the user)."""
        return self.stats()

    # -- offload ----------------------------------------------------------------------------

    def over_cap(self, text: str) -> bool:
        """True when `text` is more than `max_object_bytes` of UTF-8 (encoded only when its
        length alone cannot tell)."""
        cap = self.max_object_bytes
        if len(text) > cap:
            return True
        return len(text) * 4 > cap and len(encode_text(text)) > cap

    @cleaned(text=as_body, session=as_name, seq=as_int, tool=as_name, channel=as_name)
    def put(self, text: str, session: str | None = None, seq: int | None = None,
            tool: str | None = None, channel: str | None = None,
            refuse_over_cap: bool = False) -> PutResult:
        """Offload `text` if it is over the threshold and the pointer form is shorter.
        (session, seq) makes it idempotent: a second put of the same pair returns the stored
        object (unless another channel stored it: then nothing is revealed and the text stays
        inline). Without `seq` the session's next seq is used. `channel` is recorded with the
        object. Lone surrogates become U+FFFD. Over `max_object_bytes` nothing is stored:
        head + tail stay inline with a note saying so (`dropped`), or with `refuse_over_cap`
        an InputError says so.
        """
        _non_negative("seq", seq)
        text = scrub_surrogates(join_surrogates(text))
        session, tool, channel = _clean(session), _clean(tool), _clean(channel)
        chars = len(text)
        if chars <= self.cfg.threshold_chars:
            return PutResult(None, text, chars, False)
        # Here: an object read or search (a cold process each) loads neither the forms nor the rules.
        from ...policy.offload import make_id, plan_inline, render_inline
        from ...policy.scrub import scrub_text
        text = scrub_text(text, self._scrub)  # secrets never stored, indexed or shown inline
        chars = len(text)
        if self.over_cap(text):
            if refuse_over_cap:
                raise InputError(
                    f"this output ({chars:,} chars) is over the object store's cap of "
                    f"{self.max_object_bytes:,} bytes of UTF-8 (objects.max_object_bytes); "
                    "nothing was stored. Store a smaller part, or raise the cap.")
            cut = render_inline(text, "", tool, self.cfg, over_cap=self.max_object_bytes)
            if cut is None:
                return PutResult(None, text, chars, False)
            return PutResult(None, cut.text, chars, True, dropped=True)
        session = session or DEFAULT_SESSION
        data = encode_text(text)
        sha = text_sha(data)
        # One index serves the failure region of the inline form and the search index
        # stored with the text (compressed outside the write lock; read back when the
        # text is stored already).
        from .search import blob_search_parts, build_index, logrank, rank_config
        stored_parts = self.store.has_blob(sha)
        idx = self._stored_index(sha, text) if stored_parts else None
        if idx is None:
            idx = build_index(text)
        rank = rank_config(self._cfg) or logrank.DEFAULT
        # The note's length does not depend on the id's value, so the cut points and the
        # inline size are known before the id is allocated: planned once, rendered twice.
        plan = plan_inline(text, self.cfg, idx=idx, rank=rank)
        probe = plan.render("0" * 8, tool) if plan is not None else None
        if plan is None or probe is None:
            return PutResult(None, text, chars, False)
        parts = None if stored_parts else blob_search_parts(data, text, idx)
        row = ObjectRow(
            id="", session=session, seq=-1 if seq is None else seq, tool=tool, chars=chars,
            tokens=estimate_tokens(text), inline_chars=len(probe.text),
            inline_tokens=estimate_tokens(probe.text), raw_bytes=len(data), created=self.clock(),
            sha=sha, evicted=None, channel=channel,
        )
        # A random salt in every id: an id is never computable from what a caller could
        # know (the session "cli", the next seq, a length), so ids cannot be enumerated.
        # Reading still needs the channel check (`_row`); (session, seq) stays idempotent
        # through the store, not through the id.
        salt = secrets.token_hex(8)
        stored, created = self.store.put(
            row, data, lambda s, attempt: make_id(f"{session}\x00{salt}", s, chars, attempt),
            parts)
        if not created and stored.channel != channel:
            return PutResult(None, text, chars, False)
        if not created and stored.sha != sha:
            # Already offloaded under this (session, seq): what we were given is the pointer
            # form (or something else): leave it as it is.
            return PutResult(stored.id, text, stored.chars, True)
        final = plan.render(stored.id, tool)
        assert final is not None
        report.usage.object_offload(stored.id, len(final.text), chars, created)
        if created and (self.cfg.max_age_days is not None or self.cfg.max_bytes is not None):
            self.gc()
        # Neither the inline form nor any read of an object shows a forgotten note's quote.
        return PutResult(stored.id, forgotten.withhold(text, [final.text])[0], chars, True)

    def reclaim(self, session: str, results: Sequence[ResultText],
                context_tokens: int | None = None, channel: str | None = None,
                viewer: Viewer | None = None,
                surface: Sequence[tuple[int, int]] | None = None) -> dict[int, PutResult]:
        """Apply the whole policy to a conversation's results (oldest first): keep the newest
        `keep`, honour `budget_tokens`, skip what the store already offloaded (of the
        channels the viewer may see). With `surface` ((seq, chars) of every message, in
        order), nothing is rewritten unless the rewrite pays for its cache miss
        (`reclaim_pays`). Returns the rewritten results by seq."""
        from ...policy.offload import Candidate, plan_offloads, reclaim_pays
        session = _clean(session) or DEFAULT_SESSION
        done = self.store.offloaded_seqs(session, self._channels(_sees(viewer)))
        items = [Candidate(r.seq, len(r.text or ""), estimate_tokens(r.text or ""), r.text is not None)
                 for r in results]
        chosen = set(plan_offloads(items, self.cfg, done, context_tokens))
        if surface is not None and not reclaim_pays([c for c in items if c.seq in chosen],
                                                    self.cfg, surface):
            return {}
        out: dict[int, PutResult] = {}
        for r in results:
            if r.seq in chosen and r.text is not None:
                res = self.put(r.text, session=session, seq=r.seq, tool=r.tool, channel=channel)
                if res.offloaded:
                    out[r.seq] = res
        return out

    # -- recall -----------------------------------------------------------------------------

    def _channels(self, can_see: CanSee | None) -> list[str | None] | None:
        """The stored channels `can_see` allows (None: no filter)."""
        if can_see is None:
            return None
        return [c for c in self.store.channels() if can_see(c)]

    def _row(self, obj_id: str, can_see: CanSee | None) -> ObjectRow:
        """The live row of `obj_id`, or the error an unknown / evicted id gets."""
        obj_id = _clean(obj_id.strip().lower()) or ""
        row = self.store.get(obj_id)
        if row is None or (can_see is not None and not can_see(row.channel)):
            raise InputError(f"no object '{obj_id[:40]}' in {self.path}; ids come from the note "
                             "left in the conversation (8 hex chars)")
        if row.sha is None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.evicted or 0))
            raise InputError(f"object '{obj_id}' was evicted on {when} by the retention "
                             "settings (objects.max_age_days / objects.max_bytes); its text is "
                             "gone, re-run the tool if you need it")
        return row

    def _text(self, row: ObjectRow) -> str:
        data = self.store.payload(row.sha or "")
        if data is None:  # pragma: no cover - prevented by the evict transaction
            raise InputError(f"object '{row.id}' has no payload; run `dsh-recall object gc`")
        return data.decode("utf-8", "surrogatepass")

    def _stored_index(self, sha: str, text: str | None = None) -> LineIndex | None:
        """The search index stored with blob `sha`, or None when it has none of this
        version. `text`: the blob's text when the caller has it (else read)."""
        from .search import INDEX_VERSION, LineIndex
        parts = self.store.search_parts(sha)
        if parts is None or parts.version != INDEX_VERSION:
            return None
        if parts.view is not None:
            view = parts.view.decode("utf-8", "surrogatepass")
        elif text is not None:
            view = text
        else:
            data = self.store.payload(sha)
            if data is None:  # pragma: no cover - prevented by the evict transaction
                return None
            view = data.decode("utf-8", "surrogatepass")
        starts, shapes, flags = parts.arrays
        return LineIndex(view, starts, shapes, parts.esc_at, parts.esc_cum, flags)

    def _index(self, row: ObjectRow) -> LineIndex:
        """The stored search index of a live object (built and stored on first search for a
        payload written by an older version)."""
        from .search import blob_search_parts, build_index
        idx = self._stored_index(row.sha or "")
        if idx is None:
            text = self._text(row)
            idx = build_index(text)
            self.store.set_search_parts(row.sha or "", blob_search_parts(None, text, idx))
        return idx

    @cleaned(obj_id=as_name)
    def size(self, obj_id: str, viewer: Viewer | None = None) -> int:
        """Total chars of a live object, without reading its payload or counting a recall."""
        return self._row(obj_id, _sees(viewer)).chars

    def original(self, obj_id: str, session: str, channel: str | None) -> str | None:
        """The whole text of a live object that `session` stored through `channel`, else
        None. Counts no recall: history import uses it to index what a transcript only
        points to (search.restore), never to answer a caller."""
        row = self.store.get(_clean(obj_id.strip().lower()) or "")
        if row is None or row.sha is None or row.session != _clean(session) \
                or row.channel != _clean(channel):
            return None
        return self._text(row)

    @cleaned(obj_id=as_name, start=as_int, count=as_int)
    def get(self, obj_id: str, start: int | None = None, count: int | None = None,
            viewer: Viewer | None = None) -> GetResult:
        """The first 8,000 chars, or `count` chars from `start` (code points, max 24,000)."""
        _non_negative("start", start)
        _non_negative("count", count)
        row = self._row(obj_id, _sees(viewer))
        text = self._text(row)
        s, e = clamp_range(len(text), start, count)
        self.store.bump("recalls")
        report.usage.object_recall(row.id, e - s, len(text))
        return GetResult(row.id, s, scrub_surrogates(forgotten.withhold(text, [text[s:e]])[0]), len(text))

    @cleaned(obj_id=as_name, first=as_int, last=as_int, max_chars=as_int)
    def lines(self, obj_id: str, first: int, last: int, max_chars: int | None = None,
              viewer: Viewer | None = None) -> dict[str, Any]:
        """Lines `first`..`last` (1-based; `last` past the end: up to the last line), at most
        `max_chars` code points of them (default 8,000, max 24,000, so the text may end
        inside a line). Counts one recall, as `get` does. Returns {id, total (chars), start,
        text, line (first), end_line (`last` as clamped), line_count}; `first` past the last
        line is an InputError naming the count."""
        if first < 1 or last < first:
            raise InputError(f"lines must be a-b with 1 <= a <= b, not {first}-{last}")
        _non_negative("max_chars", max_chars)
        row = self._row(obj_id, _sees(viewer))
        text = self._text(row)
        # The stored index with the text already read (no second payload read); a payload
        # of an older version without one gets a fresh index, not stored on this read path.
        from .search import build_index
        idx = self._stored_index(row.sha or "", text) or build_index(text)
        s, e, n = idx.line_span(first, last)
        if first > n:
            raise InputError(f"object {row.id} has {n} lines; ask for lines within 1-{n}")
        s, cap = clamp_range(len(text), s, max_chars)
        e = min(e, cap)
        self.store.bump("recalls")
        report.usage.object_recall(row.id, e - s, len(text))
        shown = scrub_surrogates(forgotten.withhold(text, [text[s:e]])[0])
        return {"id": row.id, "total": len(text), "start": s, "text": shown,
                "line": first, "end_line": min(last, n), "line_count": n}

    @cleaned(query=as_query, limit=as_limit, offset=as_offset)
    def search(self, query: str, *, viewer: Viewer | None = None, limit: int | None = None,
               offset: int = 0) -> ObjectsAnswer:
        """Objects with lines matching `query` among the newest OBJECTS_SCANNED live objects
        the viewer may see, best first (search.rank_objects): a few lines each, to
        point at the object to open. Reads stored indexes and counts no recall (it is not
        the agent going back for one object). `limit` None: all; `offset` pages."""
        from .search import MAX_QUERY_CHARS, OBJECTS_SCANNED, clean_query, rank_objects
        t0 = time.monotonic()
        offset = max(0, int(offset or 0))
        q, cut = clean_query(query)
        rows = self.store.recent(OBJECTS_SCANNED, self._channels(_sees(viewer))) if q else []
        found = rank_objects(rows, self._index, q)
        if found:  # a forgotten note is found by no source: not in a tool result quoting it
            by_id = {r.id: r for r in rows}
            found = forgotten.drop_quoting(found, lambda r: "\n".join(m["text"] for m in r["matches"]),
                                           lambda r: self._text(by_id[r["id"]])[:4 << 20])
        end = len(found) if limit is None else offset + max(0, int(limit))
        return ObjectsAnswer(
            source="objects", query=q[:200], results=found[offset:end], layers=["lines"],
            notes=[f"query cut to its first {MAX_QUERY_CHARS:,} chars"] if cut else [], backlog=[],
            offset=offset, next_offset=end if end < len(found) else None, scanned=len(rows),
            elapsed_ms=round((time.monotonic() - t0) * 1000, 1))

    @cleaned(obj_id=as_name, query=as_query, limit=as_count)
    def search_in(self, obj_id: str, query: str, limit: int = SEARCH_LIMIT, *,
                  viewer: Viewer | None = None, count: bool = True,
                  fill: bool | None = None) -> SearchResult:
        """Up to `limit` (max 20) lines of one object matching `query`: whole query, all
        words, then fuzzy, ordered by the log prior (`objects.rank_*`); a failure query
        (`error`, `FAILED`) that matched fewer lines gets the failure region after its
        matches (`context`, `objects.rank_failure_fill`). The query is cut to its first
        1,000 chars (the answer's `note` says so). `count=False`: not a recall (an
        evaluation reads it); `fill` overrides `objects.rank_failure_fill`."""
        from .search import MAX_QUERY_CHARS, LineMatch, clean_query, rank_config, search_index
        q, cut = clean_query(query)
        if not q:
            raise InputError("empty query; give words to look for, ask for the failure region "
                             "(no query), or use get for a range")
        row = self._row(obj_id, _sees(viewer))
        cfg = self._cfg
        matches = search_index(self._index(row), q, limit=max(1, min(limit, SEARCH_LIMIT)),
                               rank=rank_config(cfg),
                               fill=(cfg.rank_failure_fill if cfg is not None else True) if fill is None else fill)
        if count:
            self.store.bump("recalls")
            report.usage.object_recall(row.id, sum(len(m.text) for m in matches), row.chars)
        note = (f"query cut to its first {MAX_QUERY_CHARS:,} chars: a line search wants a "
                "phrase, not a pasted block" if cut else None)
        texts = forgotten.withhold(lambda: self._text(row)[:4 << 20], [m.text for m in matches])
        return SearchResult(row.id, [LineMatch(m.line, m.offset, scrub_surrogates(t), m.context) for m, t
                                     in zip(matches, texts, strict=True)], note)

    @cleaned(obj_id=as_name, limit=as_count)
    def failures(self, obj_id: str, limit: int = SEARCH_LIMIT,
                 viewer: Viewer | None = None) -> SearchResult:
        """Where did it fail? Up to `limit` (max 20) lines of the likely failure region, in
        file order, with line numbers and offsets (`search.logrank.failure_region`: error
        lines, their stack traces and assertion diffs, the outcome lines, near the end and
        after the last success). A result without error-shaped lines answers with its last
        lines."""
        from .search import LineMatch, failure_lines, logrank, rank_config
        row = self._row(obj_id, _sees(viewer))
        lines = failure_lines(self._index(row), max(1, min(limit, SEARCH_LIMIT)),
                              rank=rank_config(self._cfg) or logrank.DEFAULT)
        self.store.bump("recalls")
        report.usage.object_recall(row.id, sum(len(m.text) for m in lines), row.chars)
        texts = forgotten.withhold(lambda: self._text(row)[:4 << 20], [m.text for m in lines])
        return SearchResult(row.id, [LineMatch(m.line, m.offset, scrub_surrogates(t)) for m, t
                                     in zip(lines, texts, strict=True)], None, failures=True)

    # -- stats and retention -----------------------------------------------------------------

    def stats(self, viewer: Viewer | None = None) -> dict[str, Any]:
        """Counts derived by query, plus the last 12 offloads. With a filtered `viewer`, the
        object counts and the list cover only the objects it may see; recalls, payloads and
        disk are store-wide."""
        channels = self._channels(_sees(viewer))
        t = self.store.totals(channels)
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
            "recalls": t["recalls"],
            "recall_ratio": round(t["recalls"] / offloaded, 3) if offloaded else 0.0,
            "raw_bytes": t["raw_bytes"],
            "blobs": t["blobs"],
            "stored_bytes": t["blob_stored_bytes"],
            "disk_bytes": disk,
            "recent": [
                {"id": r.id, "tool": r.tool, "chars": r.chars,
                 "age_s": round(max(0.0, now - r.created), 1), "evicted": r.sha is None}
                for r in self.store.recent(RECENT, channels)
            ],
        }

    def gc(self, max_age_days: float | None = None, max_bytes: int | None = None,
           viewer: Viewer | None = None) -> dict[str, Any]:
        """Evict oldest first by age and by stored size; both off unless configured/asked.
        Retention covers the whole store; with a filtered `viewer` the answer lists (and
        counts) only the evicted objects it may see."""
        can_see = _sees(viewer)
        _non_negative("max_age_days", max_age_days)
        _non_negative("max_bytes", max_bytes)
        age = max_age_days if max_age_days is not None else self.cfg.max_age_days
        cap = max_bytes if max_bytes is not None else self.cfg.max_bytes
        now = self.clock()
        live = self.store.live()
        victims: list[str] = []
        if age is not None:
            cutoff = now - age * 86400
            victims = [obj_id for obj_id, created, _, _, _ in live if created < cutoff]
        if cap is not None:
            gone = set(victims)
            refs: dict[str, int] = {}
            size: dict[str, int] = {}
            for obj_id, _, sha, stored, _ in live:
                if obj_id not in gone:
                    refs[sha] = refs.get(sha, 0) + 1
                    size[sha] = stored
            total = sum(size.values())
            for obj_id, _, sha, _, _ in live:
                if total <= cap:
                    break
                if obj_id in gone:
                    continue
                victims.append(obj_id)
                refs[sha] -= 1
                if refs[sha] == 0:  # a shared blob frees bytes only with its last object
                    total -= size[sha]
        n = self.store.evict(victims, now)
        if can_see is not None:
            seen = {obj_id for obj_id, _, _, _, channel in live if can_see(channel)}
            victims = [v for v in victims if v in seen]
            n = len(victims)
        return {"evicted": n, "ids": victims, "max_age_days": age, "max_bytes": cap,
                "stored_bytes": self.store.totals()["blob_stored_bytes"]}

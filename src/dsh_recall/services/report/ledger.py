"""The one ledger of what dsh-recall keeps out of dsh's model requests, against plain dsh.

Every change the dsh plugin makes to what the model reads is an entry of its session, keyed
by the tool call (or the message) it changed:

- `offload`, `read`: dsh handed over a result (`plain`: what plain dsh would have sent) and
  the model got the head + pointer + tail, or the head + outline (`sent`);
- `reclaim`: a result already in the conversation replaced by its pointer (an entry of the
  same call keeps its `plain`, dsh's own text, and takes the new `sent`);
- `message`: a recall message the plugin added (auto-recall, anchor, notes): `plain` 0, a
  cost against the saving.

Each side is measured as it travels in the request: the length of the text as a JSON string
(`json_chars`), tokens = chars / 4 (`tokens`), the estimate dsh and bench/dsh_real.py use.
At every model request of a session (one `assistant/message` in dsh's log) the plugin names
the entries that request still carried (a compaction or a prune removes the rest), and the
ledger adds their `plain - sent` to that request: a result offloaded after request 3 of 23
is counted 20 times, once per request that would have carried it, not once per user turn.
`tokens_sent` is the provider's own input token count of each request, where reported.

A request that follows a read-back of what the plugin kept out (a recall of one of its
objects by id, a read or grep of a file it shortened) is one plain dsh would not have made:
it counts minus its own input tokens (where reported), and is counted in
`readback_requests` (unless plain dsh had cut that text itself: then it fetches too).
Where plain dsh would have sent a request over its compaction threshold (`compact_threshold`
of the context window dsh logs in `request/context`; its request: this one's input tokens
plus what was kept out), its compaction is replayed as dsh's compaction-basic does it
(`Ledger._plain_compaction`): the tool-result pruner first (`plain_prunes`), then, if still
over, one summarization request of its whole transcript, counted, after which the entries
count no more (`plain_compactions`). What plain dsh's model then fetches again is not seen
here: `bound` says the figure is then "at least" (pruned) or "about" (summarized). The
recall server's tool schemas, sent with every request, are not in the ledger
(bench/mcp_budget.py measures them).

Each request is one usage-log record (`op: request`, with the session, the tokens it kept
out and the changes made since the session's previous request), so `figures_from_log`
recomputes exactly what a running worker's `Ledger.snapshot` shows: `status`, the dsh chip,
strip and Recall tab, `report` and `object stats` all read these figures.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import usage

KINDS = ("offload", "read", "reclaim", "message")
# What a recall message adds around its text in the request: {"role":"user","content":
# [{"type":"text","text":...}]} (the text's own quotes are in json_chars).
MESSAGE_ENVELOPE = len('{"role":"user","content":[{"type":"text","text":}]},')
# The per-session counters a request record carries (changes since the previous record).
COUNTERS = {"offload": "offloads", "read": "reads_shortened", "reclaim": "reclaimed",
            "message": "recall_messages"}
MAX_SESSIONS = 500  # sessions a worker keeps figures of (oldest dropped; the log keeps all)
SHOWN_SESSIONS = 200  # sessions a snapshot lists, most recently active last (totals: all)
# dsh's spill policy cap in its shipped profiles (`dsh_sent_chars`), and the size of its
# notice ("(Omitted N bytes. Full formatted result stored at: <path>. Use read ...)").
def _inline_bytes() -> int:
    raw = os.environ.get("DSH_RECALL_DSH_INLINE_BYTES", "")
    return int(raw) if raw.strip().isdigit() else 50_000


DSH_INLINE_BYTES = _inline_bytes()
SPILL_NOTICE = 190
# dsh's compaction-basic compacts above floor(min(window x thresholdRatio, window - the
# request's max output tokens - headroomTokens)): 0.8, and 65,536 of headroom by default.
COMPACT_AT = 0.8


def _compact_reserve() -> int:
    raw = os.environ.get("DSH_RECALL_DSH_COMPACT_RESERVE", "")
    return int(raw) if raw.strip().isdigit() else 65_536 + 8_192


COMPACT_RESERVE = _compact_reserve()
# dsh's tool-result pruner (compaction-tool-result-pruner defaults), which compaction-basic
# runs first once pressure qualifies: a result over PRUNE_AT code points keeps its head and
# tail around a marker.
PRUNE_AT, PRUNE_HEAD, PRUNE_TAIL = 8192, 4096, 1024
PRUNE_MARKER = "\n\n[... tool result middle pruned ...]\n\n"


def compact_threshold(window: int, reserve: int | None = None) -> int:
    """Input tokens above which plain dsh compacts in a `window`-token context (0: never,
    dsh logs a configuration error when the reserve leaves no budget)."""
    reserve = COMPACT_RESERVE if reserve is None else reserve
    if window - reserve <= 0:
        return 0
    return math.floor(min(window * COMPACT_AT, window - reserve))


def json_chars(text: str) -> int:
    """Characters of `text` as a JSON string in a request body (quotes and escapes)."""
    return len(json.dumps(text, ensure_ascii=False))


def dsh_sent_chars(text: str, cap: int | None = None) -> int:
    """JSON chars plain dsh sends for a tool result the plugin sees in `tools/post-execute`.

    dsh's spill policy (`@deepseek-ai/dsh-spill-policy`, `maxInlineBytes`, 50,000 in its
    profiles) replaces a plain-text result over the cap by a head and a tail of half the
    budget each plus a notice naming the spill file, after the plugin's turn in the same
    waterfall: what plain dsh sends is that, not the whole text (a 64 KB bash output went
    out as 50 KB). `read` results are exempt (callers measure those with `json_chars`)."""
    return _sent(text, _spilled(text, cap))


def _sent(text: str, spilled: str | None) -> int:
    return json_chars(text) if spilled is None else json_chars(spilled) + SPILL_NOTICE


def _spilled(text: str, cap: int | None) -> str | None:
    cap = DSH_INLINE_BYTES if cap is None else cap
    raw = text.encode("utf-8", "surrogatepass")
    if cap <= 0 or len(raw) <= cap:
        return None
    budget = max(0, cap - SPILL_NOTICE - 2)
    head = raw[: (budget + 1) // 2].decode("utf-8", "ignore")
    tail = raw[len(raw) - budget // 2:].decode("utf-8", "ignore")
    return f"{head}\n\n{tail}"


def dsh_pruned_chars(text: str, spill: bool = True, cap: int | None = None) -> int:
    """JSON chars of the same result once dsh's tool-result pruner has cut it (what plain
    dsh's requests carry after its first compaction pass): head + marker + tail of what
    plain dsh sent (after its spill policy when `spill`), or all of it when it is short."""
    return _pruned(text, _spilled(text, cap) if spill else None)


def _pruned(text: str, spilled: str | None) -> int:
    t = text if spilled is None else spilled + " " * SPILL_NOTICE
    if len(t) <= PRUNE_AT:
        return _sent(text, spilled)
    return json_chars(t[:PRUNE_HEAD] + PRUNE_MARKER + t[len(t) - PRUNE_TAIL:])


def dsh_plain_chars(text: str, cap: int | None = None) -> tuple[int, int]:
    """(dsh_sent_chars, dsh_pruned_chars) of one tool result, its spill cut once."""
    spilled = _spilled(text, cap)
    return _sent(text, spilled), _pruned(text, spilled)


def tokens(chars: int) -> int:
    """Chars to tokens at 4 per token, rounded half up, sign kept (a cost is negative)."""
    n = (abs(chars) + 2) // 4
    return n if chars >= 0 else -n


@dataclass
class Entry:
    kind: str
    plain: int  # JSON chars plain dsh would have sent
    sent: int  # JSON chars the model got instead
    pruned: int = -1  # plain's side once dsh's tool-result pruner cut it (-1: as plain)

    def plain_now(self, pruned: bool) -> int:
        return self.pruned if pruned and 0 <= self.pruned < self.plain else self.plain


@dataclass
class Figures:
    """What one session (or all of them) kept out: one unit each, tokens as tokens."""

    requests: int = 0
    tokens_kept_out: int = 0
    tokens_sent: int = 0  # the provider's input tokens, over requests that reported them
    requests_with_usage: int = 0
    kept_with_usage: int = 0  # tokens_kept_out of those requests (for the saving ratio)
    offloads: int = 0
    reads_shortened: int = 0
    reclaimed: int = 0
    recall_messages: int = 0
    readback_requests: int = 0
    plain_prunes: int = 0
    plain_compactions: int = 0
    last_request_tokens_kept_out: int = 0

    def add(self, other: Figures) -> None:
        for k in ("requests", "tokens_kept_out", "tokens_sent", "requests_with_usage", "kept_with_usage",
                  "offloads", "reads_shortened", "reclaimed", "recall_messages", "readback_requests",
                  "plain_prunes", "plain_compactions"):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def as_dict(self) -> dict[str, Any]:
        plain = self.tokens_sent + self.kept_with_usage
        return {"requests": self.requests, "offloads": self.offloads,
                "reads_shortened": self.reads_shortened, "reclaimed": self.reclaimed,
                "recall_messages": self.recall_messages,
                "readback_requests": self.readback_requests,
                "plain_prunes": self.plain_prunes,
                "plain_compactions": self.plain_compactions,
                "tokens_kept_out": self.tokens_kept_out,
                "last_request_tokens_kept_out": self.last_request_tokens_kept_out,
                "tokens_sent": self.tokens_sent if self.requests_with_usage else None,
                # kept out / what plain dsh would have sent, over requests with usage
                "saving": round(self.kept_with_usage / plain, 4) if plain > 0 else None}


@dataclass
class _Session:
    entries: dict[str, Entry] = field(default_factory=dict)
    figures: Figures = field(default_factory=Figures)
    since: dict[str, int] = field(default_factory=dict)  # changes not yet in a record
    pruned: set[str] = field(default_factory=set)  # entries plain dsh's pruner has cut
    plain_cut: bool = False  # plain dsh pruned or summarized some of this session's entries


def _count(f: Figures, kind: str, n: int = 1) -> None:
    name = COUNTERS[kind]
    setattr(f, name, getattr(f, name) + n)


class Ledger:
    """A worker's ledger: live entries per session, figures per session and in all. The
    figures of requests recorded before this ledger started are read from the usage log on
    first use (`home`), so a restarted worker shows what the log holds."""

    def __init__(self, home: Path | None = None, *, record: bool = True,
                 clock: Any = time.time) -> None:
        self.home = home
        self.record = record
        self.clock = clock
        self.started = clock()
        self.sessions: dict[str, _Session] = {}
        self._base: dict[str, Figures] | None = None
        self._base_lock = threading.Lock()
        self._preloading = False
        self._lock = threading.Lock()

    def _session(self, sid: str) -> _Session:
        s = self.sessions.get(sid)
        if s is None:
            if len(self.sessions) >= MAX_SESSIONS:
                self.sessions.pop(next(iter(self.sessions)))
            s = self.sessions[sid] = _Session()
        return s

    # -- changes --------------------------------------------------------------------------
    def change(self, session: str, key: str, kind: str, plain: int, sent: int,
               pruned: int | None = None) -> None:
        """One change to what the model reads (`plain`/`sent` in JSON chars, `json_chars`;
        `pruned`: plain's side after dsh's pruner, `dsh_pruned_chars`). A reclaim of a
        result this ledger already holds keeps that entry's `plain` and `pruned`."""
        if kind not in KINDS or not key:
            return
        with self._lock:
            s = self._session(session)
            old = s.entries.get(key)
            if kind == "reclaim" and old is not None:
                plain, pruned = old.plain, old.pruned
            if kind == "message":
                sent += MESSAGE_ENVELOPE
            s.entries[key] = Entry(kind, max(0, plain), max(0, sent), -1 if pruned is None else pruned)
            _count(s.figures, kind)
            s.since[kind] = s.since.get(kind, 0) + 1

    def request(self, session: str, present: list[str] | None = None,
                input_tokens: int | None = None, workspace: str | None = None,
                readback: bool = False, window: int | None = None) -> int:
        """One model request of `session`: adds what the entries it carried (`present`: their
        keys; None: every live entry) kept out of it, and records it; a `readback` request
        (it follows a read-back of kept-out text) counts minus its input tokens instead,
        unless plain dsh had cut kept-out text itself (then it fetches too); with the context
        `window`, plain dsh's compaction is replayed (`_plain_compaction`). Returns the tokens."""
        with self._lock:
            s = self._session(session)
            if present is not None:
                keep = set(present)
                s.entries = {k: e for k, e in s.entries.items() if k in keep}
                s.pruned &= keep
            kept = self._kept(s)
            usage_ok = isinstance(input_tokens, int) and input_tokens >= 0
            f = s.figures
            pruned = compacted = False
            if usage_ok and isinstance(window, int) and window > 0:
                kept, pruned, compacted = self._plain_compaction(s, int(input_tokens or 0), kept, window)
            if readback:
                if not s.plain_cut:
                    kept = -int(input_tokens or 0) if usage_ok else 0
                f.readback_requests += 1
            plain = sum(e.plain_now(k in s.pruned) for k, e in s.entries.items())
            sent = sum(e.sent for e in s.entries.values())
            f.requests += 1
            f.tokens_kept_out += kept
            f.last_request_tokens_kept_out = kept
            if usage_ok:
                f.tokens_sent += int(input_tokens or 0)
                f.requests_with_usage += 1
                f.kept_with_usage += kept
            since, s.since = s.since, {}
        if self.record:
            extra: dict[str, Any] = {"ses": session, "kt": kept,
                                     **{COUNTERS[k]: n for k, n in since.items()}}
            if readback:
                extra["rb"] = 1
            if compacted:
                extra["pc"] = 1
            if pruned:
                extra["pp"] = 1
            if usage_ok:
                extra["tin"] = int(input_tokens or 0)
            usage.record("objects", "request", sent, plain, workspace=workspace,
                         home=self.home, extra=extra)
        return kept

    @staticmethod
    def _kept(s: _Session) -> int:
        return tokens(sum(e.plain_now(k in s.pruned) - e.sent for k, e in s.entries.items()))

    def _plain_compaction(self, s: _Session, tin: int, kept: int, window: int) -> tuple[int, bool, bool]:
        """What plain dsh's compaction-basic would have done before this request: above its
        threshold (`compact_threshold`) with this request's input tokens plus what was kept
        out, while this request itself stayed under it, its tool-result pruner first cuts
        every result over PRUNE_AT (entries count `plain_now(pruned)` from then on); if that
        is not enough, it sends one summarization request (the whole transcript replayed,
        `tin + kept`, a request this session did not make: counted here) and then carries
        the summary and a recent tail: the entries count no more. Returns (kept, pruned,
        summarized)."""
        limit = compact_threshold(window)
        if limit <= 0 or kept <= 0 or tin > limit or tin + kept <= limit:
            return kept, False, False
        f = s.figures
        cut = {k for k, e in s.entries.items() if k not in s.pruned and e.plain_now(True) < e.plain}
        if cut:
            s.pruned |= cut
            s.plain_cut = True
            f.plain_prunes += 1
            kept = self._kept(s)
            if tin + kept <= limit:
                return kept, True, False
        summarize = tin + kept  # plain dsh's summarization request: its transcript replayed
        s.entries.clear()
        s.pruned.clear()
        s.plain_cut = True
        f.plain_compactions += 1
        return summarize, bool(cut), True

    def forget(self, session: str) -> None:
        """The session's live entries are gone (a compaction summarized them away)."""
        with self._lock:
            if session in self.sessions:
                self.sessions[session].entries.clear()

    # -- figures --------------------------------------------------------------------------
    def preload(self) -> None:
        """Read earlier workers' figures from the log on a thread of their own (a long log
        takes most of a second), not at the first change on a hot call."""
        if self._base is None and self.record and not self._preloading:
            self._preloading = True
            threading.Thread(target=self._base_figures, name="ledger-preload", daemon=True).start()

    def _base_figures(self) -> dict[str, Figures]:
        with self._base_lock:
            return self._load_base()

    def _load_base(self) -> dict[str, Figures]:
        if self._base is None:
            # Records keep milliseconds: one this ledger wrote never falls before the cut.
            cut = math.floor(self.started * 1000) / 1000
            self._base = sessions_from_log(self.home, until=cut) if self.record else {}
        return self._base

    def session_figures(self, session: str) -> dict[str, Any]:
        return self.snapshot(only=session)["sessions"].get(session) or Figures().as_dict()

    def snapshot(self, only: str | None = None) -> dict[str, Any]:
        """{"totals": figures, "sessions": {id: figures}}: one instant, one unit each."""
        base = self._base_figures()
        with self._lock:
            out: dict[str, Figures] = {}
            for sid, f in base.items():
                out[sid] = Figures()
                out[sid].add(f)
                out[sid].last_request_tokens_kept_out = f.last_request_tokens_kept_out
            for sid, s in self.sessions.items():
                g = out.pop(sid) if sid in out else Figures()
                out[sid] = g  # this worker's sessions are the most recent
                g.add(s.figures)
                if s.figures.requests:
                    g.last_request_tokens_kept_out = s.figures.last_request_tokens_kept_out
        return _shape(out, only)


def _shape(per: dict[str, Figures], only: str | None = None) -> dict[str, Any]:
    total = Figures()
    for f in per.values():
        total.add(f)
    shown = list(per.items())[-SHOWN_SESSIONS:] if only is None else [(only, per[only])] if only in per else []
    sessions = {sid: f.as_dict() for sid, f in shown}
    return {"unit": "tokens: request JSON chars / 4; tokens_sent: the provider's count",
            "totals": total.as_dict(), "sessions": sessions}


def sessions_from_log(home: Path | None = None, since: float | None = None,
                      until: float | None = None) -> dict[str, Figures]:
    """Per-session figures from the usage log's request records (what `Ledger` wrote)."""
    out: dict[str, Figures] = {}
    for r in _request_records(home, since, until):
        sid = str(r.get("ses") or "")
        f = out.pop(sid) if sid in out else Figures()
        out[sid] = f  # most recently active last
        kept = r.get("kt")
        kept = int(kept) if isinstance(kept, int) else tokens(r["rep"] - r["ret"])
        f.requests += 1
        f.tokens_kept_out += kept
        f.last_request_tokens_kept_out = kept
        tin = r.get("tin")
        if isinstance(tin, int) and tin >= 0:
            f.tokens_sent += tin
            f.requests_with_usage += 1
            f.kept_with_usage += kept
        if r.get("rb") == 1:
            f.readback_requests += 1
        if r.get("pc") == 1:
            f.plain_compactions += 1
        if r.get("pp") == 1:
            f.plain_prunes += 1
        for name in COUNTERS.values():
            n = r.get(name)
            if isinstance(n, int) and n > 0:
                setattr(f, name, getattr(f, name) + n)
    return out


def _request_records(home: Path | None, since: float | None,
                     until: float | None) -> list[dict[str, Any]]:
    """The log's `request` records in time order; other lines are skipped unparsed (a
    worker reads the whole log once)."""
    out: list[dict[str, Any]] = []
    for line in usage.log_lines(home, since):
        if b'"op":"request"' not in line:
            continue
        try:
            r = json.loads(line)
            t = float(r["t"])
            r["ret"], r["rep"] = int(r.get("ret", 0)), int(r.get("rep", 0))
        except (ValueError, KeyError, TypeError):
            continue
        if r.get("src") == "objects" and (since is None or t >= since) and (until is None or t < until):
            out.append(r)
    out.sort(key=lambda r: r["t"])
    return out


def figures_from_log(home: Path | None = None, since: float | None = None,
                     until: float | None = None) -> dict[str, Any]:
    """{"totals", "sessions"} as a worker's `Ledger.snapshot` shows them, from the log."""
    return _shape(sessions_from_log(home, since, until))


def with_store(stats: dict[str, Any], figures: dict[str, Any]) -> dict[str, Any]:
    """An object store's figures with the ledger's tokens kept out (all dsh requests): the
    one token figure `object stats`, MCP `status` and the dsh strip show."""
    t = figures["totals"]
    return {**{k: v for k, v in stats.items() if k not in ("chars_kept_out", "tokens_kept_out")},
            "tokens_kept_out": t["tokens_kept_out"], "requests_counted": t["requests"],
            "tokens_kept_out_bound": bound(t)}


def bound(figures: dict[str, Any]) -> str | None:
    """How exact the figure is: None where plain dsh would not have cut its own context;
    "at least" where it would have pruned (what its model then fetches again is not in the
    ledger); "about" where it would have summarized (nor are its summary and retained tail,
    against this session's whole history, so the figure may be over or under)."""
    if figures.get("plain_compactions"):
        return "about"
    return "at least" if figures.get("plain_prunes") else None

"""What the dsh plugin asks for, answered with the existing services.

One `Worker` lives as long as the `dsh-recall worker` process (one per dsh process). It
keeps what is cheap to keep (configs per workspace, open object stores and notes indexes,
per-session recall state) and decides nothing the services do not already decide:

- `offload`: a tool result's text blocks -> `ObjectService.put` (the policy the Claude Code
  hook uses), after dsh's own output cut is undone from its spill file (spill.py).
- `read`: a whole-file `read` over `reads.outline_over_chars` -> its head, an outline of its
  declarations by line range, and how to read a range (policy/reads.py); ranged reads are
  never sent.
- `context`: what to recall for the new user turn: the compaction anchor while it is live,
  the history gate's recall block while it is live (`RecallService`), and the notes
  auto-recall block for the current user message (`NotesService.auto_recall`); the plugin
  adds each block to the conversation once, as a user message (never the system prompt).
- `reclaim`: results already in the conversation -> `ObjectService.reclaim` (keep the newest,
  honour `objects.budget_tokens`); dsh then shadows each with compaction/prune + replace.
- `import`: the session's log into history (also done in idle time and before `context`).
- `request`: one model request of a session (the plugin sends it at each `assistant/message`
  with the changes that request still carried): the ledger (services/report/ledger.py) adds
  what they kept out of it.
- `status`: the ledger's figures (per session and in all), recall hits, on-disk footprint,
  this worker's counts: one snapshot, what every surface shows.

Requests come from dsh, a trusted harness; every text in them is still cleaned, and paths
named inside tool output are only used as spill.py allows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.clean import cap_query, clean_text
from ...core.config import Config, load_config
from ...core.errors import InputError
from ...core.paths import ensure_dir, recall_home
from ...services import history
from ...services.access.channel import Viewer, channel_key_from_env
from ...services.objects import ObjectService, ResultText
from ...services.recall import RecallService
from ...services.report import usage
from ...services.report.ledger import Ledger, dsh_plain_chars, dsh_pruned_chars, json_chars
from .spill import read_spill, restore_spilled
from .status import last_status as last_status
from .status import status_path

VERSION = 1
# Dsh session ids as the runtime writes them; anything else is not looked up on disk.
_SESSION_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
_LOG_NAMES = ("session.v4.jsonl.zstd", "session.v4.jsonl")
# Bound on the whole block added to one request's system prompt (each part has its own).
MAX_CONTEXT_CHARS = 6400
MAX_MESSAGE_CHARS = 4000
HEADER = "[dsh-recall] Context recalled for this request (not written by the user):"


def _cwd() -> Path | None:
    try:
        return Path.cwd()
    except OSError:  # the folder was removed under us
        return None


def call_seq(call_id: str, where: str) -> int:
    """The object seq of one text block of one tool call: the same call offloaded twice
    (a retry) maps to the same (session, seq), as in the Claude Code hook."""
    digest = hashlib.sha256(f"{call_id}\x00{where}".encode("utf-8", "surrogatepass")).hexdigest()
    return int(digest[:12], 16)


@dataclass
class SessionState:
    """What this worker remembers about one dsh session between requests."""

    message_id: str | None = None
    turn: int = 0
    recall: str = ""
    recall_until: int | None = None
    notes: str = ""
    anchor: str = ""
    anchor_until: int | None = None
    log_path: Path | None = None


def _text(value: Any, limit: int | None = None) -> str:
    text = clean_text(value if isinstance(value, str) else "")
    return text[:limit] if limit is not None else text


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_text(value: Any) -> str | None:
    return clean_text(value) if isinstance(value, str) and value else None


# What an answer keeps out of the request: not counted when it came after the deadline.
KEPT_OUT_COUNTS = ("offloads", "chars_in", "chars_inline", "reads_shortened")


class Worker:
    """Answers one request dict at a time (`handle`); `idle` does deferred work."""

    def __init__(self, dsh_home: str | None = None, config_file: str | None = None,
                 clock: Callable[[], float] = time.time):
        self.config_file = config_file
        self.dsh_home = Path(dsh_home or os.environ.get("DSH_HOME") or Path.home() / ".dsh").expanduser()
        self.channel = channel_key_from_env()
        # The channel is resolved once, against the config of the folder dsh started this
        # worker in (as `dsh-recall mcp` does with its workspace), never per session cwd.
        self._start_dir: Path | None = _cwd()
        self._access: Viewer | None = None
        self.clock = clock
        self.sessions: dict[str, SessionState] = {}
        self.dirty: set[str] = set()
        self._configs: dict[str, Config] = {}
        self._objects: dict[str, ObjectService] = {}
        self._notes: dict[str, Any] = {}
        self.counts = {"offloads": 0, "chars_in": 0, "chars_inline": 0, "reclaimed": 0,
                       "recall_blocks": 0, "notes_blocks": 0, "anchors": 0, "requests": 0,
                       "errors": 0, "late": 0, "reads_shortened": 0}
        # Tokens kept out per request and session; an op's changes wait in `_changes` until
        # `handle` knows it answered in time (a late answer changed nothing dsh sent).
        self.ledger = Ledger()
        self.ledger.preload()  # earlier workers' figures, on a thread: off every hot call
        self._changes: list[tuple[str, str, str, int, int, int]] = []
        ensure_dir(status_path().parent)
        self._status_path = status_path()
        self.started = clock()

    # -- plumbing ------------------------------------------------------------------------
    def config(self, cwd: str | None) -> Config:
        """The effective config for a session's workspace (the user's alone without one)."""
        key = cwd or ""
        if key not in self._configs:
            ws = Path(cwd) if cwd and Path(cwd).is_dir() else None
            self._configs[key] = load_config(workspace=ws, config_file=self.config_file)
        return self._configs[key]

    def floors(self, cwd: str | None) -> dict[str, int]:
        """The sizes under which nothing would change, for the plugin to keep to itself: a
        result at or under `threshold_chars` is never offloaded, a read at or under
        `read_chars` never shortened (0: reads are never shortened)."""
        cfg = self.config(cwd)
        return {"threshold_chars": cfg.objects.threshold_chars,
                "read_chars": cfg.reads.outline_over_chars}

    @staticmethod
    def quiet(cfg: Config) -> Config:
        """`cfg` without embedding in the request path: idle time fills vectors."""
        return cfg.model_copy(update={"embed_budget_s": 0.0})

    def objects(self, cfg: Config) -> ObjectService:
        key = cfg.objects.model_dump_json() + cfg.scrub.model_dump_json()
        if key not in self._objects:
            self._objects[key] = ObjectService(cfg.objects, scrub=cfg.scrub)
        return self._objects[key]

    def access(self) -> Viewer:
        """This worker's channel (`$DSH_RECALL_CHANNEL`; none: a session map fails closed),
        resolved on first use and kept."""
        if self._access is None:
            ws = self._start_dir if self._start_dir is not None and self._start_dir.is_dir() else None
            cfg = load_config(workspace=ws, config_file=self.config_file)
            self._access = Viewer(cfg, self.channel)
        return self._access

    def viewer(self) -> Viewer | None:
        """The viewer of object reads and counts: None (the user) without a channel."""
        return self.access() if self.channel else None

    def state(self, session: str) -> SessionState:
        return self.sessions.setdefault(session, SessionState())

    def log_path(self, session: str) -> Path | None:
        """The session's log under $DSH_HOME/sessions/--<cwd>--/<id>/, when it exists."""
        if not _SESSION_ID.fullmatch(session):
            return None
        st = self.state(session)
        if st.log_path is not None and st.log_path.is_file():
            return st.log_path
        found = [p for p in (self.dsh_home / "sessions").glob(f"*/{session}/session.v4.jsonl*")
                 if p.name in _LOG_NAMES and p.is_file()]
        st.log_path = max(found, key=lambda p: p.stat().st_mtime_ns) if found else None
        return st.log_path

    def close(self) -> None:
        for svc in self._objects.values():
            svc.close()
        for svc in self._notes.values():
            svc.close()
        self._objects.clear()
        self._notes.clear()

    # -- dispatch -------------------------------------------------------------------------
    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        fn = {"hello": self.op_hello, "offload": self.op_offload, "read": self.op_read,
              "context": self.op_context,
              "reclaim": self.op_reclaim, "import": self.op_import, "status": self.op_status,
              "request": self.op_request,
              "ping": lambda r: {"pong": True}}.get(op if isinstance(op, str) else "")
        if fn is None:
            raise InputError(f"unknown op {str(op)[:40]!r}; ops: hello, offload, read, context, "
                             "reclaim, import, request, status, ping")
        self.counts["requests"] += 1
        before = {k: self.counts[k] for k in KEPT_OUT_COUNTS}
        self._changes = []
        out = fn(req)
        at = req.get("deadline_at")
        if isinstance(at, (int, float)) and not isinstance(at, bool) and time.time() * 1000 > at:
            # dsh went on with its own result at the deadline: nothing was kept out, so this
            # answer counts as late, not as an offload or a shortened read.
            self.counts.update(before)
            self.counts["late"] += 1
            out["late"] = True
        elif self._changes:
            for change in self._changes:
                self.ledger.change(*change)
            self._write_status()
        self._changes = []
        return out

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        cfg = self.config(_opt_text(req.get("cwd")))
        return {"version": VERSION, "pid": os.getpid(), "home": str(recall_home()),
                "threshold_chars": cfg.objects.threshold_chars}

    # -- reaper ---------------------------------------------------------------------------
    def op_offload(self, req: dict[str, Any]) -> dict[str, Any]:
        """Text blocks of one tool result -> the blocks to show instead (None: unchanged)."""
        session = _text(req.get("session")) or "dsh"
        call_id = _text(req.get("call_id"))
        tool = _opt_text(req.get("tool"))
        cfg = self.config(_opt_text(req.get("cwd")))
        svc = self.objects(cfg)
        blocks = req.get("blocks")
        if not isinstance(blocks, list):
            raise InputError("offload needs blocks: a list of texts (null for other blocks)")
        out: list[str | None] = []
        ids: list[str | None] = []
        plain = sent = pruned = 0
        for i, block in enumerate(blocks):
            if not isinstance(block, str) or len(block) <= cfg.objects.threshold_chars:
                out.append(None)
                ids.append(None)
                continue
            text = clean_text(block)
            full = restore_spilled(text, lambda p: read_spill(p, svc.max_object_bytes)).text
            res = svc.put(full, session=session, seq=call_seq(call_id, f"/content/{i}") if call_id else None,
                          tool=tool, channel=self.channel)
            if res.offloaded and len(res.inline) < len(block):
                out.append(res.inline)
                ids.append(res.id)
                was, was_pruned = dsh_plain_chars(block)
                plain, sent, pruned = plain + was, sent + json_chars(res.inline), pruned + was_pruned
                self.counts["offloads"] += 1
                self.counts["chars_in"] += len(full)
                self.counts["chars_inline"] += len(res.inline)
            else:
                out.append(None)
                ids.append(None)
        self.dirty.add(session)
        if any(ids):
            # Measured against what dsh handed over (its own cut), not the restored whole.
            self._changes.append((session, call_id or f"offload-{ids[0]}", "offload", plain, sent, pruned))
        return {"blocks": out, "ids": ids}

    def op_reclaim(self, req: dict[str, Any]) -> dict[str, Any]:
        """Results already in the conversation (oldest first) -> those to shadow now, by
        seq, with their pointer text. Read-like tools count only under a token budget; with
        `surface` ([seq, chars] of every message) only a rewrite that pays for its cache
        miss is made."""
        session = _text(req.get("session")) or "dsh"
        cfg = self.config(_opt_text(req.get("cwd")))
        svc = self.objects(cfg)
        items = req.get("results")
        if not isinstance(items, list):
            raise InputError("reclaim needs results: [{seq, tool, text, pass_through}]")
        budget = cfg.objects.budget_tokens is not None
        results: list[ResultText] = []
        plain: dict[int, tuple[str, int, int]] = {}  # seq -> (ledger key, JSON chars dsh had, pruned)
        for r in items:
            if not isinstance(r, dict) or not isinstance(r.get("seq"), int):
                continue
            text = r.get("text")
            if isinstance(text, str):
                plain[r["seq"]] = (_text(r.get("call_id")) or f"seq-{r['seq']}", json_chars(text),
                                  dsh_pruned_chars(text, spill=False))
            if isinstance(text, str) and r.get("pass_through") and not budget:
                text = None  # read-like output stays verbatim unless the user set a budget
            if isinstance(text, str):
                text = restore_spilled(clean_text(text),
                                       lambda p: read_spill(p, svc.max_object_bytes)).text
            results.append(ResultText(r["seq"], text if isinstance(text, str) else None,
                                      _opt_text(r.get("tool"))))
        tokens = req.get("context_tokens")
        raw = req.get("surface")
        surface = [(int(x[0]), int(x[1])) for x in raw if isinstance(x, list) and len(x) == 2
                   and all(isinstance(v, int) for v in x)] if isinstance(raw, list) else None
        viewer = self.viewer()
        done = svc.reclaim(session, results, tokens if isinstance(tokens, int) else None,
                           channel=self.channel,
                           viewer=viewer,
                           surface=surface)
        out = {str(seq): {"text": res.inline, "id": res.id} for seq, res in done.items()}
        for seq, res in done.items():
            now = json_chars(res.inline)
            key, had, cut = plain.get(seq, (f"seq-{seq}", now, now))
            self._changes.append((session, key, "reclaim", had, now, cut))
        if out:
            self.counts["reclaimed"] += len(out)
        return {"replace": out}

    def op_read(self, req: dict[str, Any]) -> dict[str, Any]:
        """A whole-file `read` result -> its short form (head + outline + how to read a
        range), or None to leave it as it is (small, ranged, or not dsh's read format)."""
        from ...policy.reads import short_read

        cfg = self.config(_opt_text(req.get("cwd")))
        text = req.get("text")
        if not isinstance(text, str):
            raise InputError("read needs text: the read tool's output")
        text = clean_text(text)
        short = short_read(text, _text(req.get("path"), 4096), cfg.reads)
        if short is None:
            return {"text": None}
        session = _text(req.get("session")) or "dsh"
        key = _text(req.get("call_id")) or f"read-{self.counts['reads_shortened']}"
        self._changes.append((session, key, "read", json_chars(req["text"]), json_chars(short),
                              dsh_pruned_chars(req["text"], spill=False)))
        self.counts["reads_shortened"] += 1
        self.counts["chars_in"] += len(text)
        self.counts["chars_inline"] += len(short)
        usage.record("objects", "read", len(short), len(text), workspace=_opt_text(req.get("cwd")))
        return {"text": short}

    # -- auto-recall, notes, anchor ----------------------------------------------------------
    def op_context(self, req: dict[str, Any]) -> dict[str, Any]:
        """What to recall for this request ("" when nothing is relevant), whole and by part."""
        session = _text(req.get("session"))
        if not session:
            raise InputError("context needs the session id")
        cwd = _opt_text(req.get("cwd"))
        cfg = self.quiet(self.config(cwd))
        st = self.state(session)
        path = self.log_path(session)
        transcript = str(path) if path else None
        rs = RecallService(cfg, viewer=self.viewer())
        if req.get("compacted"):
            anchor = rs.anchor(session, transcript)
            if anchor is not None:
                st.anchor = anchor["context"]
                st.anchor_until = int(rs.state(session).get("anchor_until") or 0)
                self.counts["anchors"] += 1
        message_id = _opt_text(req.get("message_id"))
        message = cap_query(_text(req.get("message"), MAX_MESSAGE_CHARS))
        if message_id and message_id != st.message_id and message.strip():
            st.message_id = message_id
            res = rs.on_user_prompt(session, message, transcript)
            st.turn = int(res.get("turn") or st.turn + 1)
            if res.get("fire") and res.get("context"):
                st.recall, st.recall_until = res["context"], int(res.get("live_until") or st.turn)
                self.counts["recall_blocks"] += 1
            st.notes = self._notes_block(cfg, cwd, message)
            if st.notes:
                self.counts["notes_blocks"] += 1
        elif transcript:
            history.import_paths([transcript], cfg=cfg, channel=self.channel)
        self.dirty.add(session)
        parts = {"anchor": st.anchor if st.anchor and st.turn <= (st.anchor_until or 0) else "",
                 "recall": st.recall if st.recall and st.turn <= (st.recall_until or 0) else "",
                 "notes": st.notes}
        body = "\n\n".join(p for p in parts.values() if p)
        text = f"{HEADER}\n\n{body}"[:MAX_CONTEXT_CHARS] if body else ""
        self._write_status()
        # `blocks`: each part alone (the plugin adds each to the conversation once).
        return {"text": text, "header": HEADER,
                "blocks": {k: v[:MAX_CONTEXT_CHARS] for k, v in parts.items() if v},
                "parts": {k: bool(v) for k, v in parts.items()}, "turn": st.turn,
                "floors": self.floors(cwd),
                "reclaim": {"threshold_chars": cfg.objects.threshold_chars,
                            "budget": cfg.objects.budget_tokens is not None,
                            "budget_tokens": cfg.objects.budget_tokens,
                            "keep": cfg.objects.keep}}

    def _notes_block(self, cfg: Config, cwd: str | None, message: str) -> str:
        from ...services.notes import NotesService

        key = cwd or ""
        if key not in self._notes:
            self._notes[key] = NotesService(cfg, workspace=Path(cwd) if cwd and Path(cwd).is_dir() else None)
        svc = self._notes[key]
        if not svc.roots:
            return ""
        # access(), not no viewer: without a channel a session map fails closed here.
        return svc.auto_recall(message, viewer=self.access())

    # -- fresh history ----------------------------------------------------------------------
    def op_import(self, req: dict[str, Any]) -> dict[str, Any]:
        session = _text(req.get("session"))
        cfg = self.quiet(self.config(_opt_text(req.get("cwd"))))
        path = self.log_path(session) if session else None
        if path is None:
            return {"imported": False, "reason": "no session log on disk yet"}
        rep = history.import_paths([str(path)], cfg=cfg, channel=self.channel)
        self.dirty.add(session)
        return {"imported": True, "events": rep["events"], "blocks": rep["blocks"]}

    def hand_off(self, send: Callable[[dict[str, Any]], bool]) -> None:
        """Deferred work after a quiet spell: the touched sessions' new events into history
        (no embedding: quick), then the embedding handed to the idle process (idle.py),
        which this thread never waits for. Also starts the per-user CLI daemon when none
        runs (frontends/warm.py; off with DSH_RECALL_DAEMON=0 or daemon.autostart), so the
        agent's own `dsh-recall` calls find it warm."""
        from ..warm import start

        start(self.config_file)
        if not self.dirty:
            return
        cfg = self.quiet(self.config(None))
        while self.dirty:
            path = self.log_path(self.dirty.pop())
            if path is not None:
                history.import_paths([str(path)], cfg=cfg, channel=self.channel)
        send({"job": "history.embed"})
        for key, svc in self._notes.items():
            if svc.roots:
                send({"job": "notes.embed", "cwd": key or None})

    # -- status -----------------------------------------------------------------------------
    def op_request(self, req: dict[str, Any]) -> dict[str, Any]:
        """One model request of a session: the recall messages the plugin added since the
        previous one (`added`: [[key, JSON chars]]), the keys of the changes the request
        still carried (`present`; null: all), the provider's input tokens where reported,
        whether it follows a read-back of kept-out text (`readback`), and the context window
        dsh logged for the session (`context_window`)."""
        session = _text(req.get("session"))
        if not session:
            raise InputError("request needs the session id")
        for item in req.get("added") or []:
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], int):
                self.ledger.change(session, _text(item[0]), "message", 0, item[1])
        present = req.get("present")
        keys = [_text(k) for k in present if isinstance(k, str)] if isinstance(present, list) else None
        tin = req.get("input_tokens")
        kept = self.ledger.request(session, keys, tin if isinstance(tin, int) and not isinstance(tin, bool) else None,
                                   workspace=_opt_text(req.get("cwd")), readback=req.get("readback") is True,
                                   window=_int(req.get("context_window")))
        self._write_status()
        return {"tokens_kept_out": kept}

    def op_status(self, req: dict[str, Any]) -> dict[str, Any]:
        """The ledger's figures with the store's, from one instant (the chip, strip and tab
        of the browser half all read this one answer)."""
        from ...services.report.ledger import with_store

        cfg = self.config(_opt_text(req.get("cwd")))
        st = self.objects(cfg).stats(viewer=self.viewer())
        snap = self.snapshot()
        objects = with_store({k: st[k] for k in ("offloaded", "live", "recalls", "recall_ratio",
                                                 "disk_bytes")}, snap["ledger"])
        return {"objects": objects, "ledger": snap["ledger"], "worker": snap}

    def snapshot(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "started": self.started, "updated": self.clock(),
                "sessions": len(self.sessions), **self.counts, "ledger": self.ledger.snapshot()}

    def _write_status(self) -> None:
        """This worker's counts, for `status` in other processes (the MCP server)."""
        try:
            tmp = self._status_path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.snapshot()), encoding="utf-8")
            os.replace(tmp, self._status_path)
        except OSError:
            pass

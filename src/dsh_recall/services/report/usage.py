"""The local usage log: what each search, recall and offload returned against what it replaced.

One JSON line per call, appended to `<recall home>/usage/YYYY-MM.jsonl` (local month). Only
sizes and places are kept, never the query or any text: `src` (code, history, notes,
objects, all), `op` (search, recall, offload), `ret` (chars the caller got back), `rep`
(chars the answer stands in for), `hits`, and where known `ws` (workspace) or `obj` (object
id). Nothing leaves the machine; `report/summary.py` and `report/ledger.py` read it.

What `rep` means per source (the report calls every such figure an upper bound):
- code search: the whole files the excerpts came from;
- history search: the whole sessions the hits came from (what re-reading them would cost);
- notes search: the whole note files the passages came from;
- objects offload: the full tool result, against the inline head + pointer + tail (`ret`);
- objects recall: 0 (a recall brings `ret` chars back into the context; `tot` is the
  object's size);
- objects request (the dsh plugin, once per model request; report/ledger.py writes it): the
  JSON chars plain dsh would have sent for every change the request still carried (`rep`)
  against what it sent instead (`ret`), with `ses` (the dsh session), `kt` (tokens kept
  out of this request), `tin` (the provider's input tokens, where reported) and the
  changes made since the session's previous request (`offloads`, `reads_shortened`,
  `reclaimed`, `recall_messages`).

`via` names the front end ("cli", "web", "mcp", "hook", "dsh"): a search from the CLI or the
dashboard happened outside any conversation, so the report keeps its upper bound apart.

Recording is on every hot path (a hook offloads on each tool call), so `record` costs one
append, imports nothing heavy and never raises. `DSH_RECALL_USAGE=0` turns it off.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

USAGE_ENV = "DSH_RECALL_USAGE"
# Which front end this process is (`via` in each record): "cli" or "web" (the dashboard)
# outside any conversation; "mcp", "hook", "dsh" (the plugin's worker) inside one.
_VIA: str | None = None
# Front ends whose searches happen outside any conversation.
OUTSIDE = frozenset({"cli", "web"})


def set_via(name: str | None) -> None:
    """Tag this process's records with the front end that made them."""
    global _VIA
    _VIA = name
DIR_NAME = "usage"
SOURCES = ("code", "history", "notes", "objects", "all")

# Inside `collect()`, records go to a list instead of the log: the all-sources search keeps
# its parts' records and writes one record of its own.
_SINK: ContextVar[list[dict[str, Any]] | None] = ContextVar("dsh_recall_usage_sink", default=None)


def enabled() -> bool:
    return os.environ.get(USAGE_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def log_dir(home: Path | None = None) -> Path:
    if home is None:
        from ...core.paths import recall_home
        home = recall_home()
    return Path(home) / DIR_NAME


def record(src: str, op: str, returned: int, replaced: int, *, hits: int | None = None,
           workspace: str | None = None, obj: str | None = None, total: int | None = None,
           home: Path | None = None, now: float | None = None,
           extra: dict[str, Any] | None = None) -> None:
    """Append one record (`extra`: more keys, sizes and ids only). Never raises: a usage
    log must not break a search."""
    try:
        t = time.time() if now is None else float(now)
        rec: dict[str, Any] = {"t": round(t, 3), "src": src, "op": op,
                               "ret": max(0, int(returned)), "rep": max(0, int(replaced))}
        if hits is not None:
            rec["hits"] = int(hits)
        if workspace:
            rec["ws"] = str(workspace)
        if obj:
            rec["obj"] = str(obj)
        if total is not None:
            rec["tot"] = int(total)
        if _VIA is not None:
            rec["via"] = _VIA
        if extra:
            rec.update({k: v for k, v in extra.items() if k not in rec})
        sink = _SINK.get()
        if sink is not None:
            sink.append(rec)
            return
        if not enabled():
            return
        d = log_dir(home)
        path = d / (time.strftime("%Y-%m", time.localtime(t)) + ".jsonl")
        line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
            "utf-8", "replace")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileNotFoundError:
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)  # one write of one short line: appends never interleave
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001 - the log is best effort by design
        pass


@contextmanager
def collect() -> Iterator[list[dict[str, Any]]]:
    """Within the block (and threads started with its context), records are gathered into
    the yielded list instead of being written."""
    sink: list[dict[str, Any]] = []
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def log_lines(home: Path | None = None, since: float | None = None) -> Iterator[bytes]:
    """The raw lines of the monthly log files that can hold records from `since` on (a file
    that cannot be read is passed over)."""
    d = log_dir(home)
    try:
        names = sorted(p for p in os.listdir(d) if p.endswith(".jsonl"))
    except OSError:
        return
    first = time.strftime("%Y-%m", time.localtime(since)) if since is not None else None
    for name in names:
        if first is not None and name[:7] < first:
            continue
        try:
            raw = (d / name).read_bytes()
        except OSError:
            continue
        yield from raw.splitlines()


def read(home: Path | None = None, since: float | None = None,
         until: float | None = None) -> tuple[list[dict[str, Any]], int]:
    """(records in time order, lines skipped as unreadable) between `since` and `until`."""
    out: list[dict[str, Any]] = []
    bad = 0
    for line in log_lines(home, since):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            t = float(rec["t"])
            rec["ret"], rec["rep"] = int(rec.get("ret", 0)), int(rec.get("rep", 0))
            if not isinstance(rec.get("src"), str) or not isinstance(rec.get("op"), str):
                raise ValueError("no src/op")
        except (ValueError, KeyError, TypeError):
            bad += 1
            continue
        if (since is None or t >= since) and (until is None or t < until):
            out.append(rec)
    out.sort(key=lambda r: r["t"])
    return out, bad


# -- what each service calls (one line each, at the end of its search / recall / offload) --

def code_search(workspace: Any, answer: dict[str, Any]) -> dict[str, Any]:
    try:
        record("code", "search", answer.get("returned_chars", 0), answer.get("source_chars", 0),
               hits=len(answer.get("results") or []), workspace=str(workspace))
    except Exception:  # recording usage never breaks the answer it counts
        pass
    return answer


def history_search(store: Any, answer: dict[str, Any]) -> dict[str, Any]:
    """Returned: the answer as a caller pastes it (compact JSON). Replaced: every event of
    the sessions it drew hits from."""
    try:
        hits = answer.get("hits") or []
        returned = len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))
        replaced = sum(session_chars(store, s) for s in {h["session"] for h in hits})
        scope = answer.get("scope") or {}
        ws = scope.get("value") if scope.get("kind") == "workspace" else None
        record("history", "search", returned, replaced, hits=len(hits), workspace=ws)
    except Exception:  # recording usage never breaks the answer it counts
        pass
    return answer


def session_chars(store: Any, session: str) -> int:
    """Characters of a history session's events (one sum in the store)."""
    return store.event_chars(session)


def notes_search(store: Any, answer: dict[str, Any], workspace: Any = None) -> dict[str, Any]:
    try:
        results = answer.get("results") or []
        returned = sum(len(r.get("text") or "") for r in results)
        replaced = 0
        for p in {r["path"] for r in results}:
            row = store.file(p)
            replaced += int(row.chars or 0) if row is not None else 0
        record("notes", "search", returned, replaced, hits=len(results),
               workspace=str(workspace) if workspace else None)
    except Exception:  # recording usage never breaks the answer it counts
        pass
    return answer


def object_offload(obj_id: str | None, inline_chars: int, chars: int, created: bool = True) -> None:
    """An offload stores `chars` and leaves `inline_chars` in the conversation. A second put
    of the same result (idempotent by session and seq) is not a new offload."""
    if obj_id and created:
        record("objects", "offload", inline_chars, chars, obj=obj_id)


def object_recall(obj_id: str, returned: int, total: int) -> None:
    record("objects", "recall", returned, 0, obj=obj_id, total=total)

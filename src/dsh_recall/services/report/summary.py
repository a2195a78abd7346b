"""`dsh-recall report`: what recall kept out of the conversations, and what it costs to keep.

Reads the local usage log (report/usage.py), the indexes and the stores under the recall
home, and optionally dsh's session logs. Returns one plain dict (JSON-ready) that the CLI
prints and the dashboard draws:

- `totals`, `sources`, `days`, `workspaces`: calls, chars returned / replaced / kept out
  (replaced minus returned; a recall counts against it: it brings text back), tokens kept
  out (report/tokens.py: a real tokenizer's chars-per-token where available, else chars / 4);
- `objects`: offloads, recalls, and the recall hit ratio (offloaded objects recalled at
  least once / objects offloaded), from the log and from the object store;
- `indexes`: freshness of every code and notes index (stale files, pending vectors, last
  indexed) and of history;
- `footprint`: bytes on disk under the recall home, by part;
- `baseline`: dsh sessions with recall against those without (report/baseline.py);
- `per_request`: the dsh plugin's recurring saving, the ledger's totals (ledger.py): per
  model request, what the changes it still carried kept out of it against plain dsh, summed
  over requests, in tokens (request JSON chars / 4), with the provider's input tokens;
- `cli_searches`: searches run from the command line, outside any conversation: their upper
  bounds are shown apart and never added to what conversations saved.

Honest by construction: what a search "replaced" is the whole file / session / note its
answer came from, an upper bound on what an agent would otherwise have read; the report
labels it so.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ...core.paths import recall_home
from . import baseline as report_baseline
from . import ledger, usage
from . import tokens as report_tokens

HASH_LIMIT = 2000  # stale checks read at most this many changed files per index
HONESTY = [
    "'replaced' is an upper bound: for a search it is the whole files, sessions or note "
    "files the answer came from, which an agent without recall might not have read in full",
    "objects are exact: an offload replaced the full tool result with its inline head, "
    "pointer and tail; every recall brings its text back and counts against the savings",
]


# -- grouping -------------------------------------------------------------------------------

def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


def period_start(now: float, days: int | None) -> float | None:
    """Local midnight `days - 1` days before `now` (None: the whole log)."""
    if not days:
        return None
    d = dt.date.fromtimestamp(now) - dt.timedelta(days=days - 1)
    return time.mktime(d.timetuple())


class _Group:
    """Sums for one slice of the log (a day, a workspace, everything), per source."""

    def __init__(self) -> None:
        self.by_src: dict[str, dict[str, int]] = {}
        self.ops: dict[str, int] = {}

    def add(self, rec: dict[str, Any]) -> None:
        s = self.by_src.setdefault(rec["src"], {"calls": 0, "returned_chars": 0,
                                                "replaced_chars": 0, "kept_out_chars": 0})
        s["calls"] += 1
        s["returned_chars"] += rec["ret"]
        s["replaced_chars"] += rec["rep"]
        s["kept_out_chars"] += rec["rep"] - rec["ret"]
        self.ops[rec["op"]] = self.ops.get(rec["op"], 0) + 1

    def as_dict(self, cpt: dict[str, float], per_source: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"calls": 0, "returned_chars": 0, "replaced_chars": 0,
                               "kept_out_chars": 0, "kept_out_tokens": 0}
        srcs: dict[str, Any] = {}
        for src, s in sorted(self.by_src.items()):
            tok = report_tokens.tokens(s["kept_out_chars"], cpt.get(src, cpt["all"]))
            srcs[src] = {**s, "kept_out_tokens": tok}
            for k in ("calls", "returned_chars", "replaced_chars", "kept_out_chars"):
                out[k] += s[k]
            out["kept_out_tokens"] += tok
        out["ops"] = dict(sorted(self.ops.items()))
        if per_source:
            out["sources"] = srcs
        return out


def _objects_ratio(recs: list[dict[str, Any]], recalled: set[str]) -> dict[str, Any]:
    offloaded = {r["obj"] for r in recs if r["src"] == "objects" and r["op"] == "offload"
                 and r.get("obj")}
    hit = offloaded & recalled
    return {"offloaded": len(offloaded), "recalled": len(hit),
            "recall_hit_ratio": round(len(hit) / len(offloaded), 4) if offloaded else None,
            "recalls": sum(1 for r in recs if r["src"] == "objects" and r["op"] == "recall")}


# -- indexes --------------------------------------------------------------------------------

def _sha(path: str, size: int) -> str | None:
    from ...readers.workspace import read_regular

    try:
        return hashlib.sha256(read_regular(path, size + 1)).hexdigest()
    except OSError:
        return None


def _stale(files: dict[str, Any], hashed: bool) -> int:
    """Indexed files changed or gone since indexed: stat differs and (for code, whose file
    rows keep a content hash) the content differs too, as a search's `stale` flag says."""
    n = reads = 0
    for row in files.values():
        try:
            st = os.stat(row.abs_path, follow_symlinks=False)
        except OSError:
            n += 1
            continue
        if st.st_size == row.size and st.st_mtime_ns == row.mtime_ns:
            continue
        if hashed and reads < HASH_LIMIT:
            reads += 1
            want = row.hash.split(":", 1)[-1]
            if _sha(row.abs_path, row.size) == want:
                continue
        n += 1
    return n


def _dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _chunk_index(path: Path, kind: str) -> dict[str, Any] | None:
    from ...stores.sqlite.chunks import SqliteChunkStore

    try:
        store = SqliteChunkStore(path)
    except Exception as e:  # noqa: BLE001 - one bad index is reported, not fatal
        return {"database": str(path), "error": str(e)}
    try:
        last = json.loads(store.get_meta("last_index") or "{}")
        files = store.files()
        chunks = store.chunk_count()
        pending = store.pending_count()
        out: dict[str, Any] = {"database": str(path), "files": len(files), "chunks": chunks,
                               "pending_vectors": pending, "stale_files": _stale(files, kind == "code"),
                               "last_indexed": last.get("time")}
        if kind == "code":
            out["workspace"] = store.get_meta("workspace")
            out["bytes"] = _dir_bytes(path.parent)
        else:
            out["roots"] = json.loads(store.get_meta("roots") or "[]")
            out["bytes"] = sum(_file_bytes(path.parent / f"{path.stem}{s}")
                               for s in (".sqlite", ".sqlite-wal", ".sqlite-shm"))
            out["bytes"] += _dir_bytes(path.parent / f"{path.stem}.vectors")
        return out
    finally:
        store.close()


def _file_bytes(p: Path) -> int:
    try:
        return os.lstat(p).st_size
    except OSError:
        return 0


def indexes(home: Path) -> dict[str, Any]:
    """Freshness of every code index, every notes index, and history."""
    code = [i for p in sorted((home / "workspaces").glob("*/index.sqlite"))
            if (i := _chunk_index(p, "code"))]
    notes = [i for p in sorted((home / "notes").glob("*.sqlite"))
             if (i := _chunk_index(p, "notes"))]
    hist: dict[str, Any] | None = None
    if (home / "history.sqlite").exists():
        from ...stores.sqlite.history import HistoryStore

        try:
            hs = HistoryStore(home / "history.sqlite")
            try:
                st = hs.stats()
                blocks = hs.block_count()
                hist = {"sessions": st["sessions"], "events": st["events"], "blocks": blocks,
                        "pending_vectors": blocks - hs.embedded_count(),
                        "files": st["files"]}
            finally:
                hs.close()
        except Exception as e:  # a store that cannot be read is reported, not raised
            hist = {"error": str(e)}
    return {"code": code, "notes": notes, "history": hist}


# -- footprint ------------------------------------------------------------------------------

PARTS = (("workspaces", "code indexes"), ("notes", "notes indexes"), ("history.sqlite", "history"),
         ("objects.sqlite", "objects"), ("embed-cache.sqlite", "embedding cache"),
         (usage.DIR_NAME, "usage log"))


def footprint(home: Path) -> dict[str, Any]:
    """Bytes (file sizes) under the recall home, by part."""
    parts = {label: 0 for _, label in PARTS}
    parts["other"] = 0
    try:
        entries = sorted(os.listdir(home))
    except OSError:
        entries = []
    for name in entries:
        full = home / name
        size = _dir_bytes(full) if full.is_dir() and not full.is_symlink() else _file_bytes(full)
        label = next((lab for prefix, lab in PARTS
                      if name == prefix or name.startswith(prefix + "-")), "other")
        parts[label] += size
    return {"total_bytes": sum(parts.values()), "parts": parts}


# -- the report -----------------------------------------------------------------------------

def build(home: Path | None = None, *, days: int | None = 30, now: float | None = None,
          tokens: str = "auto", sessions_dir: Path | None = None,
          baseline: bool = True) -> dict[str, Any]:
    """The whole report. `days`: the last N local days (None: the whole log); `tokens`:
    "auto" (a real tokenizer when it loads) or "chars/4"; `sessions_dir`: dsh session logs
    for the before / after block (default `$DSH_HOME/sessions`)."""
    t0 = time.monotonic()
    home = Path(home) if home is not None else recall_home()
    now = time.time() if now is None else now
    since = period_start(now, days)
    recs, bad = usage.read(home, since=since)
    all_recs = recs if since is None else usage.read(home)[0]
    recalled = {r["obj"] for r in all_recs if r["src"] == "objects" and r["op"] == "recall"
                and r.get("obj")}
    tok = report_tokens.ratios(home, tokens)
    cpt = tok["chars_per_token"]

    total, cli = _Group(), _Group()
    by_day: dict[str, _Group] = {}
    by_ws: dict[str | None, _Group] = {}  # None: a record without a workspace
    day_recs: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        if r["op"] == "request":  # the recurring saving: the ledger's, counted apart (below)
            continue
        if r.get("via") in usage.OUTSIDE and r["src"] != "objects":
            # A search run outside any conversation (command line, dashboard): its
            # whole-file upper bound is no saving of any conversation's.
            cli.add(r)
            continue
        total.add(r)
        d = _day(r["t"])
        by_day.setdefault(d, _Group()).add(r)
        day_recs.setdefault(d, []).append(r)
        by_ws.setdefault(r.get("ws"), _Group()).add(r)

    idx = indexes(home)
    code_by_ws = {i.get("workspace"): i for i in idx["code"] if i.get("workspace")}
    days_out = [{"day": d, **by_day[d].as_dict(cpt), "objects": _objects_ratio(day_recs[d], recalled)}
                for d in sorted(by_day)]
    ws_out = []
    for ws in sorted(set(by_ws) | set(code_by_ws), key=lambda w: (w is None, w or "")):
        g = by_ws.get(ws) or _Group()
        row = {"workspace": ws, **g.as_dict(cpt)}
        if ws in code_by_ws:
            i = code_by_ws[ws]
            row["index"] = {k: i.get(k) for k in ("files", "chunks", "stale_files",
                                                   "pending_vectors", "last_indexed", "bytes")}
        ws_out.append(row)
    objects = _objects_ratio(recs, recalled)
    objects["store"] = _object_store(home)
    totals = total.as_dict(cpt)
    out: dict[str, Any] = {
        "home": str(home), "generated": now,
        "period": {"days": days, "from": _day(since) if since is not None else
                   (_day(recs[0]["t"]) if recs else None), "to": _day(now)},
        "tokens": tok, "totals": {k: v for k, v in totals.items() if k != "sources"},
        "sources": totals["sources"], "days": days_out, "workspaces": ws_out,
        "objects": objects, "indexes": idx, "footprint": footprint(home),
        # Every model request of a dsh session with the plugin: what the changes it still
        # carried kept out of it against plain dsh (ledger.py: the figures every surface shows).
        "per_request": ledger.figures_from_log(home, since=since)["totals"],
        # Searches outside any conversation: command line, dashboard (upper bounds).
        "cli_searches": cli.as_dict(cpt),
        "honesty": HONESTY + [tok["note"]],
        "log": {"records": len(recs), "unreadable_lines": bad,
                "path": str(usage.log_dir(home))},
    }
    if baseline:
        out["baseline"] = report_baseline.compare(sessions_dir)
    out["elapsed_ms"] = round((time.monotonic() - t0) * 1000, 1)
    return out


def _object_store(home: Path) -> dict[str, Any] | None:
    """Store-wide object figures (every channel: the report is the user's)."""
    path = home / "objects.sqlite"
    if not path.exists():
        return None
    from ...stores.sqlite.objects import ObjectStore

    try:
        store = ObjectStore(path)
    except Exception as e:  # a store that cannot be read is reported, not raised
        return {"error": str(e)}
    try:
        t = store.totals()
        return {"objects": t["objects"], "live": t["objects"] - t["evicted"],
                "evicted": t["evicted"], "recalls": t["recalls"],
                "chars_offloaded": t["chars"], "stored_bytes": t["blob_stored_bytes"]}
    finally:
        store.close()


# -- text -----------------------------------------------------------------------------------

def _n(x: int | float | None) -> str:
    return "-" if x is None else f"{x:,}"


def render_text(r: dict[str, Any]) -> str:
    """The report as a few plain tables (the CLI's human output)."""
    t = r["totals"]
    lines = [f"dsh-recall report: {r['period']['from'] or '-'} .. {r['period']['to']} "
             f"({r['home']})", "",
             f"calls {t['calls']:,}; kept out {t['kept_out_chars']:,} chars = "
             f"{t['kept_out_tokens']:,} tokens ({r['tokens']['method']})", "",
             f"{'source':<9} {'calls':>7} {'returned':>12} {'replaced (upper bound)':>23} "
             f"{'kept out':>12} {'tokens':>10}"]
    for src, s in r["sources"].items():
        lines.append(f"{src:<9} {s['calls']:>7,} {s['returned_chars']:>12,} "
                     f"{s['replaced_chars']:>23,} {s['kept_out_chars']:>12,} "
                     f"{s['kept_out_tokens']:>10,}")
    lines += ["", f"{'day':<11} {'calls':>7} {'kept out chars':>15} {'tokens':>10} "
              f"{'offloaded':>10} {'recalled':>9}"]
    for d in r["days"]:
        o = d["objects"]
        lines.append(f"{d['day']:<11} {d['calls']:>7,} {d['kept_out_chars']:>15,} "
                     f"{d['kept_out_tokens']:>10,} {o['offloaded']:>10,} {o['recalled']:>9,}")
    pr = r.get("per_request") or {}
    if pr.get("requests"):
        saving = f" ({pr['saving']:.1%} of what plain dsh would have sent)" if pr.get("saving") else ""
        floor = f"{b} " if (b := ledger.bound(pr)) else ""
        lines += ["", f"dsh requests: {pr['requests']:,}; {floor}{pr['tokens_kept_out']:,} tokens kept out "
                  f"of them in all{saving}: each request counts every change it still carried, "
                  "against plain dsh (request JSON chars / 4)"]
    c = r.get("cli_searches") or {}
    if c.get("calls"):
        lines += ["", f"command-line searches (outside any conversation, not counted above): "
                  f"{c['calls']:,} calls, {c['returned_chars']:,} chars returned, upper bound "
                  f"{c['replaced_chars']:,} chars of whole files / sessions / notes"]
    o = r["objects"]
    ratio = "-" if o["recall_hit_ratio"] is None else f"{o['recall_hit_ratio']:.0%}"
    lines += ["", f"objects: {o['offloaded']:,} offloaded, {o['recalled']:,} of them recalled "
              f"(hit ratio {ratio}), {o['recalls']:,} recall calls", "",
              "workspace                                  calls   kept out tok   files  stale  pending"]
    for w in r["workspaces"]:
        i = w.get("index") or {}
        name = (w["workspace"] or "(none: notes, objects, all sessions)")[-42:]
        lines.append(f"{name:<42} {w['calls']:>6,} {w['kept_out_tokens']:>14,} "
                     f"{_n(i.get('files')):>7} {_n(i.get('stale_files')):>6} "
                     f"{_n(i.get('pending_vectors')):>8}")
    for n in r["indexes"]["notes"]:
        lines.append(f"notes {', '.join(n.get('roots') or [])[-36:]:<36} {'':>6} {'':>14} "
                     f"{_n(n.get('files')):>7} {_n(n.get('stale_files')):>6} "
                     f"{_n(n.get('pending_vectors')):>8}")
    fp = r["footprint"]
    lines += ["", f"on disk: {fp['total_bytes']:,} bytes ("
              + ", ".join(f"{k} {v:,}" for k, v in fp["parts"].items() if v) + ")"]
    b = r.get("baseline")
    if b:
        if b.get("available") and b.get("change") is not None:
            w, wo = b["with_recall"], b["without_recall"]
            lines += ["", f"dsh sessions: with recall {w['avg_input_tokens']:,.0f} input tokens per "
                      f"request ({w['sessions']} sessions, {w['requests']} requests); without "
                      f"{wo['avg_input_tokens']:,.0f} ({wo['sessions']} sessions, "
                      f"{wo['requests']} requests): {b['change']:+.1%}"]
        lines.append(f"dsh sessions: {b['note']}")
    lines += [""] + [f"note: {h}" for h in r["honesty"]]
    if r["log"]["unreadable_lines"]:
        lines.append(f"note: {r['log']['unreadable_lines']} unreadable lines in the usage log "
                     "were skipped")
    return "\n".join(lines)

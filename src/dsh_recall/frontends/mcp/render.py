"""Compact text renderings of tool answers: what a model reads when it ignores structure.

One function per tool, all `dict -> str`, pure. They favour the information a model acts on
(where, which lines, the excerpt, what to call next) over decoration. A search answer that
is not strong starts with one line saying so (services/base.match_note); in an answer that
is otherwise sure, or does not say, a weak hit's head ends `(weak)` (in a weak or none
answer every hit is, and the first line has said it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...services.base import match_note


def match_head(d: dict[str, Any]) -> list[str]:
    """The answer's match line, once at the top, when it is weak or none; else nothing."""
    said = match_note(str(d.get("match") or ""))
    return [f"-- {said}"] if said else []


def weak_mark(d: dict[str, Any], hit: dict[str, Any]) -> str:
    """` (weak)` for a weak hit of an answer whose first line does not already say so."""
    if hit.get("match") == "weak" and d.get("match") not in ("weak", "none"):
        return " (weak)"
    return ""


def _tail(d: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if d.get("truncated"):
        out.append("-- some text was cut to fit the token budget")
    if d.get("next_cursor"):
        out.append(f"-- more results: call again with cursor=\"{d['next_cursor']}\"")
    return out


def code_search(d: dict[str, Any]) -> str:
    lines: list[str] = match_head(d)
    for r in d.get("results", []):
        sym = f" [{', '.join(r.get('symbols', [])[:4])}]" if r.get("symbols") else ""
        stale = " (stale: changed since indexed)" if r.get("stale") else ""
        lines.append(f"== {r['path']}:{r['start_line']}-{r['end_line']}{sym}{stale}"
                     f"{weak_mark(d, r)}")
        lines.append(r.get("excerpt", ""))
    if not d.get("results"):
        lines.append("no results")
    lines.append(f"-- layers: {', '.join(d.get('layers', [])) or 'none'}; "
                 f"pending vectors: {d.get('pending', 0)}; scope: {d.get('scope', '.')}")
    lines += [f"-- note: {n}" for n in d.get("notes", [])]
    return "\n".join(lines + _tail(d))


def _job(j: dict[str, Any]) -> str:
    s = f"index job: {j.get('state')}"
    if j.get("state") == "running" and j.get("total"):
        s += f" ({j.get('phase')} {j.get('done')}/{j.get('total')})"
    if j.get("report"):
        rep = j["report"]
        s += " - " + ", ".join(f"{k} {rep[k]}" for k in
                               ("files", "indexed", "chunks", "embedded", "pending") if k in rep)
    if j.get("error"):
        s += f" - error: {j['error']}"
    return s


def code_index(d: dict[str, Any]) -> str:
    head = "started a new index job" if d.get("started") else "an index job is already known"
    return f"{head}\n{_job(d['job'])}"


def status(d: dict[str, Any]) -> str:
    c = d["code"]
    code = (f"code: {c['files']} files, {c['chunks']} chunks, {c['vectors']} vectors, "
            f"{c['pending']} pending; embedder {c['embedder']}")
    if not c["indexed"] and not c["files"]:
        code = f"code: not indexed yet (code_index, or the first code_search, indexes it); embedder {c['embedder']}"
    lines = [f"workspace: {d['workspace']}", code,
             _job(d["job"]),
             f"token budget per answer: {d['token_budget']}"]
    if d.get("session"):
        lines.append(f"current session: {d['session']}")
    for name, info in sorted(d.get("sources", {}).items()):
        lines.append(f"{name}: {json.dumps(info, ensure_ascii=False, default=str)[:300]}")
    lines.append("tools: " + ", ".join(d.get("tools", [])))
    return "\n".join(lines)


def configure(d: dict[str, Any]) -> str:
    changed = ", ".join(d.get("changed", [])) or "nothing"
    return (f"changed: {changed}\nworkspace: {d['workspace']}\n"
            f"session: {d.get('session') or '(none)'}\ntoken budget: {d['token_budget']}")


def history_search(d: dict[str, Any]) -> str:
    scope = d.get("scope", {})
    lines = match_head(d) + [f"scope: {scope.get('kind')} {scope.get('value') or ''}".rstrip()]
    sessions = d.get("sessions") or {}
    for h in d.get("hits", []):
        title = (sessions.get(h["session"]) or {}).get("title") or ""
        rng = (f"seq {h['start_seq']}" if h["start_seq"] == h["end_seq"]
               else f"seq {h['start_seq']}-{h['end_seq']}")
        head = f"== {h['session']} {rng} {h.get('role', '')}"
        if h.get("tool"):
            head += f" ({h['tool']})"
        if title:
            head += f"  [{title[:60]}]"
        lines.append(head + weak_mark(d, h))
        if h.get("snippet"):
            lines.append(h["snippet"])
    if not d.get("hits"):
        lines.append("no matching events")
    status = d.get("layer_status") or {}
    lines.append("-- layers: " + ", ".join(f"{k} {v}" for k, v in status.items()))
    lines.append("-- exact text: history_detail(session, around=seq)")
    return "\n".join(lines + _tail(d))


def history_detail(d: dict[str, Any]) -> str:
    s = d["session"]
    lines = [f"session {s['id']} ({s.get('source', '')}, {s['events']} events)"
             + (f" \"{s['title']}\"" if s.get("title") else "")]
    for e in d.get("events", []):
        cut = f" [cut; {e['truncated']} chars in all]" if e.get("truncated") else ""
        lines.append(f"-- seq {e['seq']} {e['role']}{cut}")
        lines.append(e.get("text", ""))
    if d.get("pages"):
        lines.append(f"-- page {d.get('page')} of {d['pages']}")
    return "\n".join(lines + _tail(d))


def object_lines(d: dict[str, Any]) -> str:
    """Lines `line`..`end_line` of an object of `line_count` lines, numbered `N| `; a text
    cut short (the budget, the char cap) may end inside a line: the pointer to the rest
    starts again at that line."""
    first, want, total = d["line"], d["end_line"], d["line_count"]
    text = d.get("text", "")
    body = text[:-1] if text.endswith("\n") else text
    rows = body.split("\n") if body else []
    shown = first + len(rows) - 1
    whole = shown if text.endswith("\n") or shown >= want else shown - 1
    out = [f"object {d['id']} lines {first}-{shown} of {total}"]
    out += [f"{first + i}| {row}" for i, row in enumerate(rows)]
    if whole < want:
        out.append(f"-- more: lines=\"{whole + 1}-{want}\"")
    elif want < total:
        out.append(f"-- {total - want} lines after {want}")
    return "\n".join(out)


def object_recall(d: dict[str, Any]) -> str:
    if "line" in d:
        return "\n".join([object_lines(d)] + _tail(d))
    lines = [f"object {d['id']} ({d.get('total', '?')} chars)"]
    if "matches" in d:
        if d.get("failures"):
            lines.append("-- likely failure region, in file order")
        for m in d["matches"]:
            sep = "-" if m.get("context") else ":"  # grep's mark for a context line
            lines.append(f"{m['line']}{sep}{m['offset']}{sep} {m['text']}")
        if not d["matches"]:
            lines.append("no matching lines")
        if d.get("note"):
            lines.append(f"-- note: {d['note']}")
        if d.get("more"):
            lines.append("-- more lines match: limit=20")
    else:
        lines.append(f"-- chars {d.get('start', 0)}..{d.get('start', 0) + len(d.get('text', ''))}")
        lines.append(d.get("text", ""))
        if d.get("next_start") is not None:
            lines.append(f"-- more: start={d['next_start']}")
    return "\n".join(lines + _tail(d))


def notes_search(d: dict[str, Any]) -> str:
    lines: list[str] = match_head(d)
    for r in d.get("results", []):
        head = f" > {r['heading']}" if r.get("heading") else ""
        lines.append(f"== {r['path']}:{r['start_line']}-{r['end_line']}{head} ({r['level']})"
                     f"{weak_mark(d, r)}")
        lines.append(r.get("text", ""))
    if not d.get("results"):
        lines.append("no matching notes")
    lines += [f"-- note: {n}" for n in d.get("notes", [])]
    return "\n".join(lines + _tail(d))


def folded_mark(hit: dict[str, Any]) -> str:
    """` (+N identical)` for a fused hit that N copies of its text were folded into."""
    return f" (+{hit['folded']} identical)" if hit.get("folded") else ""


def search_all(d: dict[str, Any]) -> str:
    lines: list[str] = match_head(d)
    for r in d.get("results", []):
        stale = " (stale: changed since indexed)" if r.get("stale") else ""
        lines.append(f"== [{r['source']}] {r['title']}{stale}{weak_mark(d, r)}{folded_mark(r)}")
        if r.get("excerpt"):
            lines.append(r["excerpt"])
    if not d.get("results"):
        lines.append("no results")
    srcs = d.get("sources") or {}
    lines.append("-- sources: " + "; ".join(f"{k} {v.get('status')} ({v.get('hits', 0)})"
                                             for k, v in srcs.items()))
    lines += [f"-- note: {n}" for n in d.get("notes", [])]
    lines.append("-- more of a hit: read path lines / history_detail(session, around=seq) / "
                 "object_recall(id, query)")
    return "\n".join(lines + _tail(d))


def generic(d: dict[str, Any]) -> str:
    """Fallback: compact JSON (used by tools without a dedicated renderer)."""
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "code_search": code_search,
    "code_index": code_index,
    "status": status,
    "configure": configure,
    "history_search": history_search,
    "history_detail": history_detail,
    "object_recall": object_recall,
    "notes_search": notes_search,
    "search_all": search_all,
}


def render(tool: str, data: dict[str, Any]) -> str:
    """The text rendering of a tool's answer."""
    return RENDERERS.get(tool, generic)(data)

ERROR_CHARS = 500  # an error text's bound: a message may quote what the caller sent


def one_line(e: BaseException) -> str:
    """An error's text on one line (line breaks and control characters become spaces),
    at most ERROR_CHARS."""
    text = "".join(" " if (c < " " or c == "\x7f") else c for c in str(e))
    return " ".join(text.split())[:ERROR_CHARS]

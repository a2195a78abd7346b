"""`dsh-recall why PATH:LINE` and `dsh-recall lineage index | search | status`: code lineage
from the shell. Parse arguments, call the service, format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ...services.lineage import LineageService, parse_target
from .common import emit, get_config, handle_errors, json_option


def _viewer(cfg: Any, channel: str | None) -> Any:
    """--channel, else $DSH_RECALL_CHANNEL; None = the user, unfiltered (as history)."""
    from ...services.access.channel import Viewer, channel_key_from_env

    key = channel or channel_key_from_env()
    return Viewer(cfg, key) if key else None


def human_why(r: dict[str, Any]) -> str:
    """The answer of `why` for a person (also the MCP tool's text)."""
    out = [f"{r['path']}:{r['line']}  {r.get('text', '').strip()[:160]}"]
    c = r.get("commit")
    if r.get("status") == "uncommitted" or not c:
        out.append("not committed yet")
    else:
        where = ""
        if c.get("orig_path") and (c["orig_path"] != r["path"] or c.get("orig_line") != r["line"]):
            where = f"  (then {c['orig_path']}:{c.get('orig_line')})"
        out.append(f"commit {c['short']}  {c.get('date') or ''}  {c.get('author') or ''}{where}")
        out.append("    " + "\n    ".join(c.get("message", "").splitlines()[:12]))
        h = r.get("hunk")
        if h:
            out.append(f"hunk @@ -{h['old_start']},{h['old_lines']} +{h['new_start']},{h['new_lines']} @@")
    for s in r.get("sessions") or []:
        title = f"  «{s['title']}»" if s.get("title") else ""
        out.append(f"session {s['session']} ({', '.join(s.get('match') or [])}){title}")
        for t in s.get("turns") or []:
            text = " ".join(t["text"].split())
            out.append(f"  [{t['seq']}] {t['role']} {t.get('time') or ''}: {text[:300]}")
    out += [f"note: {n}" for n in r.get("notes") or []]
    return "\n".join(out)


@click.command("why")
@click.argument("target", metavar="PATH:LINE")
@click.option("--no-sessions", is_flag=True, help="Only the commit, no agent session look-up.")
@click.option("--channel", default=None,
              help="Answer as this access channel key (default: $DSH_RECALL_CHANNEL; unset: "
                   "you, the user, see every session).")
@json_option
@click.pass_context
@handle_errors
def why(ctx: click.Context, target: str, no_sessions: bool, channel: str | None,
        as_json: bool) -> None:
    """Which commit last changed line LINE of PATH, its message, and the agent session that
    produced the change when history holds one. Offline: reads the local repository."""
    path, line = parse_target(target)
    cwd = Path.cwd()
    cfg = get_config(ctx, workspace=cwd)
    with LineageService(cfg, cwd) as svc:
        r = svc.why(path, line, cwd=cwd, viewer=_viewer(cfg, channel), sessions=not no_sessions)
    emit(r, as_json, human_why)


@click.group("lineage")
def lineage() -> None:
    """The commits of the current repository: index them, search their messages, status."""


@lineage.command("index")
@click.option("--commits", type=click.IntRange(1, 10_000_000), default=None,
              help="Index this many commits back from HEAD (default: lineage.max_commits); "
                   "more reaches older history.")
@json_option
@click.pass_context
@handle_errors
def index_cmd(ctx: click.Context, commits: int | None, as_json: bool) -> None:
    """Index the repository's commits that are not indexed yet, newest first."""
    cwd = Path.cwd()
    with LineageService(get_config(ctx, workspace=cwd), cwd) as svc:
        r = svc.index(commits=commits)
    emit(r, as_json, lambda d: (f"{d['repo']}: {d['added']} commits added, {d['commits']} indexed "
                                f"({d['hunks']} hunks) in {d['elapsed_ms']:.0f} ms"))


def _human_search(r: dict[str, Any]) -> str:
    lines = [f"{c['short']}  {c.get('date') or ''}  {c['summary'][:120]}" for c in r["results"]]
    lines += [f"note: {n}" for n in r.get("notes") or []]
    return "\n".join(lines) or "no commit message matches"


@lineage.command("search")
@click.argument("query")
@click.option("--limit", "-n", type=click.IntRange(1, 200), default=None, help="Number of commits (1-200).")
@json_option
@click.pass_context
@handle_errors
def search_cmd(ctx: click.Context, query: str, limit: int | None, as_json: bool) -> None:
    """Commits of the repository whose messages match QUERY, best first."""
    cwd = Path.cwd()
    with LineageService(get_config(ctx, workspace=cwd), cwd) as svc:
        emit(svc.search(query, limit=limit), as_json, _human_search)


@lineage.command("status")
@json_option
@click.pass_context
@handle_errors
def status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Where the repository's lineage index is and what it holds."""
    cwd = Path.cwd()
    with LineageService(get_config(ctx, workspace=cwd), cwd) as svc:
        emit(svc.status(), as_json, _human_status)


def _human_status(d: dict[str, Any]) -> str:
    if not d.get("repo"):
        return f"no repository here: {d.get('error') or 'not a git work tree'}"
    head = (d.get("head") or "(no commits)")[:12]
    indexed = (d.get("indexed_head") or "")[:12]
    lines = [f"repository  {d['repo']}" + ("  (shallow clone)" if d.get("shallow") else ""),
             f"database    {d['db']}" if d.get("indexed", True) or d.get("commits")
             else f"database    none yet ({d['db']} once indexed)",
             f"commits     {d.get('commits', 0)} indexed ({d.get('hunks', 0)} hunks)",
             f"head        {head}" + (f", indexed up to {indexed}" if indexed and indexed != head
                                      else ", indexed" if indexed else
                                      ", not indexed yet: run `dsh-recall lineage index`")]
    return "\n".join(lines)

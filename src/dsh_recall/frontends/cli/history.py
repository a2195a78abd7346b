"""`dsh-recall history import | search | show`: parse arguments, call the service, format."""

from __future__ import annotations

import click

from ...core.errors import InputError
from ...services import history as svc
from ...services.base import match_note
from .common import emit, get_config, handle_errors, json_option


@click.group("history")
def history() -> None:
    """Past agent sessions (dsh, Claude Code, Codex, generic JSONL): import, search, show."""


def _human_import(r: dict) -> str:
    lines = []
    for f in r["files"]:
        extra = f" ({'; '.join(f['notes'])})" if f.get("notes") else ""
        lines.append(f"{f.get('status', '?'):9} {f['path']}: {f['events']} events, {f['blocks']} blocks, "
                     f"{f['skipped']} lines skipped{extra}")
    ix = r["index"]
    lines.append(f"{ix['sessions']} sessions, {ix['blocks']} blocks indexed, "
                 f"{ix['blocks'] - r.get('pending', 0)} embedded, {r.get('pending', 0)} waiting "
                 f"(semantic: {r['semantic']})")
    lines += r.get("notes") or []
    return "\n".join(lines)


@history.command("import")
@click.argument("paths", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["dsh", "claude-code", "codex", "generic", "cursor", "gemini", "opencode", "aider", "cline", "roo-code", "goose"]), default=None,
              help="Transcript format (default: detect per file).")
@click.option("--embed", is_flag=True, help="Embed every block now (default: as many as fit in --embed-budget).")
@click.option("--embed-budget", "budget", type=click.FloatRange(0, 3600), default=None,
              help="Seconds to spend embedding after the import (default: 10, or embed_budget_s "
                   "when larger); the blocks left wait for `--embed` or a server's background job.")
@click.option("--channel", default=None,
              help="Access channel key that produced these sessions (default: none, the owner's).")
@json_option
@click.pass_context
@handle_errors
def import_cmd(ctx: click.Context, paths: tuple[str, ...], fmt: str | None, embed: bool,
               budget: float | None, channel: str | None, as_json: bool) -> None:
    """Import transcripts; with no PATH, the default locations ($DSH_HOME/sessions,
    ~/.claude/projects, ~/.codex/sessions). Then embeds what fits in the budget and says
    how many blocks still wait for vectors."""
    from ...services.history.importer import import_budget

    cfg = get_config(ctx)
    emit(svc.import_paths(list(paths) or None, fmt, cfg, embed=embed, channel=channel,
                          embed_budget_s=import_budget(cfg) if budget is None else budget),
         as_json, _human_import)


def _viewer(cfg, channel: str | None):
    """The caller's channel: --channel, else $DSH_RECALL_CHANNEL; None = the user, unfiltered."""
    from ...services.access.channel import Viewer, channel_key_from_env

    key = channel or channel_key_from_env()
    return Viewer(cfg, key) if key else None


_CHANNEL_HELP = ("Answer as this access channel key (default: $DSH_RECALL_CHANNEL; unset: "
                 "you, the user, see every session).")


def _human_search(r: dict) -> str:
    notes = list(r.get("notes") or [])
    if not r["hits"]:
        sc = r["scope"]
        return "\n".join([f"no hits in {sc['kind']} {sc['value'] or ''} (layers: "
                          f"{', '.join(r['layers']) or 'none'}); widen with --workspace NAME or --all",
                          *notes])
    out = [note] if (note := match_note(r.get("match", "strong"))) else []
    sessions = r.get("sessions") or {}
    for h in r["hits"]:
        title = (sessions.get(h["session"]) or {}).get("title")
        head = f"{h['session']} [{h['start_seq']}..{h['end_seq']}] {h['role']} {h['time'] or ''}"
        out.append(head + (f"  «{title}»" if title else ""))
        out.append("    " + h["snippet"])
    out.append(f"layers: {', '.join(r['layers'])}")
    return "\n".join(out + notes)


@history.command("search")
@click.argument("query")
@click.option("--session", default=None, help="Search this session (default: $DSH_RECALL_SESSION).")
@click.option("--workspace", default=None, help="Search every session of this workspace (path or name).")
@click.option("--all", "all_sessions", is_flag=True, help="Search every imported session.")
@click.option("--limit", "-n", type=click.IntRange(1, 500), default=None, help="Number of hits (1-500).")
@click.option("--layers", default=None, help="Comma list of literal,fuzzy,semantic (default: all).")
@click.option("--detail", is_flag=True, help="Full ranked hit list, one per event, instead of the coarse answer.")
@click.option("--channel", default=None, help=_CHANNEL_HELP)
@json_option
@click.pass_context
@handle_errors
def search_cmd(ctx: click.Context, query: str, session: str | None, workspace: str | None, all_sessions: bool,
               limit: int | None, layers: str | None, detail: bool, channel: str | None,
               as_json: bool) -> None:
    """Search past sessions. Scope: --session, else $DSH_RECALL_SESSION, else the sessions
    whose workspace is the current directory; --workspace NAME or --all widen it."""
    if sum(x is not None and x is not False for x in (session, workspace, all_sessions or None)) > 1:
        raise click.UsageError("use only one of --session, --workspace, --all")
    cfg = get_config(ctx)
    names = [x.strip() for x in layers.split(",") if x.strip()] if layers else None
    r = svc.search(query, session=session, workspace=workspace, all_sessions=all_sessions, limit=limit,
                   layers=names, detail=detail, cfg=cfg, viewer=_viewer(cfg, channel))
    emit(r, as_json, _human_search)


def _human_show(r: dict) -> str:
    s = r["session"]
    out = [f"{s['id']}  «{s['title'] or ''}»  {s['workspace'] or ''}  {s['events']} events"
           + (f"  page {r['page']}/{r['pages']}" if "page" in r else "")]
    for e in r["events"]:
        flags = f" ({', '.join(e['flags'])})" if e.get("flags") else ""
        out.append(f"--- {e['seq']} {e['role']} {e['time'] or ''}{flags}")
        out.append(e["text"])
    return "\n".join(out)


@history.command("show")
@click.argument("session")
@click.option("--around", type=click.IntRange(0, 2**63 - 1), default=None, help="Center on this seq.")
@click.option("--window", type=click.IntRange(0, 200), default=3, help="Events either side of --around.")
@click.option("--page", type=click.IntRange(1, None), default=None, help="Browse page K (20 events a page).")
@click.option("--channel", default=None, help=_CHANNEL_HELP)
@json_option
@click.pass_context
@handle_errors
def show_cmd(ctx: click.Context, session: str, around: int | None, window: int, page: int | None,
             channel: str | None, as_json: bool) -> None:
    """Exact original text of a session's events."""
    r = svc.show(session, around=around, window=window, page=page,
                 viewer=_viewer(get_config(ctx), channel))
    if page is not None and around is None and page > r.get("pages", page):
        raise InputError(f"session {session} has {r['pages']} page{'s' if r['pages'] != 1 else ''} "
                         f"of 20 events; --page {page} is past the end")
    emit(r, as_json, _human_show)

"""`dsh-recall notes save | supersede | forget`: writable memory from the command line
(services/notes/write.py; mounted on the `notes` group by cli/notes.py).

The person at the terminal is the user: without a channel (`--session`, else
`$DSH_RECALL_CHANNEL`) any level may be chosen; with one, the caps of that channel apply,
as they do for the MCP tools.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ...services.access.channel import Viewer, channel_key_from_env
from .common import emit, get_config, handle_errors, json_option

LEVELS = click.Choice(["public", "personal"])
SESSION_HELP = "Channel key the write is made for (default: $DSH_RECALL_CHANNEL; none: you)."


def _writer(ctx: click.Context, session: str | None, roots: tuple[str, ...] = ()) -> Any:
    from ...services.notes.write import NotesWriter

    ws = Path(os.getcwd()).resolve()
    cfg = get_config(ctx, ws)
    key = session or channel_key_from_env()
    viewer = Viewer(cfg, key) if key else Viewer.user()
    return NotesWriter(cfg, viewer, user=key is None, workspace=ws, roots=list(roots) or None)


def _text(words: tuple[str, ...]) -> str:
    """The note's text: the arguments, or stdin for `-`."""
    if words == ("-",):
        return sys.stdin.read(4 << 20)
    return " ".join(words)


def _render(d: dict[str, Any]) -> str:
    lines = [f"{d['action']} {d['id']} ({d['level']}): {d['source_path']}"]
    if d.get("supersedes"):
        lines.append(f"supersedes {d['supersedes']}")
    if not d.get("indexed"):
        lines.append("not indexed yet")
    return "\n".join(lines + [f"note: {n}" for n in d["notes"]])


@click.command("save")
@click.argument("text", nargs=-1, required=True)
@click.option("--level", type=LEVELS, default=None, help="Access level (default: the write root's).")
@click.option("--to", "target", type=click.Path(), default=None,
              help="Which write root (notes.write_roots; default: the first).")
@click.option("--source", default=None, help="The session the note comes from (default: $DSH_RECALL_SESSION).")
@click.option("--session", default=None, help=SESSION_HELP)
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Index of these roots.")
@json_option
@click.pass_context
@handle_errors
def save_cmd(ctx: click.Context, text: tuple[str, ...], level: str | None, target: str | None,
             source: str | None, session: str | None, roots: tuple[str, ...], as_json: bool) -> None:
    """Save TEXT (or `-`: stdin) as a dated entry in a write root; the same text merges."""
    with _writer(ctx, session, roots) as w:
        data = w.save(_text(text), level=level, root=target,
                      source=source or os.environ.get("DSH_RECALL_SESSION"))
    emit(data, as_json, _render)


@click.command("supersede")
@click.argument("entry")
@click.argument("text", nargs=-1, required=True)
@click.option("--level", type=LEVELS, default=None, help="Access level of the successor.")
@click.option("--source", default=None, help="The session the note comes from (default: $DSH_RECALL_SESSION).")
@click.option("--session", default=None, help=SESSION_HELP)
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Index of these roots.")
@json_option
@click.pass_context
@handle_errors
def supersede_cmd(ctx: click.Context, entry: str, text: tuple[str, ...], level: str | None,
                  source: str | None, session: str | None, roots: tuple[str, ...],
                  as_json: bool) -> None:
    """Replace entry ENTRY (id or path) by TEXT; the old one is kept, marked, ranked below."""
    with _writer(ctx, session, roots) as w:
        data = w.supersede(entry, _text(text), level=level,
                           source=source or os.environ.get("DSH_RECALL_SESSION"))
    emit(data, as_json, _render)


@click.command("forget")
@click.argument("entry")
@click.option("--keep-file", is_flag=True, help="Keep the file, marked forgotten (never indexed).")
@click.option("--session", default=None, help=SESSION_HELP)
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Index of these roots.")
@json_option
@click.pass_context
@handle_errors
def forget_cmd(ctx: click.Context, entry: str, keep_file: bool, session: str | None,
               roots: tuple[str, ...], as_json: bool) -> None:
    """Forget entry ENTRY: out of every index; its file deleted (or kept, marked)."""
    with _writer(ctx, session, roots) as w:
        data = w.forget(entry, keep_file=keep_file)
    emit(data, as_json, _render)

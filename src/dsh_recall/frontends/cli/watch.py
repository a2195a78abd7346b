"""`dsh-recall watch`: keep code and notes indexes fresh as files change."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from .common import get_config, handle_errors


def _line(e: dict[str, Any]) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(e["time"]))
    head = f"{when} {e['kind']} {e['target']} ({e['reason']})"
    if e.get("error"):
        return f"{head}: not updated: {e['error']}"
    return (f"{head}: {e['indexed']} re-indexed, {e['deleted']} deleted, {e['unchanged']} "
            f"unchanged, {e['embedded']} embedded, {e['pending']} pending, {e['seconds']} s")


@click.command()
@click.argument("directories", nargs=-1, type=click.Path(file_okay=False, exists=True))
@click.option("--no-notes", is_flag=True, help="Do not watch the notes roots.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per update on stdout.")
@click.pass_context
@handle_errors
def watch(ctx: click.Context, directories: tuple[str, ...], no_notes: bool, as_json: bool) -> None:
    """Watch workspaces (default: the one around the cwd) and the notes roots; re-index what
    changes (unchanged files are never re-read) until Ctrl-C."""
    from ...services.code import find_workspace
    from ...services.indexing import watch as watch_mod

    spaces = [Path(d).resolve() for d in directories] or [find_workspace(Path(os.getcwd()))]
    cfg = get_config(ctx, spaces[0])

    def show(e: dict[str, Any]) -> None:
        from ...core.clean import for_terminal

        click.echo(json.dumps(e, ensure_ascii=False) if as_json else for_terminal(_line(e)))

    watcher = watch_mod.build(cfg, spaces, notes=not no_notes, on_event=show)
    names = ", ".join(f"{t.kind} {t.name}" for t in watcher.targets)
    try:
        watcher.run(ready=lambda: click.echo(f"watching {names} (Ctrl-C stops)", err=True))
    finally:
        watcher.close()

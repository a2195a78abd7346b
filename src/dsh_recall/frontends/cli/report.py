"""`dsh-recall report`: calls, chars and tokens kept out, recall hit ratio, index freshness,
disk footprint, and dsh sessions with recall against those without."""

from __future__ import annotations

from pathlib import Path

import click

from .common import emit, handle_errors, json_option


@click.command()
@click.option("--days", type=click.IntRange(1, 3650), default=30, show_default=True,
              help="The last N local days of the usage log.")
@click.option("--all", "whole", is_flag=True, help="The whole usage log.")
@click.option("--tokens", type=click.Choice(["auto", "chars/4"]), default="auto",
              show_default=True,
              help="auto: count with the shipped tokenizer (chars per token measured on your "
                   "own indexed text); chars/4: one token per four characters.")
@click.option("--sessions", "sessions_dir", type=click.Path(file_okay=False), default=None,
              help="dsh session logs for the before / after comparison (default: "
                   "$DSH_HOME/sessions).")
@click.option("--no-baseline", is_flag=True, help="Skip the dsh sessions comparison.")
@json_option
@handle_errors
def report(days: int, whole: bool, tokens: str, sessions_dir: str | None, no_baseline: bool,
           as_json: bool) -> None:
    """What recall kept out of your conversations, per day and per workspace."""
    from ...services.report import summary as report_mod

    data = report_mod.build(days=None if whole else days, tokens=tokens,
                            sessions_dir=Path(sessions_dir) if sessions_dir else None,
                            baseline=not no_baseline)
    emit(data, as_json, report_mod.render_text)

"""`dsh-recall eval CASES`: Hit@k, MRR and nDCG@10 of your own cases, for any source."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .common import emit, get_config, handle_errors, json_option


@click.command("eval")
@click.argument("cases", type=click.Path(dir_okay=False))
@click.option("--source", type=click.Choice(["code", "history", "notes", "objects"]),
              default=None, help="The source of cases that do not name one (default: read "
                                 "from each case's keys).")
@click.option("--workspace", "ws", type=click.Path(file_okay=False),
              help="Workspace for code cases (default: the one around the cwd).")
@json_option
@click.pass_context
@handle_errors
def eval_cmd(ctx: click.Context, cases: str, source: str | None, ws: str | None,
             as_json: bool) -> None:
    """Score recall on a cases file (JSON list or JSON lines): each case a query and what a
    good answer holds (code: paths; history: session + seqs; notes: files; objects: object
    + lines). Prints Hit@1/3/5/10, MRR and nDCG@10 per source."""
    from ...services import evaluate
    from ...services.code import find_workspace

    items = evaluate.load_cases(cases, source)  # refused before anything is opened
    workspace = Path(ws).resolve() if ws else find_workspace(Path(os.getcwd()))
    data = evaluate.evaluate(items, get_config(ctx, workspace), workspace)
    emit(data, as_json, evaluate.render_text)

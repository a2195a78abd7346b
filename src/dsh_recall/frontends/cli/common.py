"""Shared CLI conventions: config loading, JSON vs human output, one-line errors."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ...core.config import Config, load_config
from ...core.errors import RecallError


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(f)


_SHOWN: set[str] = set()


def show_notices(cfg: Config) -> None:
    """Print each config notice (a refused repository key) once per process, on stderr."""
    for n in cfg.notices:
        if n not in _SHOWN:
            _SHOWN.add(n)
            click.echo(f"dsh-recall: {n}", err=True)


def get_config(ctx: click.Context, workspace: Path | None = None, **overrides: Any) -> Config:
    """Effective config for this invocation (file, env, then --config and flags)."""
    root = ctx.find_root()
    cfg_file = root.params.get("config_file") if root.params else None
    cfg = load_config(workspace=workspace, config_file=cfg_file, overrides=overrides or None)
    show_notices(cfg)
    return cfg


def emit(data: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    """Print `data` as JSON (only with --json) or through its human renderer, which every
    command has; always valid UTF-8."""
    from ...core.clean import clean_text, for_terminal

    if as_json:
        out = json.dumps(data, ensure_ascii=False)
    else:
        out = for_terminal(human(data))  # excerpts of files and logs: no terminal controls
    click.echo(clean_text(out))


def one_line_error(e: BaseException) -> str:
    """What the user sees for an exception: one line saying what happened."""
    if isinstance(e, RecallError):
        return f"dsh-recall: {e}"
    if isinstance(e, OSError):
        where = f" {e.filename}" if getattr(e, "filename", None) else ""
        home = ""
        try:
            from ...core.paths import recall_home

            if e.filename and str(e.filename).startswith(str(recall_home())):
                home = " (the recall home: set DSH_RECALL_HOME to a writable folder)"
        except Exception:  # noqa: BLE001 - the message matters more than the hint
            pass
        return f"dsh-recall: cannot use{where}: {e.strerror or e}{home}"
    if isinstance(e, MemoryError):
        return "dsh-recall: out of memory"
    return (f"dsh-recall: internal error: {type(e).__name__}: {e} "
            "(set DSH_RECALL_DEBUG=1 for the traceback)")


def handle_errors(f: Callable) -> Callable:
    """Turn any failure into a one-line message on stderr and exit code 1 (never a traceback,
    unless DSH_RECALL_DEBUG is set)."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit,
                KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - one line for the user
            if os.environ.get("DSH_RECALL_DEBUG") and not isinstance(e, RecallError):
                raise
            click.echo(one_line_error(e), err=True)
            sys.exit(1)

    return wrapper

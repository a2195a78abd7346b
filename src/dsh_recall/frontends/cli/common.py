"""Shared CLI conventions: config loading, JSON vs human output, one-line errors."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable

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


def emit(data: Any, as_json: bool, human: Callable[[Any], str] | None = None) -> None:
    """Print `data` as JSON or through its human renderer."""
    if as_json or human is None:
        click.echo(json.dumps(data, ensure_ascii=False, indent=None if as_json else 2))
    else:
        click.echo(human(data))


def handle_errors(f: Callable) -> Callable:
    """Turn a RecallError into a one-line message on stderr and exit code 1."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except RecallError as e:
            click.echo(f"dsh-recall: {e}", err=True)
            sys.exit(1)

    return wrapper

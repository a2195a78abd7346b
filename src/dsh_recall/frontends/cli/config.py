"""`dsh-recall config show`: the effective configuration after files, env and flags."""

from __future__ import annotations

import os
from pathlib import Path

import click

from .common import emit, get_config, handle_errors, json_option


@click.group("config")
def config_group() -> None:
    """Inspect the effective configuration."""


@config_group.command("show")
@click.option("--workspace", "ws", type=click.Path(file_okay=False, exists=True), help="Workspace root (default: cwd).")
@json_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, ws: str | None, as_json: bool) -> None:
    """Print every setting with its effective value (unknown keys fail here too)."""
    cfg = get_config(ctx, Path(ws or os.getcwd()).resolve())
    data = cfg.model_dump()
    if data.get("store"):
        # A URL may carry a password; the effective settings never show it.
        import re

        data["store"] = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", data["store"])
    if data.get("mcp", {}).get("token"):
        data["mcp"]["token"] = "***"

    def human(d: dict) -> str:
        lines = []
        for k, v in d.items():
            if isinstance(v, dict):
                lines.append(f"[{k}]")
                lines += [f"  {kk} = {vv!r}" for kk, vv in v.items()]
            else:
                lines.append(f"{k} = {v!r}")
        return "\n".join(lines)

    emit(data, as_json, human)

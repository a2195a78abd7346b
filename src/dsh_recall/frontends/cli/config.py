"""`dsh-recall config show`: the effective configuration after files, env and flags, as the
TOML a config file holds (`--config FILE` loads it back to the same settings)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import click

from .common import emit, get_config, handle_errors, json_option


@click.group("config")
def config_group() -> None:
    """Inspect the effective configuration."""


def shown(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The settings with secrets masked, and the comment lines that say what was masked."""
    said: list[str] = []
    if data.get("store"):
        # A URL may carry a password; the effective settings never show it.
        masked = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", data["store"])
        if masked != data["store"]:
            said.append(f"store = {masked!r} (its password not shown: set store yourself)")
            data = {k: v for k, v in data.items() if k != "store"}
    if data.get("mcp", {}).get("token"):
        said.append("mcp.token is set (not shown: set it yourself)")
        data = {**data, "mcp": {k: v for k, v in data["mcp"].items() if k != "token"}}
    return data, said


def as_toml(data: dict[str, Any], said: list[str]) -> str:
    """TOML of `data` with a header comment; TOML has no null, so an unset setting (None,
    the default of every optional one) is left out and named in the comment."""
    import tomli_w

    unset: list[str] = []

    def drop_none(d: dict[str, Any], where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            if v is None:
                unset.append(where + k)
            elif isinstance(v, dict):
                out[k] = drop_none(v, f"{where}{k}.")
            else:
                out[k] = v
        return out

    body = tomli_w.dumps(drop_none(data, ""))
    head = ["# dsh-recall: the effective settings (`--config FILE` loads this file as it is)"]
    head += [f"# {s}" for s in said]
    if unset:
        head.append("# unset: " + ", ".join(unset))
    return "\n".join(head) + "\n\n" + body.rstrip("\n")


@config_group.command("show")
@click.option("--workspace", "ws", type=click.Path(file_okay=False, exists=True), help="Workspace root (default: cwd).")
@json_option
@click.pass_context
@handle_errors
def show(ctx: click.Context, ws: str | None, as_json: bool) -> None:
    """Print every setting with its effective value as TOML, which `--config FILE` accepts
    (unknown keys fail here too). Secrets (a store URL's password, mcp.token) are left out."""
    cfg = get_config(ctx, Path(ws or os.getcwd()).resolve())
    data, said = shown(cfg.model_dump())
    emit(data, as_json, lambda d: as_toml(d, said))

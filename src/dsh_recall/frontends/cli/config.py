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


MASK = "***"


def masked(data: dict[str, Any]) -> dict[str, Any]:
    """The settings with their secrets masked: a store URL's password, mcp.token."""
    if data.get("store"):
        data = {**data, "store": re.sub(r"(://[^:/@]*):[^@/]*@", rf"\1:{MASK}@", data["store"])}
    if data.get("mcp", {}).get("token"):
        data = {**data, "mcp": {**data["mcp"], "token": MASK}}
    return data


def as_toml(data: dict[str, Any]) -> str:
    """TOML of the masked settings `data` with a header comment. A masked secret is left out
    (the store URL without its password, which libpq then takes from ~/.pgpass or
    PGPASSWORD), and so is an unset setting (TOML has no null; None is the default of every
    optional one): the header names both."""
    import tomli_w

    said: list[str] = []
    if f":{MASK}@" in (data.get("store") or ""):
        data = {**data, "store": data["store"].replace(f":{MASK}@", "@")}
        said.append("store: its password is not shown (write it in, or keep it in ~/.pgpass)")
    if data.get("mcp", {}).get("token") == MASK:
        data = {**data, "mcp": {k: v for k, v in data["mcp"].items() if k != "token"}}
        said.append("mcp.token is set (not shown: write it in to keep it)")
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
    (unknown keys fail here too). Secrets (a store URL's password, mcp.token) are not shown."""
    cfg = get_config(ctx, Path(ws or os.getcwd()).resolve())
    emit(masked(cfg.model_dump()), as_json, as_toml)

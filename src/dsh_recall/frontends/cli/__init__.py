"""The `dsh-recall` command. Each source registers its own group from its own module."""

from __future__ import annotations

import importlib
import sys

import click

from ...core.errors import RecallError

# (module under this package, attribute): a click command or group to mount.
_COMMANDS = [
    ("code", "search"),
    ("code", "index"),
    ("code", "status"),
    ("history", "history"),
    ("objects", "object_group"),
    ("notes", "notes"),
    ("hooks", "hook"),
    ("mcp", "mcp"),
    ("integrate", "integrate"),
    ("proxy", "proxy"),
    ("config", "config_group"),
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="A TOML config file (overrides the recall home's and the workspace's).")
@click.version_option(package_name="dsh-recall")
def cli(config_file: str | None) -> None:
    """dsh-recall: bring back exactly the slice of context an agent needs, offline."""


def _mount() -> None:
    for module, attr in _COMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{module}":
                continue  # that front end is not part of this build
            raise
        cli.add_command(getattr(mod, attr))


_mount()


def main() -> None:
    try:
        cli(standalone_mode=True)
    except RecallError as e:  # pragma: no cover - commands handle their own
        click.echo(f"dsh-recall: {e}", err=True)
        sys.exit(1)

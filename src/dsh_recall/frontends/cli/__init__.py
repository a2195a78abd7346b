"""The `dsh-recall` command. Each source registers its own group from its own module.

Commands are imported only when invoked, so a hook that runs on every tool call does not
pay for loading the code index, numpy or the embedder.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

# command name -> (module under this package, attribute): a click command or group.
_COMMANDS = {
    "search": ("code", "search"),
    "index": ("code", "index"),
    "status": ("code", "status"),
    "history": ("history", "history"),
    "object": ("objects", "object_group"),
    "notes": ("notes", "notes"),
    "hook": ("hooks", "hook"),
    "mcp": ("mcp", "mcp"),
    "integrate": ("integrate", "integrate"),
    "proxy": ("proxy", "proxy"),
    "config": ("config", "config_group"),
    "trust": ("trust", "trust"),
    "worker": ("worker", "worker"),
    "report": ("report", "report"),
    "serve": ("serve", "serve"),
    "watch": ("watch", "watch"),
    "eval": ("eval", "eval_cmd"),
    "store": ("store", "store_group"),
    "daemon": ("daemon", "daemon"),
    "why": ("lineage", "why"),
    "lineage": ("lineage", "lineage"),
}


class LazyGroup(click.Group):
    """A group whose subcommands load on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="A TOML config file (overrides the recall home's and the workspace's).")
@click.version_option(package_name="dsh-recall")
def cli(config_file: str | None) -> None:
    """dsh-recall: bring back exactly the slice of context an agent needs, offline."""


def main() -> None:
    from ...core.clean import QUERY_CHARS, cap_query, clean_text
    from .common import one_line_error

    # argv holds invalid UTF-8 as lone surrogates (surrogateescape): clean it at the door.
    # Each argument is also capped like any query (no path or flag comes near the cap).
    args = [cap_query(clean_text(a), QUERY_CHARS) for a in sys.argv[1:]]
    command = set_via(args)
    try:
        cli(args=args, prog_name="dsh-recall", standalone_mode=True)
    except SystemExit as e:
        _warm_next(args)
        _leave_workers(e.code, command in _DONE_AT_ANSWER)
        raise
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - commands handle their own; this is the last net
        if os.environ.get("DSH_RECALL_DEBUG"):
            raise
        click.echo(one_line_error(e), err=True)
        sys.exit(1)


# The front end a command's usage records name (services/report/usage.py): inside a conversation
# (an MCP client, a harness hook, the dsh plugin's worker) or outside one ("cli", "web").
_VIA = {"mcp": "mcp", "proxy": "mcp", "hook": "hook", "worker": "dsh", "serve": "web"}

# Commands whose work is committed once they answer: nothing is left to finalize, and
# finalizing (numpy, SQLite, the modules) cost a cold search about 25 ms of its ~280.
_DONE_AT_ANSWER = frozenset({"search"})


def set_via(args: list[str]) -> str | None:
    """Name the front end this call's usage records carry (also per call in the daemon);
    returns the command argv names."""
    from ...services.report import usage

    command = _command(args)
    usage.set_via(_VIA.get(command or "", "cli"))
    return command


def _warm_next(args: list[str]) -> None:
    """This call answered alone: with its answer out, start a daemon in the background for
    the next one, if it is a call a daemon answers (frontends/warm.py)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    from ..warm import start_after

    start_after(args)


def _command(args: list[str]) -> str | None:
    """The subcommand named in argv (after the group's own options)."""
    from ..argv import command_words  # loaded already: the entry point asked it first

    words = command_words(args, 1)
    return words[0] if words else None


def _leave_workers(code: object, done: bool = False) -> None:
    """The answer is out; if the command is `done` at its answer, or a dropped worker is
    still running, leave without finalizing (committed SQLite writes are durable; an open
    one rolls back on the next open; the usage log is written unbuffered).

    The worker is the vector ranking of a search whose deadline passed, possibly still
    inside onnxruntime: letting the interpreter finalize under it made onnxruntime abort
    the process (SIGABRT, exit 134) after the answer was printed."""
    import threading

    service = sys.modules.get("dsh_recall.services.hybrid")
    if not done:
        if service is None:  # no search ran: no such thread
            return
        if not any(t.is_alive() and t.daemon and t.name == service.VECTOR_THREAD
                   for t in threading.enumerate()):
            return
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


"""The `dsh-recall` executable: a search, an object read or a hook goes to a running
`dsh-recall daemon` when there is one (frontends/warm.py), before click or anything heavy is
imported; everything else, and a call the daemon declines, runs the CLI here (which then
starts a daemon for the next call: cli.main)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from .warm import forward

    code = forward(sys.argv[1:])
    if code is not None:
        os._exit(code)  # forward flushed the answer; nothing here needs finalizing
    from .cli import main as cli_main

    cli_main()

"""The `dsh-recall` executable: a search goes to a running `dsh-recall daemon` when there is
one (frontends/daemon.py), before click or anything heavy is imported; everything else, and a
search the daemon declines, runs the CLI here."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from .daemon import forward

    code = forward(sys.argv[1:])
    if code is not None:
        os._exit(code)  # forward flushed the answer; nothing here needs finalizing
    from .cli import main as cli_main

    cli_main()

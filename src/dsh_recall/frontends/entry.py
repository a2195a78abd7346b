"""The `dsh-recall` executable: a search, an object read or a hook goes to a running
`dsh-recall daemon` when there is one (frontends/warm.py), before click or anything heavy is
imported; everything else, and a call the daemon declines, runs the CLI here (which then
starts a daemon for the next call: cli.main)."""

from __future__ import annotations

import os
import sys


def one_blas_thread() -> None:
    """numpy's OpenBLAS starts a thread per core when numpy is imported: about 70 ms of CPU
    in a cold call on 2 cores, more than the call's own search. Our products are single
    vectors against a matrix (memory-bound) and our scans split their own work over
    threads, so a pool buys nothing here. A value the user set wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    one_blas_thread()
    from .warm import forward

    code = forward(sys.argv[1:])
    if code is not None:
        os._exit(code)  # forward flushed the answer; nothing here needs finalizing
    from .cli import main as cli_main

    cli_main()

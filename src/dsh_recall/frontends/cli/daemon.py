"""`dsh-recall daemon`: keep the CLI warm (frontends/daemon.py)."""

from __future__ import annotations

import click

from .common import handle_errors


@click.command()
@click.option("--idle-minutes", type=click.FloatRange(0.01, 24 * 60), default=30.0, show_default=True,
              help="Exit after this long without a request.")
# The socket's lock, already held, from the call that started this daemon (frontends/warm.py).
@click.option("--lock-fd", type=int, default=None, hidden=True)
@handle_errors
def daemon(idle_minutes: float, lock_fd: int | None) -> None:
    """Answer the CLI's searches (`search`, `history search`, `notes search`), object reads
    (`object get`, `object search`) and Claude Code hooks from one warm process (same
    answers, a fraction of the start-up) until idle; runs in the foreground, stop it with
    Ctrl-C. A call that finds none running starts one in the background (docs/daemon.md)."""
    import signal
    import sys

    from ..daemon import Daemon

    real = sys.stderr  # searches swap sys.stderr while they run; the log goes here

    def log(msg: str) -> None:
        real.write(f"dsh-recall daemon: {msg}\n")
        real.flush()

    d = Daemon(idle_minutes * 60, log=log, lock_fd=lock_fd)
    # A service manager or `kill` stops it with SIGTERM, a person with Ctrl-C: either way it
    # leaves with the socket removed. The handlers only set a flag the accept loop reads
    # (Daemon.stop). A daemon started in the background by a script may ignore SIGINT: that
    # stays so.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: d.stop("terminated"))
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, lambda _sig, _frame: d.stop("interrupted"))
    d.claim()  # a second daemon is refused before it loads anything
    try:
        d.warm_up()
    except KeyboardInterrupt:
        d.stop("interrupted")
    sock = d.bind()
    click.echo(f"dsh-recall daemon: listening on {d.path}", err=True)
    try:
        why = d.serve(sock)
    except KeyboardInterrupt:
        why = "interrupted"
    click.echo(f"dsh-recall daemon: stopped ({why}) after {d.served} calls", err=True)

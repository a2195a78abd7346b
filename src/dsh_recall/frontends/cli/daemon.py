"""`dsh-recall daemon`: keep the CLI warm (frontends/daemon.py)."""

from __future__ import annotations

import click

from .common import handle_errors


@click.command()
@click.option("--idle-minutes", type=click.FloatRange(0.01, 24 * 60), default=30.0, show_default=True,
              help="Exit after this long without a request.")
@click.option("--stop", is_flag=True, help="Stop the daemon that runs (started by hand or by a call) and exit.")
# The socket's lock, already held, from the call that started this daemon (frontends/warm.py).
@click.option("--lock-fd", type=int, default=None, hidden=True)
@handle_errors
def daemon(idle_minutes: float, stop: bool, lock_fd: int | None) -> None:
    """Answer the CLI's searches (`search`, `history search`, `notes search`), object reads
    (`object get`, `object search`) and Claude Code hooks from one warm process (same
    answers, a fraction of the start-up) until idle; runs in the foreground, stop it with
    Ctrl-C. A call that finds none running starts one in the background (docs/daemon.md)."""
    import signal
    import sys

    from ..daemon import Daemon

    if stop:
        pid = stop_running()
        click.echo("dsh-recall daemon: none running" if pid is None
                   else f"dsh-recall daemon: stopped pid {pid}", err=True)
        return

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


def _is_daemon(pid: int) -> bool:
    """Whether pid is this user's `dsh-recall daemon` (where /proc tells; else the pid the
    lock file in the user's own 0700 folder names is trusted)."""
    import os

    if not os.path.isdir("/proc/self"):
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
        return os.stat(f"/proc/{pid}").st_uid == os.getuid() and b"daemon" in cmd and any(
            b"dsh_recall" in part or b"dsh-recall" in part for part in cmd)
    except OSError:
        return False


def _gone(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return not f.read()  # a zombie: exited, not yet reaped
    except OSError:
        return True


def stop_running(timeout_s: float = 15.0) -> int | None:
    """Stop the daemon holding this socket's lock with SIGTERM (it removes its socket) and
    wait for it to let go of the lock; its pid, or None when none runs."""
    import fcntl
    import os
    import signal
    import time

    from ..warm import socket_file

    try:
        fd = os.open(socket_file() + ".lock", os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None  # nobody holds it
        except OSError:
            pass
        word = os.pread(fd, 32, 0).split()
        pid = int(word[0]) if word and word[0].isdigit() else 0
        if pid <= 0 or not _is_daemon(pid):
            raise click.ClickException("a daemon holds the socket's lock but its pid is unknown "
                                       "(a daemon of an older version): stop it with kill")
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                while not _gone(pid) and time.monotonic() < end:  # its last line, its exit
                    time.sleep(0.02)
                return pid
            except OSError:
                if time.monotonic() > end:
                    raise click.ClickException(f"pid {pid} did not stop within {timeout_s:.0f} s") from None
                time.sleep(0.05)
    finally:
        os.close(fd)

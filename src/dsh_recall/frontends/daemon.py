"""The warm CLI server (`dsh-recall daemon`); its client is frontends/warm.py.

A cold `dsh-recall search` spends most of its time before the search: starting Python,
importing click, numpy and the services, opening the index. While a daemon runs (started
by hand, or in the background by the first call that found none: warm.py), a search, an
object read or a Claude Code hook is handed to that process instead, over a Unix socket in
the recall home, and answered from already-loaded modules: the CLI prints exactly what it
would have printed itself and exits with the same code. Without a daemon, or when it
cannot serve this caller exactly as a local run would, the CLI runs the call itself.

What keeps it exact and private:
- Only FORWARDED calls are handed over. The daemon runs each through the same click
  command, in the caller's working directory (a hook with the caller's payload as its
  stdin), one request at a time.
- The caller's environment must match the daemon's where it can change an answer (every
  DSH_* variable, HOME, any credential-like variable an http embedder may read) and both must run the same interpreter and package folder; else the
  daemon declines and the CLI runs locally. The daemon also declines, and exits, once the
  package's files change under it (an upgrade or an edit).
- The socket lives in `<recall home>/run/` (mode 0700), is itself 0600, and the daemon
  answers only connections from its own user id (SO_PEERCRED where the OS has it) whose
  process is confined as the daemon is (`same_confinement`: a sandboxed caller runs alone).
- A call in the daemon's hands hears a heartbeat; a silent daemon (stopped, wedged) makes
  its client run the search itself after SILENCE_S.
- A connection without its request line after admission.DEADLINE_S is hung up on, and few
  wait per process and in all: idle ones cannot use up its file descriptors (admission.py).
- It exits after `idle_s` without a request.

This module imports nothing heavy: the client runs it before click is loaded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

from .admission import Pending, hang_up
from .warm import (  # noqa: F401 - the protocol's names, read here by tests and tools too
    CONNECT_TIMEOUT_S,
    FORWARDED,
    HEARTBEAT_S,
    HOOK_STDIN_MAX,
    PROTOCOL,
    SILENCE_S,
    command_of,
    env_key,
    recv_line,
    socket_path,
)

MAX_REQUEST = HOOK_STDIN_MAX * 4 // 3 + (1 << 20)  # a hook's payload, base64, and argv
ANSWER_TIMEOUT_S = 120.0  # the daemon's own cap on writing an answer to a slow reader
BUSY_WAIT_S = 1.0  # a call waits this long for its turn, then its CLI answers alone
_PACKAGE = Path(__file__).resolve().parents[1]


def code_stamp() -> str:
    """The package's source files as they are now (names, sizes, mtimes): an edit or an
    upgrade under a running daemon changes it."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".json", ".mjs")):
                try:
                    st = os.stat(os.path.join(root, f))
                except OSError:
                    continue
                h.update(f"{root}/{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# -- server ----------------------------------------------------------------------------

class _Recorded(io.StringIO):
    """One of a call's output streams (1 stdout, 2 stderr): its writes also go, in order,
    onto the tape both streams share, so the client replays them interleaved as written."""

    def __init__(self, fd: int, tape: list[list]):
        super().__init__()
        self.fd, self.tape = fd, tape

    def write(self, text: str) -> int:
        if text:
            if self.tape and self.tape[-1][0] == self.fd:
                self.tape[-1][1] += text
            else:
                self.tape.append([self.fd, text])
        return super().write(text)


def _status_fields(pid: str) -> dict[str, str]:
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
        return {k: v.strip() for k, _, v in (ln.partition(":") for ln in f)
                if k in ("NoNewPrivs", "Seccomp")}


def same_confinement(pid: int) -> bool:
    """Whether the peer process sees the files this daemon sees and runs under no sandbox
    the daemon is not under: the same mount namespace and root, the same seccomp mode and
    no_new_privs flag. A sandboxed agent (bwrap, a mount namespace, seccomp) reaching the
    socket must not read through the daemon what its sandbox hides. Where /proc does not
    exist there is nothing to compare (True); a peer it cannot read is refused."""
    if not os.path.isdir("/proc/self"):
        return True
    try:
        if os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
            return False
        theirs, ours = os.stat(f"/proc/{pid}/root"), os.stat("/proc/self/root")
        if (theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino):
            return False
        return _status_fields(str(pid)) == _status_fields("self")
    except OSError:
        return False


class Daemon:
    """Serves forwarded CLI calls, one at a time, until idle or stopped."""

    def __init__(self, idle_s: float, log=None, lock_fd: int | None = None):
        self.idle_s = idle_s
        self._given_lock = lock_fd  # the socket's lock, taken by the call that started us
        self.path = socket_path()
        self.env = env_key()
        self.stamp = code_stamp()
        self.log = log or (lambda msg: None)
        self.served = 0
        self._turn = threading.Lock()  # one search at a time: they share cwd and stdout
        self._stop: str | None = None
        self._lock_fd: int | None = None  # bind(): held for the daemon's life
        # Calls whose request line is not in yet: a deadline, a bound per process and in all.
        self.pending = Pending()

    def stop(self, why: str) -> None:
        """Ask serve() to return `why` within half a second; safe from a signal handler
        (it only sets a flag: an exception raised there can land in an import's lock
        callback, where Python swallows it, and the daemon would never stop)."""
        self._stop = why

    def claim(self) -> None:
        """Take the socket's lock (or keep the one the starting call passed down) for the
        daemon's life: two daemons starting at once cannot both take the path (each could
        remove the other's socket), and only the holder removes it."""
        if self._lock_fd is not None:
            return
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        st = folder.stat()
        if st.st_uid != os.getuid():
            raise OSError(f"{folder} belongs to another user")
        os.chmod(folder, 0o700)
        if len(str(self.path).encode()) >= 104:
            raise OSError(f"socket path too long for this OS: {self.path} (set DSH_RECALL_HOME "
                          "to a shorter folder)")
        import fcntl

        fd = self._inherited_lock()
        if fd is None:
            fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OSError(f"a daemon already listens on {self.path}") from None
        self._lock_fd = fd
        try:  # whose lock it is, for `dsh-recall daemon --stop`
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass

    def warm_up(self) -> None:
        """Load what a call needs (the full CLI, numpy, the code service) before the socket
        exists: a call meanwhile finds no socket and answers alone, rather than waiting
        for these imports."""
        if hasattr(self, "_cli"):
            return
        from .cli import cli  # the full CLI, loaded once

        self._cli = cli
        # Score lists missing for one search are there for the next, and the model
        # loads once, not per search (core/process.py).
        from ..core.process import set_long_lived

        set_long_lived()
        from ..core.lazy import np
        from ..services import code  # noqa: F401 - imported for its import time only

        np.zeros(1)

    def bind(self) -> socket.socket:
        self.claim()
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.settimeout(CONNECT_TIMEOUT_S)
                probe.connect(str(self.path))
                raise OSError(f"a daemon already listens on {self.path}")
            except (TimeoutError, ConnectionRefusedError, FileNotFoundError):
                self.path.unlink(missing_ok=True)  # left by a daemon that died
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(16)
        return sock

    def _inherited_lock(self) -> int | None:
        """The lock file descriptor the starting call passed down (warm.start), when it is
        this socket's lock file; it holds the lock already, so no second start slips in."""
        fd, self._given_lock = self._given_lock, None
        if fd is None:
            return None
        try:
            st, want = os.fstat(fd), os.stat(str(self.path) + ".lock")
        except OSError:
            return None
        if (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
            os.close(fd)
            return None
        return fd

    def serve(self, sock: socket.socket) -> str:
        """Answer until idle for idle_s or the code changes; returns why it stopped. Each
        connection gets a thread; the searches themselves run one at a time (they share the
        process's cwd and stdout), and a call that waits past BUSY_WAIT_S for its turn is
        declined, so its CLI answers alone instead of queueing behind a long one."""
        try:  # from the start: a stop signal during the imports still removes the socket
            self.warm_up()  # done already when run by `dsh-recall daemon`
            self._last = time.monotonic()
            while self._stop is None:
                idle = time.monotonic() - self._last
                if idle >= self.idle_s and not self._turn.locked():
                    return "idle"
                sock.settimeout(max(0.05, min(0.5, self.idle_s - idle)))
                for late in self.pending.expired():
                    hang_up(late)
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                except OSError as e:  # out of file descriptors: serve on, as they free up
                    self.log(f"cannot accept a call: {e}")
                    time.sleep(0.1)
                    continue
                self._last = time.monotonic()
                for old in self.pending.admit(conn, self._peer(conn)[0], conn):
                    hang_up(old)
                threading.Thread(target=self._serve_one, args=(conn,), daemon=True,
                                 name="dsh-recall-daemon-call").start()
            return self._stop
        finally:
            sock.close()
            try:
                self.path.unlink(missing_ok=True)
            except OSError:
                pass
            fd, self._lock_fd = self._lock_fd, None
            if fd is not None:
                os.close(fd)  # releases the lock: another daemon may start

    def _serve_one(self, conn: socket.socket) -> None:
        with conn:
            stop = self._handle(conn)
        self.pending.gone(conn)  # a refused peer, a bad request: it waits no longer
        self._last = time.monotonic()
        if stop:
            self._stop = stop

    @staticmethod
    def _peer(conn: socket.socket) -> tuple[int, int]:
        """(pid, uid); without SO_PEERCRED the 0700 folder and 0600 socket keep others out."""
        opt = getattr(socket, "SO_PEERCRED", None)
        if opt is None:
            return -1, os.getuid()
        import struct

        try:
            return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt, 12))[:2]
        except OSError:
            return -1, -1

    def _peer_ok(self, conn: socket.socket) -> bool:
        pid, uid = self._peer(conn)
        return uid == os.getuid() and (pid == -1 or same_confinement(pid))

    def _reply(self, conn: socket.socket, reply: dict) -> None:
        try:
            conn.sendall((json.dumps(reply) + "\n").encode("ascii"))
        except OSError:
            pass

    def _handle(self, conn: socket.socket) -> str | None:
        conn.settimeout(self.pending.deadline_s)  # serve() also hangs up at the deadline
        try:
            if not self._peer_ok(conn):
                return None
            line = recv_line(conn, MAX_REQUEST)
            if not self.pending.authenticated(conn):
                return None  # hung up on: past the deadline, or pushed out by newer calls
            conn.settimeout(10.0)
            req = json.loads(line) if line else None
        except (OSError, ValueError, RecursionError):  # RecursionError: absurdly nested JSON
            return None
        if not isinstance(req, dict) or req.get("v") != PROTOCOL:
            self._reply(conn, {"ok": False, "why": "protocol"})
            return None
        args, cwd, stdin = req.get("argv"), req.get("cwd"), req.get("stdin")
        if (not isinstance(args, list) or not all(isinstance(a, str) for a in args)
                or not isinstance(cwd, str) or not isinstance(stdin, (str, type(None)))):
            self._reply(conn, {"ok": False, "why": "malformed"})
            return None
        if req.get("env") != self.env:
            self._reply(conn, {"ok": False, "why": "environment differs"})
            return None
        if code_stamp() != self.stamp:
            self._reply(conn, {"ok": False, "why": "code changed"})
            return "code changed"
        if command_of(args) is None:
            self._reply(conn, {"ok": False, "why": "not forwarded"})
            return None
        # From here on the caller hears a heartbeat until its answer: a daemon that stops
        # (SIGSTOP, a wedged search) falls silent, and its client runs the search itself.
        stop_beat, sending = threading.Event(), threading.Lock()

        def beat() -> None:
            while not stop_beat.wait(HEARTBEAT_S):
                with sending:
                    try:
                        conn.sendall(b" ")
                    except OSError:
                        return

        beater = threading.Thread(target=beat, name="dsh-recall-daemon-beat", daemon=True)
        beater.start()
        try:
            if not self._turn.acquire(timeout=BUSY_WAIT_S):
                reply = {"ok": False, "why": "busy"}
            else:
                try:
                    t0 = time.monotonic()
                    code, order = self._run(args, cwd, stdin)
                    self.served += 1
                finally:
                    self._turn.release()
                self.log(f"served {command_of(args)} in {(time.monotonic() - t0) * 1000:.0f} ms, "
                         f"exit {code}")
                reply = {"ok": True, "code": code, "order": order}
        finally:
            stop_beat.set()
            beater.join()
        with sending:
            conn.settimeout(ANSWER_TIMEOUT_S)
            self._reply(conn, reply)
        return None

    def _run(self, args: list[str], cwd: str, stdin: str | None = None) -> tuple[int, list]:
        """Run one CLI call here as `dsh-recall` would run it: the same argument cleaning,
        the caller's cwd, a hook's payload (base64) as stdin; returns the exit code and
        what it wrote to stdout (1) and stderr (2), in the order written."""
        import base64

        from ..core.clean import QUERY_CHARS, cap_query, clean_text
        from .cli import common, set_via

        args = [cap_query(clean_text(a), QUERY_CHARS) for a in args]
        tape: list[list] = []  # [stream 1 or 2, text] in the order written
        out, err = _Recorded(1, tape), _Recorded(2, tape)
        saved = sys.stdout, sys.stderr, os.getcwd(), sys.stdin
        common._SHOWN.clear()  # config notices are shown once per call, as in a fresh process
        set_via(args)  # usage records name the front end (a hook's: "hook"), as a CLI would
        code = 0
        try:
            os.chdir(cwd)
            data = base64.b64decode(stdin, validate=True) if stdin is not None else b""
            sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
            sys.stdout, sys.stderr = out, err
            self._cli(args=args, prog_name="dsh-recall", standalone_mode=True)
        except SystemExit as e:
            if isinstance(e.code, str):
                err.write(e.code + "\n")
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception as e:  # noqa: BLE001 - what the CLI's last net prints (a gone cwd too)
            err.write(common.one_line_error(e) + "\n")
            code = 1
        finally:
            sys.stdout, sys.stderr, sys.stdin = saved[0], saved[1], saved[3]
            try:
                os.chdir(saved[2])
            except OSError:
                pass
        return code, tape

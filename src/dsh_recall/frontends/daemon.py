"""The warm CLI server (`dsh-recall daemon`) and the client side of it.

A cold `dsh-recall search` spends most of its time before the search: starting Python,
importing click, numpy and the services, opening the index. While a user runs
`dsh-recall daemon`, a search is handed to that process instead, over a Unix socket in the
recall home, and answered from already-loaded modules: the CLI prints exactly what it would
have printed itself and exits with the same code. Without a daemon, or when it cannot serve
this caller exactly as a local run would, the CLI runs the search itself.

What keeps it exact and private:
- Only the searches are handed over (`search`, `history search`, `notes search`). The
  daemon runs each through the same click command, in the caller's working directory, one
  request at a time.
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
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .admission import Pending, hang_up
from .argv import command_words

PROTOCOL = 1
MAX_REQUEST = 1 << 20  # bytes: argv is capped per argument (core.clean.QUERY_CHARS) anyway
CONNECT_TIMEOUT_S = 0.5
ANSWER_TIMEOUT_S = 120.0  # the daemon's own cap on writing an answer to a slow reader
# While a call is in the daemon's hands it sends a heartbeat (a space) every HEARTBEAT_S; a
# client that hears nothing for SILENCE_S (a stopped or wedged daemon) runs the search itself.
HEARTBEAT_S = 0.5
SILENCE_S = 3.0
BUSY_WAIT_S = 1.0  # a call waits this long for its turn, then its CLI answers alone
# The calls handed over: the searches, which an agent or a script repeats and which pay the
# start-up and the model's load most (history and notes load the embedder on every call).
FORWARDED = frozenset({"search", "history search", "notes search"})
_PACKAGE = Path(__file__).resolve().parents[1]


def _home() -> Path:
    from ..core.paths import recall_home

    return recall_home()


def socket_path(home: Path | None = None) -> Path:
    """The daemon's socket for this interpreter and package, under the recall home."""
    ident = f"{sys.executable}\0{_PACKAGE}\0{os.getuid()}"
    name = "cli-" + hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:12] + ".sock"
    return (home or _home()) / "run" / name


# Credentials an http embedder or reranker reads from a variable the config names
# (`api_key_env`): the name is anyone's choice, so every variable that looks like a
# credential counts. Only a hash of the values crosses the socket.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.I)


def env_key(environ: dict[str, str] | None = None) -> str:
    """What, in an environment, can change a CLI answer: every DSH_* variable, HOME and
    every credential-like variable (see _SECRET_NAME)."""
    env = os.environ if environ is None else environ
    items = sorted((k, v) for k, v in env.items()
                   if (k.startswith("DSH_") or k == "HOME" or _SECRET_NAME.search(k))
                   and k != "DSH_RECALL_DAEMON")
    return hashlib.sha256(json.dumps(items).encode("utf-8", "surrogatepass")).hexdigest()


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


def command_of(args: list[str]) -> str | None:
    """The forwarded command argv names ("search", "history search", ...), else None."""
    words = command_words(args)
    for n in (1, 2):
        name = " ".join(words[:n])
        if len(words) >= n and name in FORWARDED:
            return name
    return None


# -- client ----------------------------------------------------------------------------

def _recv_line(sock: socket.socket, limit: int) -> bytes | None:
    """One line, heartbeat spaces before it dropped; each recv waits at most the socket's
    timeout (a silent peer raises socket.timeout)."""
    buf = bytearray()
    while b"\n" not in buf:
        part = sock.recv(65536)
        if not part:
            return bytes(buf) if buf else None
        buf += part if buf else part.lstrip(b" ")
        if len(buf) > limit:
            return None
    return bytes(buf[: buf.index(b"\n")])


def _utf8(stream: Any) -> bool:
    enc = getattr(stream, "encoding", None) if stream is not None else None
    return isinstance(enc, str) and enc.lower().replace("_", "-") in ("utf-8", "utf8")


def _wants_help(args: list[str]) -> bool:
    for a in args:
        if a == "--":
            return False
        if a in ("-h", "--help"):
            return True
    return False


def forward(args: list[str]) -> int | None:
    """Hand this CLI call to a running daemon: print its answer and return the exit code,
    or None when there is no daemon or it declined (the caller then runs the command)."""
    if command_of(args) is None or os.environ.get("DSH_RECALL_DAEMON") == "0":
        return None
    # The daemon's answer is UTF-8 text, and help is wrapped to the terminal: a stream that
    # is closed or not UTF-8, or a help request, is served here as the CLI alone would.
    if not (_utf8(sys.stdout) and _utf8(sys.stderr)) or _wants_help(args):
        return None
    try:
        path = socket_path()
    except (OSError, RuntimeError):
        return None
    if not path.exists():
        return None
    try:
        request = {"v": PROTOCOL, "argv": args, "cwd": os.getcwd(), "env": env_key()}
        data = (json.dumps(request) + "\n").encode("ascii")  # lone surrogates as \udcxx
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(str(path))
            sock.settimeout(SILENCE_S)
            sock.sendall(data)
            line = _recv_line(sock, 256 << 20)
    except (OSError, ValueError):
        return None  # none listening, a stale socket, a silent daemon: run it here
    except KeyboardInterrupt:
        sys.stderr.write("\nAborted!\n")  # what click prints on Ctrl-C, with its exit code
        return 1
    try:
        reply = json.loads(line) if line else None
    except ValueError:
        return None
    if not isinstance(reply, dict) or not reply.get("ok"):
        return None
    order = reply.get("order")
    if not isinstance(order, list):
        return None
    try:
        # In the order the command wrote them, each piece flushed before the next: with
        # both streams on one file (2>&1) the lines interleave as the CLI alone writes them.
        for fd, text in order:
            if isinstance(text, str) and text:
                stream = sys.stdout if fd == 1 else sys.stderr
                stream.write(text)
                stream.flush()
    except (OSError, ValueError, TypeError):
        pass
    code = reply.get("code", 1)
    return code if isinstance(code, int) else 1


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

    def __init__(self, idle_s: float, log=None):
        self.idle_s = idle_s
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

    def bind(self) -> socket.socket:
        folder = self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        st = folder.stat()
        if st.st_uid != os.getuid():
            raise OSError(f"{folder} belongs to another user")
        os.chmod(folder, 0o700)
        if len(str(self.path).encode()) >= 104:
            raise OSError(f"socket path too long for this OS: {self.path} (set DSH_RECALL_HOME "
                          "to a shorter folder)")
        # Held for the daemon's life: two daemons starting at once cannot both take the
        # path (each could remove the other's socket), and only the holder removes it.
        import fcntl

        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OSError(f"a daemon already listens on {self.path}") from None
        self._lock_fd = fd
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

    def serve(self, sock: socket.socket) -> str:
        """Answer until idle for idle_s or the code changes; returns why it stopped. Each
        connection gets a thread; the searches themselves run one at a time (they share the
        process's cwd and stdout), and a call that waits past BUSY_WAIT_S for its turn is
        declined, so its CLI answers alone instead of queueing behind a long one."""
        try:  # from the start: a stop signal during the imports still removes the socket
            from .cli import cli  # the full CLI, loaded once

            self._cli = cli
            # Score lists missing for one search are there for the next, and the model
            # loads once, not per search (core/process.py).
            from ..core.process import set_long_lived

            set_long_lived()
            # Load what a search needs now, not on the first request.
            from ..core.lazy import np
            from ..services import code  # noqa: F401 - imported for its import time only

            np.zeros(1)
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
            line = _recv_line(conn, MAX_REQUEST)
            if not self.pending.authenticated(conn):
                return None  # hung up on: past the deadline, or pushed out by newer calls
            conn.settimeout(10.0)
            req = json.loads(line) if line else None
        except (OSError, ValueError, RecursionError):  # RecursionError: absurdly nested JSON
            return None
        if not isinstance(req, dict) or req.get("v") != PROTOCOL:
            self._reply(conn, {"ok": False, "why": "protocol"})
            return None
        args, cwd = req.get("argv"), req.get("cwd")
        if (not isinstance(args, list) or not all(isinstance(a, str) for a in args)
                or not isinstance(cwd, str)):
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
                    code, order = self._run(args, cwd)
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

    def _run(self, args: list[str], cwd: str) -> tuple[int, list]:
        """Run one CLI call here as `dsh-recall` would run it: the same argument cleaning,
        the caller's cwd; returns the exit code and what it wrote to stdout (1) and stderr
        (2), in the order written."""
        from ..core.clean import QUERY_CHARS, cap_query, clean_text
        from .cli import common

        args = [cap_query(clean_text(a), QUERY_CHARS) for a in args]
        tape: list[list] = []  # [stream 1 or 2, text] in the order written
        out, err = _Recorded(1, tape), _Recorded(2, tape)
        saved = sys.stdout, sys.stderr, os.getcwd()
        common._SHOWN.clear()  # config notices are shown once per call, as in a fresh process
        code = 0
        try:
            os.chdir(cwd)
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
            sys.stdout, sys.stderr = saved[0], saved[1]
            try:
                os.chdir(saved[2])
            except OSError:
                pass
        return code, tape

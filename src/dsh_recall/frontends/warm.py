"""The warm path's client side: hand a CLI call to the per-user daemon (frontends/daemon.py)
when one runs, and start one in the background when none does.

- `forward(args)`: the entry point asks it first, before click or anything heavy is
  imported. A search, an object read or a hook call goes to the daemon's socket and its answer is printed
  as the CLI would print it; None means "run it here" (no daemon, or it declined).
- `start_after(args)`: the CLI calls it once a forwarded kind of call has answered alone.
  With no daemon running or starting, it starts `dsh-recall daemon` detached (its own
  session, no terminal, stdin/stdout on /dev/null, its log in `run/<socket>.log`), with
  the caller's environment so it serves that caller's calls, and returns at once: the
  call that started it never waits for its start-up. The start holds the socket's lock
  file (flock) and passes it to the daemon, so two calls racing to start one end with one.

The protocol's shared names (socket_path, env_key, command_of, FORWARDED, ...) live here;
the server imports them. Off switches: `DSH_RECALL_DAEMON=0` (neither hand over nor start), and
`DSH_RECALL_DAEMON=manual` or `[daemon] autostart = false` in the user's own config (hand
over to a daemon the user runs, never start one). Standard library only until a start is decided,
and of it only what a bare interpreter has loaded or costs nothing: `json`, `re` and `socket`
would add about 20 ms to a handed-over call (with their `enum`, `selectors` and regex
compiler), more than the daemon's own search, so the client speaks JSON through CPython's C
codec (`_json`) and its socket is `_socket`'s.
"""

from __future__ import annotations

import os
import sys
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as _socket

from .argv import command_words
from .hooks import MAX_PAYLOAD_BYTES

TYPE_CHECKING = False  # typing itself costs every handed-over call a few ms to import
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# The builtin SHA-256, not hashlib's: hashlib loads OpenSSL (about 7 ms of a warm call).
# Only the module this version has is tried: a failed import searches every sys.path entry.
try:
    if sys.version_info >= (3, 12):
        from _sha2 import sha256
    else:
        from _sha256 import sha256
except ImportError:
    from hashlib import sha256

try:  # the C halves of `json` and `socket`, which import neither `re` nor `enum`
    from _json import encode_basestring_ascii as _json_str
    from _json import make_scanner as _make_scanner
except ImportError:  # an interpreter without CPython's accelerator: json's own
    from json.encoder import encode_basestring_ascii as _json_str
    from json.scanner import make_scanner as _make_scanner


def _bad_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


class _Strict:
    """What json's scanner reads from its decoder: the defaults of json.loads, except that
    NaN and Infinity, which no daemon sends, are refused."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_bad_constant)
    memo: dict = {}


_SCAN = _make_scanner(_Strict())  # type: ignore[arg-type]  # a decoder's attributes, duck-typed


def loads(text: str) -> Any:
    """json.loads(text) for one JSON value, without importing json; ValueError if it is not."""
    body = text.strip(" \t\r\n")
    try:
        value, end = _SCAN(body, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    finally:
        _Strict.memo.clear()
    if end != len(body):
        raise ValueError("not JSON: extra data")
    return value


def dumps(value: Any) -> str:
    """json.dumps(value) for the request's shapes (str, int, bool, None, lists and dicts of
    them), ASCII only (a lone surrogate as \\udcxx), without importing json."""
    if isinstance(value, str):
        return _json_str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json_str(str(k))}: {dumps(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a request value: {type(value).__name__}")


PROTOCOL = 1
# A hook's payload crosses the socket (base64) up to HOOK_STDIN_MAX; a bigger one (a huge
# tool result) is read by the hook in its own process.
HOOK_STDIN_MAX = 8 << 20
CONNECT_TIMEOUT_S = 0.5
# While a call is in the daemon's hands it sends a heartbeat (a space) every HEARTBEAT_S; a
# client that hears nothing for SILENCE_S (a stopped or wedged daemon) runs the search itself.
HEARTBEAT_S = 0.5
SILENCE_S = 3.0
# The calls handed over: the searches, the object reads and the harness hooks, which an
# agent repeats dozens of times a session and which pay the start-up most (history and
# notes load the embedder on every call).
HOOKS = frozenset({"hook claude-code post-tool-use", "hook claude-code user-prompt-submit",
                   "hook claude-code session-start"})
FORWARDED = frozenset({"search", "history search", "notes search", "object get",
                       "object search"}) | HOOKS
# The package folder (as Path(__file__).resolve().parents[1] gives it), without pathlib: a
# handed-over call imports neither pathlib nor the recall home's module (core/paths.py).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _home() -> str:
    """core.paths.recall_home() as a string (a test keeps the two equal)."""
    env = os.environ.get("DSH_RECALL_HOME")
    if env:
        return os.path.expanduser(env)
    dsh_home = os.environ.get("DSH_HOME")
    if dsh_home:
        return os.path.join(os.path.expanduser(dsh_home), "dsh-recall")
    return os.path.join(os.path.expanduser("~"), ".dsh", "dsh-recall")


def socket_file(home: str | None = None) -> str:
    """The daemon's socket for this interpreter and package, under the recall home."""
    ident = f"{sys.executable}\0{_PACKAGE}\0{os.getuid()}"
    name = "cli-" + sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()[:12] + ".sock"
    return os.path.join(home or _home(), "run", name)


def socket_path(home: Path | None = None) -> Path:
    """socket_file() as a Path."""
    from pathlib import Path

    return Path(socket_file(None if home is None else str(home)))


# Credentials an http embedder or reranker reads from a variable the config names
# (`api_key_env`): the name is anyone's choice, so every variable that looks like a
# credential counts. Only a hash of the values crosses the socket.
_SECRET_NAME = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL")


def _secret_name(name: str) -> bool:
    upper = name.upper()
    return any(part in upper for part in _SECRET_NAME)


def env_key(environ: dict[str, str] | None = None) -> str:
    """What, in an environment, can change a CLI answer: every DSH_* variable, HOME and
    every credential-like variable (see _SECRET_NAME)."""
    env = os.environ if environ is None else environ
    items = sorted((k, v) for k, v in env.items()
                   if (k.startswith("DSH_") or k == "HOME" or _secret_name(k))
                   and k != "DSH_RECALL_DAEMON")
    return sha256(dumps(items).encode("utf-8", "surrogatepass")).hexdigest()


def command_of(args: list[str]) -> str | None:
    """The forwarded command argv names ("search", "history search", ...), else None."""
    words = command_words(args, 3)
    for n in (1, 2, 3):
        name = " ".join(words[:n])
        if len(words) >= n and name in FORWARDED:
            return name
    return None


def recv_line(sock: Any, limit: int) -> bytes | None:
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


def off() -> bool:
    """Whether the user turned the warm path off for this call (`DSH_RECALL_DAEMON=0`)."""
    return os.environ.get("DSH_RECALL_DAEMON") == "0"


def manual() -> bool:
    """Whether only a daemon the user runs is used, none started (`DSH_RECALL_DAEMON=manual`)."""
    return os.environ.get("DSH_RECALL_DAEMON") == "manual"


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


def _take_stdin() -> bytes:
    """A hook's payload, read once: what the daemon gets, and what the CLI reads instead of
    the real stdin when the call runs here after all (as much as the hook itself reads)."""
    import io

    try:
        data = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1) if sys.stdin is not None else b""
    except (OSError, ValueError, AttributeError):
        data = b""
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    return data


def forward(args: list[str]) -> int | None:
    """Hand this CLI call to a running daemon: print its answer and return the exit code,
    or None when there is no daemon or it declined (the caller then runs the command)."""
    command = command_of(args)
    if command is None or off():
        return None
    # The daemon's answer is UTF-8 text, and help is wrapped to the terminal: a stream that
    # is closed or not UTF-8, or a help request, is served here as the CLI alone would.
    if not (_utf8(sys.stdout) and _utf8(sys.stderr)) or _wants_help(args):
        return None
    try:
        path = socket_file()
    except (OSError, RuntimeError):
        return None
    if not os.path.exists(path):
        return None
    request: dict[str, Any] = {"v": PROTOCOL, "argv": args, "env": env_key()}
    if command.startswith("hook "):
        data = _take_stdin()
        if len(data) > HOOK_STDIN_MAX:
            return None  # a very big tool result: the hook reads it here
        import base64

        request["stdin"] = base64.b64encode(data).decode("ascii")
    try:
        request["cwd"] = os.getcwd()
        line = (dumps(request) + "\n").encode("ascii")  # lone surrogates as \udcxx
        sock = _socket(AF_UNIX, SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(path)
            sock.settimeout(SILENCE_S)
            sock.sendall(line)
            got = recv_line(sock, 256 << 20)
        finally:
            sock.close()
    except (OSError, ValueError):
        return None  # none listening, a stale socket, a silent daemon: run it here
    except KeyboardInterrupt:
        sys.stderr.write("\nAborted!\n")  # what click prints on Ctrl-C, with its exit code
        return 1
    try:
        reply = loads(got.decode("utf-8", "surrogateescape")) if got else None
    except (ValueError, RecursionError):
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


# -- starting one ------------------------------------------------------------------------

def _config_file(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "--":
            break
        if a == "--config" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def _settings(config_file: str | None) -> tuple[bool, float]:
    """(autostart, idle minutes) from the user's own config (never a repository's)."""
    from ..core.config import load_config

    cfg = load_config(config_file=config_file).daemon
    return cfg.autostart, cfg.idle_minutes


def _take_lock(path: Path) -> int | None:
    """The socket's lock, held, as a file descriptor; None while a daemon holds it (one
    runs, or one is starting)."""
    import fcntl

    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        return None
    os.chmod(folder, 0o700)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


# A started daemon that died without stopping (an import error, a crash, the OOM killer) is
# not started again for this long: each start costs a process's imports, not a call's.
RETRY_AFTER_DEATH_S = 60.0


def _died_lately(log: str) -> bool:
    """Whether the last started daemon ended, within RETRY_AFTER_DEATH_S, otherwise than by
    stopping (idle, a signal, its code changed): its log's last line says which."""
    import time

    try:
        st = os.stat(log)
        if time.time() - st.st_mtime > RETRY_AFTER_DEATH_S:
            return False
        with open(log, "rb") as f:
            f.seek(max(0, st.st_size - 4096))
            tail = f.read().rstrip()
    except OSError:
        return False
    return not tail.rsplit(b"\n", 1)[-1].startswith(b"dsh-recall daemon: stopped")


def start(config_file: str | None = None) -> int | None:
    """Start a daemon in the background unless one runs or is starting, or the user turned
    it off; returns the started process's pid, or None. Never waits for its start-up."""
    if off() or manual():
        return None
    try:
        path = socket_path()
        if len(str(path).encode()) >= 104:
            return None  # the daemon could not bind it (it says so when run by hand)
        fd = _take_lock(path)
    except (OSError, RuntimeError):
        return None
    if fd is None:
        return None
    try:
        if _died_lately(str(path) + ".log"):
            return None
        autostart, idle_minutes = _settings(config_file)
        if not autostart:
            return None
        import subprocess

        log = os.open(str(path) + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            # -P: nothing importable from the working folder; the same interpreter and
            # package as this call (socket_path names both), and this call's environment.
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "dsh_recall", "daemon", "--idle-minutes",
                 f"{idle_minutes:g}", "--lock-fd", str(fd)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                cwd=str(path.parent), pass_fds=(fd,), start_new_session=True)
        finally:
            os.close(log)
        return proc.pid
    except Exception:  # noqa: BLE001 - a bad config, no fork: the call has answered; no daemon
        return None
    finally:
        os.close(fd)  # the daemon holds the lock now (or nobody, when none started)


def start_after(args: list[str]) -> None:
    """After a call that a daemon would have answered ran here: start one for the next."""
    if command_of(args) is None or off() or _wants_help(args):
        return
    try:
        start(_config_file(args))
    except Exception:  # noqa: BLE001 - the answer is out; starting is only for the next call
        pass

"""Transcript readers: shared data types and append-aware byte reading (plain or zstd).

A reader turns the new bytes of one transcript file into `TranscriptEvent`s. Files are
append-only logs, so a reader starts at the byte offset where the last import stopped and
returns the offset it safely consumed: only whole lines (plain) or whole zstd frames count.
An incomplete tail (a line still being written, a truncated final frame) is left for the
next import; complete lines inside it are still returned, and the store deduplicates them
by (session, seq).

Records are untrusted input. Every value is cleaned where it enters (`parse_record`:
invalid UTF-8 and lone surrogates become U+FFFD, integers outside SQLite's int64 and
non-finite numbers become null), readers coerce each field to its type (`opt_str`,
`opt_ms`, `iso_to_ms`), and `TranscriptEvent` refuses a wrong type. A record that still
fails is skipped and counted (`record_guard`), never the file. Files are opened as regular
files only and read up to a bound per import (`MAX_READ_BYTES`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...core.clean import INT64_MAX, INT64_MIN, clean_int, clean_json, clean_text
from ..workspace import open_regular, read_fd

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Bytes of a transcript read by one import; the rest is read by the next one (the resume
# offset only ever counts whole lines or frames), so memory stays bounded on any file.
MAX_READ_BYTES = 64 << 20
# A skipped record's reason is kept in the report for the first few only.
MAX_SKIP_NOTES = 3


@dataclass(frozen=True)
class Piece:
    """One indexable part of an event: `kind` is text|reasoning|tool_call|tool_result|summary."""

    kind: str
    text: str
    tool: str | None = None


@dataclass(frozen=True)
class TranscriptEvent:
    """One message-like event of a session, with its original text in `pieces`."""

    session: str
    seq: int
    role: str  # user | assistant | tool | summary | a speaker name (generic)
    pieces: tuple[Piece, ...]
    time_ms: int | None = None
    time: str | None = None  # as written (ISO or free text) when it is not epoch ms
    message_id: str | None = None
    call_id: str | None = None  # tool call id, to name the tool of a later result
    flags: tuple[str, ...] = ()  # e.g. "replaces:16-16", "error"

    def __post_init__(self) -> None:
        # The last check before the store: a wrong type here is a record no coercion could
        # save (or a reader bug); record_guard then skips and counts it.
        if not isinstance(self.session, str) or not self.session:
            raise TypeError("session id is not a non-empty string")
        if clean_int(self.seq) is None:
            raise TypeError("seq is not an integer within int64")
        if not isinstance(self.role, str):
            raise TypeError("role is not a string")
        if not isinstance(self.pieces, tuple) or not all(
                isinstance(p, Piece) and isinstance(p.kind, str) and isinstance(p.text, str)
                and (p.tool is None or isinstance(p.tool, str)) for p in self.pieces):
            raise TypeError("pieces are not (kind, text, tool) strings")
        if self.time_ms is not None and clean_int(self.time_ms) is None:
            raise TypeError("time_ms is not an integer within int64")
        for name in ("time", "message_id", "call_id"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} is not a string")
        if not isinstance(self.flags, tuple) or not all(isinstance(f, str) for f in self.flags):
            raise TypeError("flags are not strings")


@dataclass
class SessionMeta:
    """What a reader learned about a session (fields left None are unknown here)."""

    id: str
    source: str
    workspace: str | None = None
    title: str | None = None
    created_ms: int | None = None


@dataclass
class ReadResult:
    """The outcome of reading one file from an offset."""

    events: list[TranscriptEvent] = field(default_factory=list)
    sessions: dict[str, SessionMeta] = field(default_factory=dict)
    marks: list[tuple[str, int, str]] = field(default_factory=list)  # (session, seq, flag)
    offset: int = 0  # bytes safely consumed (resume point)
    line_no: int = 0  # lines consumed (resume point for formats keyed by line number)
    skipped: int = 0  # malformed records, counted
    ignored: int = 0  # well-formed records of types we do not index
    notes: list[str] = field(default_factory=list)
    more: bool = False  # the read stopped at its size bound; read again from `offset`
    capped: bool = False  # a document past its event bound (document.MAX_DOCUMENT_EVENTS)

    @classmethod
    def start(cls, raw: RawLines) -> ReadResult:
        """An empty result carrying the raw read's resume point, notes and skips."""
        return cls(offset=raw.offset, line_no=raw.line_no, notes=list(raw.notes), skipped=raw.skipped,
                   more=raw.more)

    def skip(self, line: int | None, reason: str) -> None:
        """Count one skipped record; the first few reasons go into the notes."""
        self.skipped += 1
        if self.skipped <= MAX_SKIP_NOTES:
            where = f"line {line + 1}: " if line is not None else ""
            self.notes.append(f"{where}{reason}; skipped")

    def session(self, sid: str, source: str) -> SessionMeta:
        meta = self.sessions.get(sid)
        if meta is None:
            meta = self.sessions[sid] = SessionMeta(id=sid, source=source)
        return meta


@dataclass(frozen=True)
class ReadContext:
    """What the store remembers about a file, handed to its reader on an incremental read."""

    session: str | None = None
    workspace: str | None = None
    line_no: int = 0
    call_tools: dict[str, str] = field(default_factory=dict)  # call id -> tool name


@dataclass
class RawLines:
    lines: list[tuple[int, bytes]]  # (line number, raw line without newline)
    offset: int
    line_no: int
    notes: list[str]
    skipped: int = 0  # lines longer than the read bound, passed over
    more: bool = False  # the read stopped at its bound: the file holds more to read now


def _split_lines(data: bytes, first_line: int, final: bool) -> tuple[list[tuple[int, bytes]], int]:
    """Split into complete lines; return them and how many bytes they used.

    A trailing fragment without newline counts only when `final` and it parses as JSON
    (a hand-written file without a last newline), otherwise it waits for the writer.
    """
    out: list[tuple[int, bytes]] = []
    used = 0
    n = first_line
    while True:
        nl = data.find(b"\n", used)
        if nl < 0:
            break
        out.append((n, data[used:nl]))
        n += 1
        used = nl + 1
    rest = data[used:]
    if rest.strip() and final:
        try:
            json.loads(rest)
        except (ValueError, RecursionError):
            return out, used
        out.append((n, rest))
        used = len(data)
    elif not rest.strip():
        used = len(data)
    return out, used


def read_lines(path: Path, offset: int, line_no: int, max_bytes: int | None = None) -> RawLines:
    """Read the lines added to `path` since `offset` (plain or concatenated zstd frames).

    Only a regular file is read (a FIFO, a device or a /proc file raises OSError), and at
    most `max_bytes` (default MAX_READ_BYTES) of it, up to its size when opened; `more`
    then says the rest is still to read.
    """
    max_bytes = max(1, MAX_READ_BYTES if max_bytes is None else max_bytes)
    fd, st = open_regular(path, follow_symlinks=True)
    try:
        head = read_fd(fd, 4, 0)
        data = read_fd(fd, min(max(0, st.st_size - offset), max_bytes), offset)
        more = offset + len(data) < st.st_size
        if head == ZSTD_MAGIC:
            raw = _read_zstd(data, offset, line_no, more)
            while more and raw.offset == offset and not any(n.startswith("corrupt") for n in raw.notes):
                # One frame larger than the bound: read further until it is whole.
                data += read_fd(fd, min(len(data), st.st_size - offset - len(data)), offset + len(data))
                more = offset + len(data) < st.st_size
                raw = _read_zstd(data, offset, line_no, more)
            raw.more = more and raw.offset > offset
            return raw
        lines, used = _split_lines(data, line_no, final=not more)
        if not lines and more and len(data) >= max_bytes:
            # One line longer than the read bound: pass over it so imports move on.
            end = _next_newline(fd, offset + len(data), st.st_size)
            return RawLines([], end, line_no + 1, [f"line {line_no + 1}: longer than {max_bytes} "
                                                   "bytes; skipped"], skipped=1, more=end < st.st_size)
    finally:
        os.close(fd)
    notes = []
    if used < len(data) and not more:
        notes.append(f"{len(data) - used} bytes of an unfinished last line left for the next import")
    return RawLines(lines, offset + used, line_no + len(lines), notes, more=more and used > 0)


def _next_newline(fd: int, pos: int, size: int) -> int:
    """The offset just past the next newline at or after `pos` (else `size`)."""
    while pos < size:
        chunk = os.pread(fd, min(1 << 20, size - pos), pos)
        if not chunk:
            break
        nl = chunk.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(chunk)
    return size


def _read_zstd(data: bytes, offset: int, line_no: int, more: bool = False) -> RawLines:
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    pos = 0
    lines: list[tuple[int, bytes]] = []
    notes: list[str] = []
    consumed = 0  # compressed bytes of frames whose lines were all complete
    consumed_lines = line_no
    pending = b""  # decompressed text not yet ending in a newline
    n = line_no
    while pos < len(data):
        obj = dctx.decompressobj()
        try:
            out = obj.decompress(data[pos:])
        except zstandard.ZstdError as e:
            notes.append(f"corrupt zstd frame at byte {offset + pos}: {e}; the rest is left unread")
            break
        if not obj.eof:
            # A truncated final frame (or one still being written): keep its complete lines,
            # but resume at its start next time so nothing is lost.
            got, _ = _split_lines(pending + out, n, final=False)
            lines.extend(got)
            if not more:  # else the frame only runs past this import's read bound
                notes.append(f"truncated zstd frame at byte {offset + pos} ({len(data) - pos} bytes) left for the next import")
            break
        pos = len(data) - len(obj.unused_data)
        got, used = _split_lines(pending + out, n, final=False)
        lines.extend(got)
        n += len(got)
        pending = (pending + out)[used:]
        if not pending:
            consumed = pos
            consumed_lines = n
    return RawLines(lines, offset + consumed, consumed_lines, notes)


def _int64(text: str) -> int | None:
    # An integer SQLite cannot store becomes null: the reader then treats it as absent.
    if len(text) > 20:
        return None
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else None


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _no_constant(_name: str) -> None:
    return None  # NaN, Infinity, -Infinity


# A JSON escape of a UTF-16 surrogate: after decoding the bytes with errors="replace",
# the only way a lone surrogate can reach the decoded value.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_record(line: bytes) -> Any:
    """One JSONL line as a cleaned JSON value; ValueError or RecursionError if not JSON."""
    text = line.decode("utf-8", errors="replace")
    value = json.loads(text, parse_int=_int64, parse_float=_finite, parse_constant=_no_constant)
    if _SURROGATE_ESCAPE.search(text):
        value = clean_json(value)
    return value


def parse_json_lines(raw: RawLines, result: ReadResult) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, cleaned object); count lines that are not JSON objects as skipped."""
    for n, line in raw.lines:
        if not line.strip():
            continue
        try:
            obj = parse_record(line)
        except RecursionError:
            result.skip(n, "nested too deep")
            continue
        except ValueError:
            result.skip(n, "not JSON")
            continue
        if not isinstance(obj, dict):
            result.skip(n, "not a JSON object")
            continue
        yield n, obj


@contextmanager
def record_guard(result: ReadResult, line: int) -> Iterator[None]:
    """Handle one record; an exception skips and counts that record only."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - one record must never stop the file
        result.skip(line, f"{type(e).__name__}: {clean_text(str(e))[:120]}")


def each_record(raw: RawLines, result: ReadResult, handle: Callable[[int, dict[str, Any]], None]) -> ReadResult:
    """Hand every JSON object line to `handle(line number, object)`; a line that is not
    one, or whose handling raises, is skipped and counted, and the file goes on."""
    for n, obj in parse_json_lines(raw, result):
        with record_guard(result, n):
            handle(n, obj)
    return result


def opt_str(value: Any) -> str | None:
    """A string field: text as is, a finite number as its text, anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    return None


# Plausible epoch milliseconds: years 1900 to 9999. Anything else is not a time.
_MIN_MS = -2_208_988_800_000
_MAX_MS = 253_402_300_799_999


def opt_ms(value: Any) -> int | None:
    """An epoch-ms field written as an integer (dsh's `time`), within years 1900-9999."""
    v = clean_int(value)
    return v if v is not None and _MIN_MS <= v <= _MAX_MS else None


def iso_to_ms(value: Any) -> int | None:
    """Epoch milliseconds from an ISO-8601 string or a number (seconds or ms), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return None
        try:
            ms = int(value if abs(value) > 1e11 else value * 1000)
        except (OverflowError, ValueError):
            return None
        return ms if _MIN_MS <= ms <= _MAX_MS else None
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            ms = int(dt.timestamp() * 1000)
        except (ValueError, OverflowError, OSError):
            return None
        return ms if _MIN_MS <= ms <= _MAX_MS else None
    return None


# How far a title's cut may move to the end of the word it falls in.
_TITLE_WORD_CHARS = 1024


def cut_title(text: str | None, limit: int, first_line: bool = False) -> str | None:
    """A session title from `text` (its first line with `first_line`), stripped, at most
    `limit` chars, except that the cut never falls inside a word: it moves to the word's
    end (at most 1,024 chars on). The secret scrubber sees the title after this cut (a
    reader may not import it), and a credential cut short (`ghp_...` at 20 of its 40
    chars, `postgres://u:pa` without its `@host`) is no longer one it recognises."""
    text = (text or "").strip()
    if first_line and text:
        text = text.splitlines()[0].strip()
    if len(text) > limit and not text[limit - 1].isspace():
        end = re.search(r"\s", text[limit:limit + _TITLE_WORD_CHARS])
        limit = limit + (end.start() if end else _TITLE_WORD_CHARS)
    return text[:limit].rstrip() or None


def content_texts(content: Any, types: tuple[str, ...] = ("text",)) -> list[str]:
    """Texts of a message content that is a string or a list of typed blocks."""
    if isinstance(content, str):
        return [content] if content.strip() else []
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, dict) and block.get("type") in types:
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    out.append(text)
    return out


def as_text(value: Any) -> str:
    """A tool input/output of any JSON shape as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) for b in value):
        texts = content_texts(value, ("text", "input_text", "output_text"))
        if texts:
            return "\n".join(texts)
    return json.dumps(value, ensure_ascii=False)

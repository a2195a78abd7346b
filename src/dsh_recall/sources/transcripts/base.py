"""Transcript readers: shared data types and append-aware byte reading (plain or zstd).

A reader turns the new bytes of one transcript file into `TranscriptEvent`s. Files are
append-only logs, so a reader starts at the byte offset where the last import stopped and
returns the offset it safely consumed: only whole lines (plain) or whole zstd frames count.
An incomplete tail (a line still being written, a truncated final frame) is left for the
next import; complete lines inside it are still returned, and the store deduplicates them
by (session, seq).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


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
    skipped: int = 0  # malformed lines, counted
    ignored: int = 0  # well-formed records of types we do not index
    notes: list[str] = field(default_factory=list)

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
        except ValueError:
            return out, used
        out.append((n, rest))
        used = len(data)
    elif not rest.strip():
        used = len(data)
    return out, used


def read_lines(path: Path, offset: int, line_no: int) -> RawLines:
    """Read the lines added to `path` since `offset` (plain or concatenated zstd frames)."""
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(offset)
        data = f.read()
    if head == ZSTD_MAGIC:
        return _read_zstd(data, offset, line_no)
    lines, used = _split_lines(data, line_no, final=True)
    notes = []
    if used < len(data):
        notes.append(f"{len(data) - used} bytes of an unfinished last line left for the next import")
    return RawLines(lines, offset + used, line_no + len(lines), notes)


def _read_zstd(data: bytes, offset: int, line_no: int) -> RawLines:
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


def parse_json_lines(raw: RawLines, result: ReadResult) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object); count lines that are not JSON objects as skipped."""
    for n, line in raw.lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            result.skipped += 1
            if result.skipped <= 3:
                result.notes.append(f"line {n + 1}: not JSON, skipped")
            continue
        if not isinstance(obj, dict):
            result.skipped += 1
            continue
        yield n, obj


def iso_to_ms(value: Any) -> int | None:
    """Epoch milliseconds from an ISO-8601 string or a number (seconds or ms)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value if value > 1e11 else value * 1000)
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return int(dt.timestamp() * 1000)
    return None


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

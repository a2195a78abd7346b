"""Aider chat history: `.aider.chat.history.md` at the git root of the project.

Markdown that aider only appends to (aider/io.py, `append_chat_history`): each run starts
with `# aider chat started at YYYY-MM-DD HH:MM:SS` (local time); the user's input is written
by `user_input` as lines `#### text` ending in two spaces (a markdown line break); aider's
own output (tool results, warnings, confirmations) by `tool_output` & co. as blockquote lines
`> text`, also ending in two spaces; the model's reply by `ai_output` as plain text between
blank lines. A reply can itself hold `####` headings or `>` quotes; only lines that end in
the two spaces aider adds are taken for input or output. Each run is a session
(`aider:<file hash>:<start line>`), its workspace the file's folder.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path

from ..workspace import open_regular, read_fd
from .base import MAX_READ_BYTES, Piece, ReadContext, ReadResult, TranscriptEvent
from .document import FormatError, Numberer, add

SOURCE = "aider"
_START = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")


def read(path: Path, offset: int, ctx: ReadContext) -> ReadResult:
    """Read a whole aider chat history file: one session per run."""
    import os

    fd, st = open_regular(path, follow_symlinks=True)
    try:
        if st.st_size > MAX_READ_BYTES:
            raise FormatError(f"aider chat history is {st.st_size} bytes, over the {MAX_READ_BYTES} "
                              "bytes read at once; not imported")
        text = read_fd(fd, st.st_size, 0).decode("utf-8", errors="replace")
    finally:
        os.close(fd)
    lines = text.split("\n")
    if not any(_START.match(line) for line in lines):
        raise FormatError("no '# aider chat started at' line: not an aider chat history; not imported")
    res = ReadResult()
    tag = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    workspace = str(path.resolve().parent)
    numbers = Numberer()
    sid: str | None = None
    started: int | None = None
    kind: str | None = None  # "user" | "tool" | "assistant": the message being gathered
    buf: list[str] = []
    first = 0

    def flush() -> None:
        nonlocal buf, kind
        body = "\n".join(buf).strip()
        if sid is not None and kind is not None and body:
            piece = Piece("tool_result", body, tool="aider") if kind == "tool" else Piece("text", body)
            add(res, TranscriptEvent(sid, numbers.take(sid), kind, (piece,), time_ms=started,
                                     message_id=f"line {first + 1}"))
        buf, kind = [], None

    for n, line in enumerate(lines):
        m = _START.match(line)
        if m:
            flush()
            sid = f"aider:{tag}:{n + 1}"
            meta = res.session(sid, SOURCE)
            meta.workspace = workspace
            started = _local_ms(m.group(1))
            meta.created_ms = started
            continue
        if line.startswith("#### ") and line.endswith("  ") or line == "####  ":
            this, body = "user", line[5:].rstrip()
        elif line.startswith("> ") and line.endswith("  ") or line == ">  ":
            this, body = "tool", line[2:].rstrip()
        elif not line.strip() and kind in ("user", "tool"):
            flush()  # input and output blocks end at a blank line
            continue
        else:
            this, body = "assistant", line
        if this != kind:
            flush()
            kind, first = this, n
        buf.append(body)
    flush()
    if sid is None:
        raise FormatError("not an aider chat history; not imported")
    return res


def _local_ms(text: str) -> int | None:
    # Aider writes local time without a zone; read it as this machine's local time.
    try:
        return int(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None

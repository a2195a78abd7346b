"""dsh's own output cut, undone: take a stream's whole output from the file dsh names.

dsh's `bash` tool keeps the last 64 KB of a stream and ends it with
`[output truncated; full output: /tmp/dsh-subprocess-XXXXXX/dsh-subprocess-...-stdout.log]`.
That is what reaches `tools/post-execute`, so the reaper reads the named file and stores
the whole output instead of the tail.

The path comes from tool output, which a command (and so the model) can shape. A file is
used only when its name has the form dsh gives these files, it is a regular file of this
user (never a symlink, never on a pseudo-filesystem), it is within the size cap, and the
tail dsh kept is the file's own tail. Anything else leaves the text as it was.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from ...readers.workspace import open_regular, read_fd

MARKER = re.compile(r"\n\[output truncated; full output: (?P<path>[^\]\n]{1,4096})\]")
_STDERR = "[stderr]\n"
_FILE = re.compile(r"dsh-subprocess-[A-Za-z0-9._-]{1,200}\.log")
_DIR = re.compile(r"dsh-subprocess-[A-Za-z0-9._-]{1,200}")
# The kept tail is compared with the file's end over this many chars: enough to tell one
# output from another, cheap on any size (the first kept char may be a cut UTF-8 sequence).
_CHECK_CHARS = 4096
# The least a kept tail must hold to verify anything: dsh keeps kilobytes of a stream it cuts.
_MIN_KEPT = 512


@dataclass(frozen=True)
class Restored:
    """`text` with each verified stream whole again; `paths` that were used."""

    text: str
    paths: tuple[str, ...] = ()


def plausible_path(path: str) -> bool:
    """A path of the form dsh gives its full-output files."""
    if not os.path.isabs(path) or "\x00" in path:
        return False
    head, name = os.path.split(path)
    return bool(_FILE.fullmatch(name)) and bool(_DIR.fullmatch(os.path.basename(head)))


def read_spill(path: str, max_bytes: int) -> str | None:
    """The file's text when it is a plausible dsh spill file of this user within
    `max_bytes`; None otherwise."""
    if not plausible_path(path):
        return None
    try:
        fd, st = open_regular(path, follow_symlinks=False)
    except (OSError, ValueError):
        return None
    try:
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return None
        if st.st_size > max_bytes:
            return None
        data = read_fd(fd, max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        return None
    return data.decode("utf-8", "replace")


def _matches_tail(full: str, kept: str) -> bool:
    """Whether `kept` (dsh's kept tail, maybe starting inside a cut character) is the end
    of `full`. A tail under _MIN_KEPT verifies nothing (dsh cuts only a stream it kept 64 KB of):
    it would let a marker the model printed swap in any spill-named file of the user."""
    if len(kept) < _MIN_KEPT:  # a short tail ("a\n") is the end of half the files there are
        return False
    probe = kept[-_CHECK_CHARS:]
    if len(probe) == len(kept) and len(kept) > 1:
        probe = kept[1:]  # the first kept char may be half of a multi-byte sequence
    return full.endswith(probe) and len(full) + 4 >= len(kept)


def restore_spilled(text: str, read: Callable[[str], str | None]) -> Restored:
    """Replace each `<kept tail>\\n[output truncated; full output: PATH]` whose file
    `read` returns and verifies with the file's whole text. A stream starts at the text's
    start, after the previous marker, or after a `[stderr]` header."""
    out: list[str] = []
    used: list[str] = []
    pos = 0
    for m in MARKER.finditer(text):
        header = text.rfind(_STDERR, pos, m.start())
        seg = header + len(_STDERR) if header >= 0 else pos
        kept = text[seg:m.start()]
        full = read(m.group("path"))
        if full is None or not _matches_tail(full, kept):
            continue
        out.append(text[pos:seg])
        out.append(full)
        used.append(m.group("path"))
        pos = m.end()
    if not used:
        return Restored(text)
    out.append(text[pos:])
    return Restored("".join(out), tuple(used))

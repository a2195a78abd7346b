"""Offloaded text put back where its pointer stands. Pure: the caller supplies `lookup`.

A transcript whose tool results were offloaded (the dsh plugin, the Claude Code hook, the
proxy) records head + note + tail. History should still find what the model no longer
sees, so the importer replaces each pointer form with the object's original text. A note is
only trusted when the object's own head and tail stand exactly around it, so a pasted or
invented note (or one naming another object) changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .offload import NOTE_MARKER

# render_note's wording (search/offload.py): the char range and the id are what we need.
NOTE = re.compile(
    re.escape(NOTE_MARKER)
    + r"[\d,]{1,20} of [\d,]{1,20} chars of this (?:[^\n]{0,300}? )?output "
    r"\(chars (?P<start>\d{1,15})-(?P<end>\d{1,15}), lines \d{1,15}-\d{1,15}\) were moved out of "
    r"the context as object (?P<id>[0-9a-f]{8})\. [^\n]{0,600}?QUERY`\.\]")


@dataclass(frozen=True)
class RestoredText:
    text: str
    ids: tuple[str, ...] = ()


def restore_notes(text: str, lookup: Callable[[str], str | None]) -> RestoredText:
    """`text` with every verified pointer form (head + note + tail of an object that
    `lookup(id)` returns) replaced by the object's whole text."""
    if NOTE_MARKER not in text:
        return RestoredText(text)
    out: list[str] = []
    ids: list[str] = []
    pos = 0
    for m in NOTE.finditer(text):
        if m.start() < pos:
            continue
        original = lookup(m.group("id"))
        if original is None:
            continue
        start, end = int(m.group("start")), int(m.group("end"))
        if not 0 <= start <= end <= len(original):
            continue
        head, tail = original[:start], original[end:]
        sep = "" if not head or head.endswith("\n") else "\n"
        before = head + sep
        after = "\n" + tail
        lo, hi = m.start() - len(before), m.end() + len(after)
        if lo < pos or text[lo:m.start()] != before or text[m.end():hi] != after:
            continue
        out.append(text[pos:lo])
        out.append(original)
        ids.append(m.group("id"))
        pos = hi
    if not ids:
        return RestoredText(text)
    out.append(text[pos:])
    return RestoredText("".join(out), tuple(ids))

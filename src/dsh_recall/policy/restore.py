"""Offloaded text put back where its pointer stands. Pure: the caller supplies `lookup`.

A transcript whose tool results were offloaded (the dsh plugin, the Claude Code hook, the
proxy) records head + note + tail. History should still find what the model no longer
sees, so the importer replaces each pointer form with the object's original text. A note is
only trusted when the object's own head and tail stand exactly around it, so a pasted or
invented note (or one naming another object) changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .offload import NOTE_MARKER, POINTER_NOTE, pointer_span

# The previous release's note (head + note + tail): the char range and the id are what we
# need. The current one is offload.POINTER_NOTE, checked by offload.pointer_span.
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
    notes = sorted([*NOTE.finditer(text), *POINTER_NOTE.finditer(text)], key=lambda m: m.start())
    for m in notes:
        if m.start() < pos:
            continue
        original = lookup(m.group("id"))
        if original is None:
            continue
        span = (pointer_span if m.re is POINTER_NOTE else _old_span)(text, m, original)
        if span is None or span[0] < pos:
            continue
        lo, hi = span
        out.append(text[pos:lo])
        out.append(original)
        ids.append(m.group("id"))
        pos = hi
    if not ids:
        return RestoredText(text)
    out.append(text[pos:])
    return RestoredText("".join(out), tuple(ids))


def _old_span(text: str, m: re.Match[str], original: str) -> tuple[int, int] | None:
    """Where a previous release's pointer form (head + `NOTE` + tail) stands in `text`."""
    start, end = int(m.group("start")), int(m.group("end"))
    if not 0 <= start <= end <= len(original):
        return None
    head, tail = original[:start], original[end:]
    before = head + ("" if not head or head.endswith("\n") else "\n")
    after = "\n" + tail
    lo, hi = m.start() - len(before), m.end() + len(after)
    if lo < 0 or text[lo:m.start()] != before or text[m.end():hi] != after:
        return None
    return lo, hi

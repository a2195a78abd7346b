"""Our entries in a dsh cordis patch (`cordis.patch.yml`), a file dsh's settings editor edits too.

`integrate dsh patch` writes a `- insert:` item holding our two entries (the MCP client row
and the native plugin), between marker comments. dsh's config editor then rewrites the file
when a user saves anything in the web UI: it keeps comments, re-serializes our lines, and
appends its own top-level rows (the preview notice, the theme, the language; an override
row `- id: recall-native` for our card) before the last comment, which is our end marker,
so its rows land inside our markers. So nothing here goes by the markers' span: the file is
read as its top-level items, and only what is ours goes (the insert's entries with our ids,
the override rows for them, the marker lines); every other line stays, byte for byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

SERVER_NAME = "recall"
BEGIN = "# >>> dsh-recall: written by `dsh-recall integrate dsh patch`; `integrate dsh remove` takes it out"
END = "# <<< dsh-recall"
HEAD = "# dsh-recall: "  # the comment our block opens with, after BEGIN
# The entries the patch inserts: dsh's settings editor appends override rows for them.
OUR_IDS = (f"mcp-{SERVER_NAME}", "recall-native")

_ITEM = re.compile(r"-(\s|$)")
_ID = re.compile(r"^\s*(?:-\s+)?id:\s*['\"]?([^'\"\s#]+)")


def _chunks(lines: list[str]) -> list[list[str]]:
    """Top-level pieces: a sequence item (its `- ` line and every indented or blank line
    up to the next top-level line), or one top-level line of anything else."""
    out: list[list[str]] = []
    for line in lines:
        top = bool(line.strip()) and not line[0].isspace()
        if top or not out or not _ITEM.match(out[-1][0]):
            out.append([line])
        else:
            out[-1].append(line)
    # A blank line ending an item belongs to what follows, not to the item.
    fixed: list[list[str]] = []
    for c in out:
        tail: list[str] = []
        if _ITEM.match(c[0]):
            while len(c) > 1 and not c[-1].strip():
                tail.insert(0, c.pop())
        fixed.append(c)
        fixed += [[t] for t in tail]
    return fixed


def _id(lines: list[str]) -> str | None:
    m = _ID.match(lines[0])
    if m:
        return m.group(1)
    # `- name: ...` first, `id:` on a later line of the same item
    indent = len(lines[0]) - len(lines[0].lstrip()) + 2
    for line in lines[1:]:
        if len(line) - len(line.lstrip()) == indent:
            m = _ID.match(line)
            if m:
                return m.group(1)
    return None


def _without_ours_in_insert(item: list[str]) -> list[str] | None:
    """An `- insert:` item without our entries; None when nothing else was in it."""
    head, body = item[0], item[1:]
    entries: list[list[str]] = []
    lead: list[str] = []
    indent: int | None = None
    for line in body:
        lstrip = line.lstrip()
        ind = len(line) - len(lstrip)
        if lstrip.startswith("-") and _ITEM.match(lstrip) and (indent is None or ind == indent):
            indent = ind
            entries.append([line])
        elif entries:
            entries[-1].append(line)
        else:
            lead.append(line)
    kept = [e for e in entries if _id(e) not in OUR_IDS]
    if len(kept) == len(entries):
        return item
    if not kept:
        return None
    return [head, *lead, *(line for e in kept for line in e)]


def strip_ours(text: str) -> tuple[str, int | None]:
    """`text` without our entries, the editor's rows for them and our markers; and where
    our block began (an index into the lines of the result), None when there was none."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    at: int | None = None
    after_begin = False
    for chunk in _chunks(lines):
        first = chunk[0]
        if first.startswith(BEGIN):
            at = len(out) if at is None else at
            after_begin = True
            continue
        if first.startswith(END) or (after_begin and first.startswith(HEAD)):
            at = len(out) if at is None else at
            continue
        after_begin = False
        if _ITEM.match(first):
            if re.match(r"-\s+insert:\s*$", first):
                kept = _without_ours_in_insert(chunk)
                if kept is None:
                    at = len(out) if at is None else at
                    continue
                chunk = kept
            elif _id(chunk) in OUR_IDS:
                at = len(out) if at is None else at
                continue
        out.extend(chunk)
    return "".join(out), at


def mounted_by_hand(text: str) -> bool:
    """Whether `text` mounts dsh-recall without our markers (a mount written by hand)."""
    return BEGIN not in text and (("@deepseek-ai/dsh-mcp-client" in text and f"serverName: {SERVER_NAME}" in text)
                                  or "id: recall-native" in text)


def with_block(old: str, block: str) -> str:
    """`old` with our block (`block`, the patch text) in place of what of ours it held, at
    the same place (else at the end); everything else as it was."""
    rest, at = strip_ours(old)
    lines = rest.splitlines(keepends=True)
    if at is None:
        at = len(lines)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    return "".join(lines[:at]) + f"{BEGIN}\n{block}{END}\n" + "".join(lines[at:])


def replace_private(path: Path, text: str) -> None:
    """Write `path` whole (a temp file renamed over it), readable by the user alone: dsh's
    settings card saves the plugin's embedding key into this patch."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an old temp file left with wider bits
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)

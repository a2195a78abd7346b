"""Code points: surrogates joined or made printable, case folded without moving an offset,
and where a cut would split a visible character.

Everything here counts and slices in Unicode code points. Text that came from JSON may carry
UTF-16 surrogates (a pair for one astral character, or a lone half); `join_surrogates` turns
every valid pair into its one code point first, so no later slice can split a pair, and lone
halves stay single code points that `scrub_surrogates` can make printable without moving any
offset.
"""

from __future__ import annotations

import re
import unicodedata

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def join_surrogates(text: str) -> str:
    """Replace every valid UTF-16 surrogate pair by the code point it encodes (lossless)."""
    if text.isascii() or not _SURROGATE.search(text):  # isascii is O(1) on str
        return text
    return _PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[0][0]) - 0xD800) << 10) + (ord(m[0][1]) - 0xDC00)), text
    )


def scrub_surrogates(text: str) -> str:
    """Lone surrogates -> U+FFFD, one for one, so the text encodes as UTF-8 and offsets hold."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def fold_case(text: str) -> str:
    """Lower-case `text` without changing its length (offsets in the result stay valid)."""
    low = text.lower()
    if len(low) == len(text):  # lower() never shrinks a char, so equal length means 1:1
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def joins_previous(text: str, i: int) -> bool:
    """True when a cut before text[i] would split a visible character (mark, ZWJ sequence)."""
    if i <= 0 or i >= len(text):
        return False
    c, prev = text[i], text[i - 1]
    o = ord(c)
    return (
        unicodedata.combining(c) != 0
        or unicodedata.category(c) in ("Mn", "Me")
        or c == "\u200d" or prev == "\u200d"
        or 0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF  # variation selectors
        or 0x1F3FB <= o <= 0x1F3FF  # emoji skin tones
        or (c == "\n" and prev == "\r")
    )

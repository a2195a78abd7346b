"""The line index's escape map (rank/line_index.build_index) built from the pieces between
the terminal escapes is the one a step per escape built: the same view, offsets and sums."""

from __future__ import annotations

from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.rank.line_index import ANSI, build_index


def reference_escapes(text: str) -> tuple[str, array, array]:
    """The map as it was built before: one Python step per escape."""
    esc_at, esc_cum = array("q"), array("q")
    removed = 0
    for m in ANSI.finditer(text):
        removed += m.end() - m.start()
        esc_at.append(m.end() - removed)
        esc_cum.append(removed)
    return (ANSI.sub("", text) if esc_at else text), esc_at, esc_cum


PIECES = ["\x1b[0m", "\x1b[1;31m", "\x1b[?25l", "\x1b[2K", "\x1bM", "\x1b", "\x1b[", "[0m", "\n",
          "\r\n", "ERROR", " ok ", "\u00e9", "\U0001f600", "x"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=60))
def test_the_escape_map_is_the_one_built_a_step_per_escape(parts):
    text = "".join(parts)
    idx = build_index(text)
    view, esc_at, esc_cum = reference_escapes(text)
    assert (idx.view, list(idx.esc_at), list(idx.esc_cum)) == (view, list(esc_at), list(esc_cum))
    for pos in range(0, len(idx.view) + 1, max(1, len(idx.view) // 7)):
        assert idx.text_offset(pos) >= pos

"""The pure offload policy and line search (no database)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core.codepoints import join_surrogates, scrub_surrogates
from dsh_recall.core.config import ObjectsConfig
from dsh_recall.policy.offload import (
    NOTE_MARKER,
    Candidate,
    make_id,
    plan_offloads,
    render_inline,
)
from dsh_recall.policy.ranges import clamp_range
from dsh_recall.rank.line_index import count_breaks
from dsh_recall.rank.line_search import search_lines

CFG = ObjectsConfig()


def _log(n: int) -> str:
    return "".join(f"step {i}: compiling module_{i}.c\n" for i in range(n))


def test_render_keeps_head_and_tail_and_points_at_the_middle():
    text = _log(400)
    out = render_inline(text, "abcd1234", "Bash", CFG)
    assert out is not None
    assert out.text.startswith(text[:out.head_end])
    assert out.text.endswith(text[out.tail_start:])
    assert out.head_end <= CFG.head_chars
    assert len(text) - out.tail_start <= CFG.tail_chars
    assert "abcd1234" in out.text and NOTE_MARKER in out.text
    # whole lines: the note names the omitted line range, the output's size and the id
    first = text.count("\n", 0, out.head_end) + 1
    last = text.count("\n", 0, out.tail_start)
    assert (f"lines {first}-{last} of 400 ({len(text):,} chars) moved to object abcd1234;"
            in out.text)
    # cut at line boundaries when one is near
    assert text[out.head_end - 1] == "\n" and text[out.tail_start - 1] == "\n"


def test_render_skips_when_pointer_is_not_shorter():
    cfg = ObjectsConfig(threshold_chars=10, head_chars=600, tail_chars=240)
    assert render_inline("x" * 900, "abcd1234", "Bash", cfg) is None


def test_spill_notice_in_tail_is_kept_whole():
    notice = ("(Output too large. Full formatted result stored at: "
              "/home/u/.claude/projects/p/tool-results/abc123.txt)")
    trailer = "x" * 200 + "\n"  # pushes the natural tail start into the middle of the notice
    text = _log(300) + "... " + notice + "\n" + trailer
    cfg = ObjectsConfig(tail_chars=240)
    out = render_inline(text, "abcd1234", "mcp__x__y", cfg)
    assert out is not None
    assert text[out.tail_start:].startswith("... (Output")  # the notice's line, whole
    assert notice in out.text
    assert len(text) - out.tail_start > cfg.tail_chars
    # with no room for it (spill_notice_chars 0) the notice is cut like any text
    bare = render_inline(text, "abcd1234", None, ObjectsConfig(tail_chars=240, spill_notice_chars=0))
    assert notice not in bare.text


def test_plan_keeps_newest_and_skips_offloaded_and_non_text():
    items = [Candidate(0, 9000, 2250), Candidate(1, 100, 25), Candidate(2, 9000, 2250, text=False),
             Candidate(3, 9000, 2250), Candidate(4, 9000, 2250), Candidate(5, 9000, 2250)]
    assert plan_offloads(items, CFG) == [0, 3]
    assert plan_offloads(items, CFG, offloaded={0}) == [3]
    assert plan_offloads(items, ObjectsConfig(keep=0)) == [0, 3, 4, 5]


def test_plan_budget_offloads_oldest_only_while_over_budget():
    items = [Candidate(i, 40_000, 10_000) for i in range(6)]
    cfg = ObjectsConfig(budget_tokens=45_000)
    chosen = plan_offloads(items, cfg)
    assert chosen == [0, 1]  # 60k -> ~50k -> ~40k <= 45k
    assert plan_offloads(items, ObjectsConfig(budget_tokens=1_000_000)) == []


def test_ids_are_short_stable_and_vary():
    a = make_id("s", 1, 100)
    assert len(a) == 8 and int(a, 16) >= 0
    assert a == make_id("s", 1, 100)
    assert len({a, make_id("s", 2, 100), make_id("s", 1, 101), make_id("s", 1, 100, 1)}) == 4


def test_clamp_range_defaults_and_caps():
    assert clamp_range(100_000, None, None) == (0, 8000)
    assert clamp_range(100_000, 10, 10**9) == (10, 24_010)
    assert clamp_range(50, 40, 100) == (40, 50)
    assert clamp_range(50, 80, 10) == (50, 50)


def test_search_literal_first_then_words_then_fuzzy():
    text = ("alpha build ok\n"
            "the build failed badly\n"
            "failed: build of module\n"
            "BUILD FAILED\n"
            "buidl faild\n")
    got = search_lines(text, "build failed")
    # phrase, case-insensitive (ordered within the tier by the log prior: tested apart)
    assert sorted(m.line for m in got[:2]) == [2, 4]
    assert got[2].line == 3  # all words, not as a phrase
    assert 5 not in [m.line for m in got[:3]]
    for m in got:
        assert text[m.offset:m.offset + len(m.text)] == m.text


def test_search_ignores_ansi_and_offsets_point_into_original():
    text = "ok\n[\x1b[1;34mINFO\x1b[m] \x1b[1;31mBUILD FAILURE\x1b[m\nend\n"
    (m,) = [m for m in search_lines(text, "info] build failure")]
    assert m.line == 2 and m.text == "[INFO] BUILD FAILURE"
    assert m.offset == 3


def test_only_newlines_end_lines_and_a_progress_line_shows_the_redraw_hit():
    # issue 10: a bare \r (progress bar) counted as a line end, so numbers disagreed with
    # grep -n, wc -l and editors. \r\n is one line end; a bare \r stays inside its line.
    text = "a\r\nprogress 10%\rprogress 100%\nERROR here\n"
    (m,) = search_lines(text, "error")
    assert m.line == 3 and m.text == "ERROR here"
    (m,) = search_lines(text, "100%")
    assert m.line == 2 and m.text == "progress 100%"
    assert text[m.offset:m.offset + len(m.text)] == m.text
    assert count_breaks(text) == 3 == len(text.splitlines()) - 1


def test_put_note_line_range_counts_newlines_only():
    # issue 10: `lines 14-12380` for a 10,809-line file full of progress redraws.
    text = "".join(f"step {i}\r" * 3 + f"step {i} done\n" for i in range(400))
    out = render_inline(text, "abcd1234", "Bash", CFG)
    assert out is not None
    first = text.count("\n", 0, out.head_end) + 1
    last = first + text.count("\n", out.head_end, out.tail_start - 1)
    assert f"lines {first}-{last} of 400 " in out.text and last <= 400


def test_search_huge_line_returns_window_around_hit():
    text = "x" * 100_000 + "NEEDLE" + "y" * 100_000
    (m,) = search_lines(text, "needle")
    assert "NEEDLE" in m.text and len(m.text) <= 400
    assert text[m.offset:m.offset + len(m.text)] == m.text


# ---- code points ---------------------------------------------------------------------

_PIECES = st.sampled_from([
    "a", "\n", " ", "é", "e\u0301", "\u4e2d\u6587", "\U0001F600", "\U0001F469\u200d\U0001F4BB",
    "\U0001F44D\U0001F3FD", "\ud83d\ude00", "\ud83d", "\ude00", "\u0915\u094d\u0937", "\r\n", "\r",
])
_TEXTS = st.lists(_PIECES, min_size=0, max_size=900).map("".join)


@settings(max_examples=150, deadline=None)
@given(_TEXTS, st.integers(0, 50), st.integers(0, 50))
def test_inline_is_head_plus_note_plus_tail_in_code_points(text, head, tail):
    text = join_surrogates(text)
    cfg = ObjectsConfig(threshold_chars=1, head_chars=head, tail_chars=tail, spill_notice_chars=0)
    out = render_inline(text, "abcd1234", "T", cfg)
    if out is None:
        return
    assert out.head_end <= head
    assert out.text.startswith(text[:out.head_end])
    assert out.text.endswith(text[out.tail_start:])
    assert len(out.text) < len(text)
    # no valid surrogate pair survives the join, so no slice can split one
    for i in range(len(out.text) - 1):
        assert not ("\ud800" <= out.text[i] <= "\udbff" and "\udc00" <= out.text[i + 1] <= "\udfff")
    # no cut lands before a combining mark, a ZWJ or a skin tone
    for cut in (out.head_end, out.tail_start):
        if 0 < cut < len(text):
            assert text[cut] not in ("\u0301", "\u200d", "\u094d", "\U0001F3FD", "\n" if text[cut - 1] == "\r" else "")
            assert text[cut - 1] != "\u200d"
    scrubbed = scrub_surrogates(out.text)
    assert len(scrubbed) == len(out.text)
    scrubbed.encode("utf-8")  # printable


@settings(max_examples=100, deadline=None)
@given(_TEXTS, st.sampled_from(["\u4e2d", "\U0001F600", "e\u0301", "a", "é"]))
def test_search_offsets_are_code_points(text, needle):
    text = join_surrogates(text)
    for m in search_lines(text, needle):
        assert text[m.offset:m.offset + len(m.text.rstrip())] == m.text.rstrip()
        assert count_breaks(text, 0, m.offset) + 1 == m.line


def test_join_surrogates_is_lossless():
    assert join_surrogates("a\ud83d\ude00b") == "a\U0001F600b"
    assert join_surrogates("\ud83d") == "\ud83d"  # a lone half stays one code point
    assert scrub_surrogates("x\ud83dy") == "x\ufffdy"

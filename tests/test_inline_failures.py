"""The inline form of an offloaded result: head + note + failure region + tail, one budget."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.policy.offload import (
    CUT,
    NOTE_MARKER,
    POINTER_NOTE,
    REGION_LINE_MAX,
    pointer_span,
    render_inline,
)
from dsh_recall.policy.restore import restore_notes
from dsh_recall.rank.line_index import build_index
from dsh_recall.services.objects import ObjectService

FIX = Path(__file__).parent / "fixtures" / "inline"
CFG = ObjectsConfig()
_NUMBERED = re.compile(r"^(\d+)\| (.*)$")


def _read(name: str) -> str:
    return (FIX / name).read_bytes().decode("utf-8")


def _parts(text: str, out) -> tuple[str, str, list[str], str]:
    """(head, note, region lines, tail) of a rendered form."""
    note_at = out.text.index(NOTE_MARKER)
    note_end = out.text.index("]\n", note_at) + 1
    body = out.text[note_end + 1:len(out.text) - (len(text) - out.tail_start)]
    if 0 < out.tail_start < len(text) and text[out.tail_start - 1] != "\n":
        assert body.endswith(CUT)  # the tail starts inside a line
        body = body[:-len(CUT)]
    return out.text[:note_at], out.text[note_at:note_end], body.split("\n")[:-1], \
        text[out.tail_start:]


def _check_form(text: str, out, obj_id: str = "ab12cd34", cfg: ObjectsConfig = CFG) -> None:
    """Every property of a rendered form: budget, whole lines, numbered lines that are the
    text's own, the note's id and range, and that search.restore's check takes it back."""
    head, note, region, tail = _parts(text, out)
    lines = build_index(text).view.split("\n")  # region lines are shown without escapes
    # one budget for head + region + tail (the note and cut markers besides)
    head_cut = 0 < out.head_end and text[out.head_end - 1] != "\n"
    tail_cut = 0 < out.tail_start < len(text) and text[out.tail_start - 1] != "\n"
    marks = len(note) + 1 + (len(CUT) + 1 if head_cut else 0) + (len(CUT) if tail_cut else 0)
    assert len(out.text) - marks <= cfg.inline_chars
    assert out.text.startswith(text[:out.head_end]) and out.text.endswith(tail)
    # whole lines unless a single line is over its share, and then marked
    assert out.head_end == 0 or text[out.head_end - 1] == "\n" or \
        out.text[out.head_end:].startswith(CUT + "\n")
    assert text[out.tail_start - 1] == "\n" or \
        out.text[:len(out.text) - len(tail)].endswith(CUT)
    # region lines are the text's own lines, numbered, in file order
    nums = []
    for shown in region:
        m = _NUMBERED.match(shown)
        assert m, shown
        n, body = int(m[1]), m[2]
        orig = lines[n - 1].rstrip("\r").rsplit("\r", 1)[-1]
        assert body == orig or (body.startswith(orig[:REGION_LINE_MAX - 5])
                                and re.search(r"\u2026\[\+[\d,]+ chars\]$", body)), (n, body)
        nums.append(n)
    assert nums == sorted(nums) and tuple(nums) == out.region
    # the note: the id, the omitted line range, the output's size
    m = POINTER_NOTE.fullmatch(note)
    assert m and m["id"] == obj_id
    a, b = int(m["a"]), int(m["b"])
    assert a == text.count("\n", 0, out.head_end) + 1
    assert b == a + text.count("\n", out.head_end, max(out.head_end, out.tail_start - 1))
    assert all(a <= n <= b for n in nums)
    assert f"({len(text):,} chars)" in note
    # search.restore's check finds the whole form and nothing else
    m2 = POINTER_NOTE.search("pre\n" + out.text + "post")
    assert pointer_span("pre\n" + out.text + "post", m2, text) == (4, 4 + len(out.text))
    assert restore_notes("pre\n" + out.text + "post", {obj_id: text}.get).text == \
        "pre\n" + text + "post"


# ---- real-shaped outputs -----------------------------------------------------------------


def test_red_pytest_run_shows_every_failure_without_a_recall():
    text = _read("pytest_red.txt")
    out = render_inline(text, "ab12cd34", "Bash", CFG)
    assert out is not None and out.region
    _check_form(text, out)
    # each failing test's exception message, and the summary with its count
    for msg in ("AssertionError: assert {'threshold':..., 'head': 600}",
                "ZeroDivisionError: division by zero", "AssertionError: case mismatch for alpha",
                "AssertionError: case mismatch for beta", "case mismatch for gamma",
                "AssertionError: assert [4, 3, 2, 1] == [1, 2, 3, 4]", "E       KeyError: 'b'"):
        assert msg in out.text, msg
    assert "7 failed, 120 passed" in out.text
    assert "FAILED red/test_red.py::TestStore::test_keys - KeyError: 'b'" in out.text
    # the passing middle left the context
    assert "test_many_pass[60]" not in out.text


def test_ci_log_shows_the_failing_test_and_its_exception():
    text = _read("ci_gradle_fail.log")  # CRLF line ends, GitHub Actions timestamps
    out = render_inline(text, "ab12cd34", "Bash", CFG)
    assert out is not None
    _check_form(text, out)
    assert "ConsoleClientTest > testClassicParsing() FAILED" in out.text
    assert "NoSuchFileException: ../data/astor_399.log" in out.text
    assert "Set up job" not in out.text.split(NOTE_MARKER)[1]


def test_green_run_is_head_and_tail_with_no_region():
    text = _read("pytest_green.txt")
    out = render_inline(text, "ab12cd34", "Bash", CFG)
    assert out is not None and out.region == ()
    _check_form(text, out)
    head, note, region, tail = _parts(text, out)
    assert region == [] and len(head) <= CFG.head_chars and len(tail) <= CFG.tail_chars
    assert "490 passed" in tail


# ---- properties --------------------------------------------------------------------------

_LINES = st.lists(st.one_of(
    st.sampled_from(["ok step", "PASSED test_x", "", "  at foo.Bar(Bar.java:12)",
                     "ERROR: cannot find symbol", "E       assert 1 == 2",
                     "FAILED tests/test_a.py::test_b - AssertionError", "BUILD FAILED",
                     "Traceback (most recent call last):", "\u4e2d\u6587 \U0001F600 done",
                     "progress 10%\rprogress 100%", "\x1b[31mError:\x1b[0m boom"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
            max_size=120),
    st.integers(200, 3000).map(lambda n: "x" * n)), min_size=1, max_size=400)


@settings(max_examples=120, deadline=None)
@given(_LINES, st.integers(0, 3000), st.integers(0, 900), st.integers(0, 700),
       st.booleans())
def test_any_output_keeps_every_property(lines, budget, head, tail, crlf):
    text = ("\r\n" if crlf else "\n").join(lines) + "\n"
    cfg = ObjectsConfig(inline_chars=budget, head_chars=head, tail_chars=tail,
                        spill_notice_chars=0)
    out = render_inline(text, "ab12cd34", "Bash", cfg)
    if out is None:
        return
    assert len(out.text) < len(text)
    _check_form(text, out, cfg=cfg)


@settings(max_examples=80, deadline=None)
@given(_LINES, st.integers(0, 3000), st.integers(0, 900), st.integers(0, 700),
       st.integers(0, 900))
def test_a_spill_notice_is_kept_whole_only_within_the_budget(lines, budget, head, tail, spill):
    text = "\n".join(lines) + "\nERROR: the build failed\n" + "\n".join(lines) + \
        "\n[output truncated; full output: /tmp/dsh-subprocess-1/x-stdout.log]\n"
    cfg = ObjectsConfig(inline_chars=budget, head_chars=head, tail_chars=tail,
                        spill_notice_chars=spill)
    out = render_inline(text, "ab12cd34", "Bash", cfg)
    if out is not None:
        _check_form(text, out, cfg=cfg)


def test_the_region_keeps_its_room_beside_a_spill_notice():
    # A 1,000-char budget, head 600 + tail 400: no room to pull a long spill notice in
    # whole, so the tail stays in its share and the budget holds.
    text = "".join(f"step {i} ok\n" for i in range(400)) + "ERROR: disk quota exceeded\n" + \
        "".join(f"step {i} ok\n" for i in range(400)) + \
        "[output truncated; full output was stored in " + "x" * 450 + ".log]\n"
    cfg = ObjectsConfig(inline_chars=1000, head_chars=600, tail_chars=400, spill_notice_chars=600)
    out = render_inline(text, "ab12cd34", "Bash", cfg)
    assert out is not None
    _check_form(text, out, cfg=cfg)


# ---- edges -------------------------------------------------------------------------------


def test_a_huge_single_line_is_cut_with_a_marker_and_its_char_range():
    text = "{" + ",".join(f'"k{i}": {i}' for i in range(20_000)) + "}"
    out = render_inline(text, "ab12cd34", "Bash", CFG)
    assert out is not None and out.head_end == CFG.head_chars
    assert out.text[out.head_end:].startswith(CUT + "\n")
    assert f"lines 1-1 (chars {out.head_end}-{out.tail_start}) of 1 " in out.text
    assert out.text[:len(out.text) - (len(text) - out.tail_start)].endswith(CUT)
    _check_form(text, out)


def test_a_huge_failure_line_is_shown_cut_and_says_how_much_is_left():
    text = "".join(f"step {i}\n" for i in range(500)) + "ERROR: " + "y" * 5000 + "\n" + \
        "".join(f"cleanup {i}\n" for i in range(40))
    out = render_inline(text, "ab12cd34", "Bash", CFG)
    assert out is not None and out.region == (501,)
    assert f"501| ERROR: {'y' * (REGION_LINE_MAX - 7)}{CUT}[+4,707 chars]\n" in out.text
    _check_form(text, out)


def test_lone_surrogates_and_invalid_utf8_are_stored_and_shown_as_replacement(tmp_path):
    raw = b"".join(b"line %d \xff\xfe\n" % i for i in range(600)) + b"FAILED test_x\xed\xa0\x80\n"
    text = raw.decode("utf-8", "surrogateescape") + "\ud83d tail\n"
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        res = svc.put(text, session="s", seq=1, tool="Bash")
    assert res.offloaded
    res.inline.encode("utf-8")  # no surrogate left
    assert "\ufffd tail" in res.inline and "FAILED test_x" in res.inline


def test_put_is_idempotent_and_its_note_names_the_stored_object(tmp_path):
    text = _read("pytest_red.txt")
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        a = svc.put(text, session="s", seq=7, tool="Bash")
        b = svc.put(text, session="s", seq=7, tool="Bash")
        again = svc.put(a.inline, session="s", seq=7, tool="Bash")  # the pointer form itself
        other = svc.put(text, session="s", seq=8, tool="Bash")  # same text: blob shared
        assert a == b and a.offloaded and again.inline == a.inline
        assert other.id != a.id and other.inline == a.inline.replace(a.id, other.id)
        m = POINTER_NOTE.search(a.inline)
        assert m["id"] == a.id
        lo, hi = int(m["a"]), int(m["b"])
        got = svc.get(a.id, 0, 24_000).text.split("\n")
        shown = a.inline.split("\n")
        assert shown[lo - 2] == got[lo - 2] and shown[-2] == got[-2]  # head's last, tail's last
        assert 1 < lo <= hi < len(got)
        _check_form(text, render_inline(text, a.id, "Bash", svc.cfg), a.id)


def test_restore_leaves_a_form_whose_region_was_edited():
    text = _read("pytest_red.txt")
    out = render_inline(text, "ab12cd34", "Bash", CFG)
    tampered = out.text.replace("ZeroDivisionError: division by zero",
                                "ZeroDivisionError: division by one", 1)
    assert tampered != out.text
    assert restore_notes(tampered, {"ab12cd34": text}.get).ids == ()

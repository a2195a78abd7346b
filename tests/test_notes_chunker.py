"""The markdown entry chunker: entry boundaries, heading paths, line numbers, hard splits."""

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.chunkers.notes import chunk_markdown

DOC = """# Preferences

- Editor: helix
  - with the default keymap
- Coffee: black, no sugar

## Work
The deploy runs on Fridays.
Never on holidays.

```sh
make deploy

make verify
```

# Empty section
# People
Alice leads the data team.
"""


def test_entries_follow_headings_items_and_paragraphs():
    chunks = chunk_markdown("facts.md", DOC)
    got = [(c.start_line, c.end_line, c.heading, c.kind) for c in chunks]
    assert got == [
        (1, 4, ("Preferences",), "item"),  # the heading is glued to its first entry
        (5, 5, ("Preferences",), "item"),
        (7, 9, ("Preferences", "Work"), "heading"),
        (11, 15, ("Preferences", "Work"), "paragraph"),  # a fence is never cut at its blank line
        (17, 17, ("Empty section",), "heading"),
        (18, 19, ("People",), "heading"),
    ]
    lines = DOC.split("\n")
    for c in chunks:
        assert c.path == "facts.md"
        assert c.text == "\n".join(lines[c.start_line - 1:c.end_line])


def test_setext_headings_and_front_matter():
    text = "---\ntags: [a]\n---\nTitle\n=====\nbody\n\nSub\n---\nmore\n"
    chunks = chunk_markdown("n.md", text)
    assert [(c.start_line, c.heading, c.kind) for c in chunks] == [
        (1, (), "frontmatter"), (4, ("Title",), "heading"), (8, ("Title", "Sub"), "heading")]


def test_only_an_over_long_entry_is_hard_split():
    long_para = "\n".join(f"line {i} " + "word " * 30 for i in range(20))
    text = "- short fact\n\n" + long_para + "\n\n- another fact\n"
    chunks = chunk_markdown("n.md", text, max_chars=400)
    assert chunks[0].text == "- short fact" and chunks[0].kind == "item"
    assert chunks[-1].text == "- another fact"
    pieces = chunks[1:-1]
    assert len(pieces) > 1 and all(c.kind == "piece" for c in pieces)
    assert all(len(c.text) <= 400 for c in pieces)
    assert "\n".join(c.text for c in pieces) == long_para
    assert pieces[0].start_line == 3 and pieces[-1].end_line == 22


def test_a_single_huge_line_is_cut_within_the_budget():
    line = "x" * 50 + " " + "word " * 400
    chunks = chunk_markdown("n.md", line, max_chars=300)
    assert len(chunks) > 1
    assert all(len(c.text) <= 300 and c.start_line == 1 for c in chunks)
    assert "".join(c.text for c in chunks) == line


BLOCKS = st.sampled_from([
    "# Title", "## Sub", "### Deep", "- item", "* star item", "1. numbered", "  - nested",
    "plain text line", "", "", "```", "~~~", "---", "===", "中文的一段笔记", "> quote",
    "| a | b |", "    indented code", "word " * 80,
])


@settings(max_examples=300, deadline=None)
@given(st.lists(BLOCKS, max_size=40), st.integers(min_value=60, max_value=2000))
def test_chunks_partition_the_non_blank_lines(lines, max_chars):
    text = "\n".join(lines)
    chunks = chunk_markdown("p.md", text, max_chars=max_chars)
    src = text.split("\n") if text else []
    covered: set[int] = set()
    last_end = 0
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(src)
        assert len(c.text) <= max(max_chars, 20)
        assert c.text.strip()
        # in file order; only pieces of one long line share a line
        assert c.start_line > last_end or (c.kind == "piece" and c.start_line == last_end)
        last_end = c.end_line
        covered.update(range(c.start_line, c.end_line + 1))
    for i, ln in enumerate(src, 1):
        if ln.strip() and ln.strip() not in ("---", "***", "___") or ln == "===":
            assert i in covered, (i, ln)

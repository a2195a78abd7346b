"""Big whole-file reads in the real dsh runtime, with the native plugin: the next request
carries the file's head and an outline of its declarations by line range instead of the
whole file; a ranged read passes whole; an edit made with the exact text of a ranged read
succeeds. A unit half checks the short form without dsh."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_recall.chunkers.outline import outline
from dsh_recall.frontends.cli.integrate import dsh_patch
from dsh_recall.policy.reads import parse_read, shorten_read, source_text
from dsh_standin import dsh_session, recall_exe, results, runtime_available, say, use


def _module(n: int) -> str:
    """A Python module of n small classes, each with two methods (about 160 chars a class)."""
    return "".join(f"class Store{i}:\n    def get(self, key):\n        return self.data[key] + {i}\n\n"
                   f"    def put(self, key, value):\n        self.data[key] = value * {i}\n\n\n"
                   for i in range(n))


def _as_read(path: str, text: str, first: int = 1) -> str:
    rows = text.split("\n")[:-1]
    body = "".join(f"{first + i}: {r}\n" for i, r in enumerate(rows))
    return (f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n"
            f"(End of file - total {first + len(rows) - 1} lines)\n</content>")


def test_short_form_keeps_the_head_and_says_where_every_declaration_is():
    text = _module(120)
    read = _as_read("/w/store.py", text)
    parsed = parse_read(read)
    assert parsed is not None and parsed.total == len(text.split("\n")) - 1
    entries = outline(source_text(parsed), "python")
    short = shorten_read(read, entries, head_lines=10, outline_chars=6000)
    assert short is not None and len(short) < len(read) / 2
    assert short.startswith("<path>/w/store.py</path>\n<type>file</type>\n<content>\n1: class Store0:\n")
    assert "\n10: " in short and "\n11: " not in short
    # Class 100 starts at line 100 * 8 + 1: its range and its methods' are in the outline.
    assert "\n801-806 Store100: 802 get, 805 put\n" in short
    assert "more declarations" not in short and "offset and limit" in short
    # Over the outline budget: the top level alone, then a count of what is left out.
    big = _as_read("/w/store.py", _module(400))
    tight = shorten_read(big, outline(source_text(parse_read(big)), "python"), 10, 2400)
    assert tight is not None and len(tight) < 4000 and "\n801-806 Store100\n" in tight
    assert "802 get" not in tight and "more declarations (top level shown)" in tight
    # Not the read format, or already short: left alone.
    assert parse_read("plain text") is None
    assert shorten_read(short, entries, 10, 2400) is None


def test_markdown_reads_get_their_headings_as_the_outline():
    text = "".join(f"# Part {i}\n\n" + "words here\n" * 40 + f"## Detail {i}\n\n" + "more\n" * 20
                   for i in range(30))
    read = _as_read("/w/doc.md", text)
    parsed = parse_read(read)
    short = shorten_read(read, outline(source_text(parsed), "markdown"), 5, 4000, parsed)
    assert short is not None and "\n65-128 Part 1: 107 Detail 1\n" in short


@pytest.mark.slow
def test_a_big_read_is_an_outline_and_an_edit_from_a_ranged_read_succeeds(tmp_path):
    why = runtime_available()
    if why:
        pytest.skip(why)
    seen: list[dict] = []
    step = {"n": 0}

    def brain(body):
        seen.append(body)
        step["n"] += 1
        if step["n"] == 1:
            return use("read", {"file_path": "store.py"}, "call_read")
        if step["n"] == 2:
            return use("read", {"file_path": "store.py", "offset": 802, "limit": 2}, "call_range")
        if step["n"] == 3:
            exact = results(body)["call_range"]
            old = "\n".join(line.split(": ", 1)[1] for line in exact.splitlines()
                            if line[:1].isdigit() and ": " in line)
            return use("edit", {"file_path": "store.py", "old_string": old,
                                "new_string": old.replace("+ 100", "+ 1000")}, "call_edit")
        return say("done")

    patch = dsh_patch(command=recall_exe(), env={"DSH_RECALL_HOME": os.environ["DSH_RECALL_HOME"],
                                                 "DSH_RECALL_EMBEDDER__NAME": "fake"})
    with dsh_session(tmp_path, brain, patch) as (session, standin, _home):
        target = Path(tmp_path / "repo" / "store.py")
        target.write_text(_module(200))
        assert session.run("make Store100.get add 1000").final_response == "done"
    whole = results(seen[1])["call_read"]
    assert len(whole) < 8000 and "801-806 Store100" in whole and "\n1: class Store0:" in whole
    ranged = results(seen[2])["call_range"]
    assert "802:     def get(self, key):" in ranged and "803:         return self.data[key] + 100" in ranged
    assert "Error" not in results(seen[3])["call_edit"], results(seen[3])["call_edit"]
    assert "return self.data[key] + 1000\n" in target.read_text()
    # The short form stays short in every later request (nothing re-grows it).
    assert len(results(seen[-1])["call_read"]) == len(whole)


def test_reads_settings_merge_key_by_key_across_sources(_isolated_home):
    # A home file's [reads] and one environment key: both hold (a later table used to
    # replace the earlier one whole, losing the file's head_lines).
    from dsh_recall.core.config import load_config

    (_isolated_home / "config.toml").write_text("[reads]\nhead_lines = 20\n")
    c = load_config(environ={"DSH_RECALL_READS__OUTLINE_CHARS": "900"})
    assert c.reads.head_lines == 20 and c.reads.outline_chars == 900

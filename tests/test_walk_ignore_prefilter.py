"""The walk's one-regex prefilter over a .gitignore never changes what is ignored: it only
skips check_file where no pattern of the file matches."""

from __future__ import annotations

import os

import pathspec
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.readers import workspace as ws

PATTERNS = ["*.pyc", "/build/", "!keep.pyc", "docs/**/tmp", "node_modules/", "*.log", "!important.log",
            "a/b", "/c", "**/gen", "x?y", "[ab]*.txt", "dir/", "!dir/keep/", "\\#literal", "", "# comment",
            "*", "!*.py", "out/**", "!out/keep.txt", "foo/**/bar/"]
NAMES = ["keep.pyc", "x.pyc", "build", "docs", "tmp", "node_modules", "a", "b", "c", "gen", "xzy",
         "a1.txt", "dir", "keep", "#literal", "y.py", "out", "keep.txt", "foo", "bar", "important.log",
         "err.log"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PATTERNS), max_size=8),
       st.lists(st.sampled_from(PATTERNS), max_size=5),
       st.lists(st.sampled_from(NAMES), min_size=1, max_size=5), st.booleans())
def test_prefilter_agrees_with_check_file(top, inner, parts, is_dir):
    base = "/r"
    outer_spec = pathspec.GitIgnoreSpec.from_lines(top)
    inner_spec = pathspec.GitIgnoreSpec.from_lines(inner)
    path = base + "/" + "/".join(parts)
    plain = [(base, outer_spec, None), (base + "/" + parts[0], inner_spec, None)]
    fast = [(b, s, ws._any_pattern(s)) for b, s, _ in plain]
    assert all(f[2] is not None for f in fast)  # the prefilter builds for every pattern here
    assert ws._ignored(fast, path, is_dir) == ws._ignored(plain, path, is_dir)


def test_rel_is_a_slice_under_the_base_and_relpath_elsewhere():
    assert ws._rel("/r/a/b.py", "/r") == "a/b.py"
    assert ws._rel("/r/a/b.py", "/r/a") == "b.py"
    assert ws._rel("/rr/a.py", "/r") == os.path.relpath("/rr/a.py", "/r")  # not under it


def test_a_bracket_holding_group_syntax_is_not_rewritten():
    # pathspec copies a bracket expression verbatim: `[(?P<a>]` ignores files named "a" or
    # "P"; rewriting "(?P<...>" inside it once let those through the prefilter.
    for lines in (["[(?P<a>]"], ["[(?P<ps_d>/)]x"], ["*.log", "[(?P<a>]"]):
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        fast = [("/r", spec, ws._any_pattern(spec))]
        plain = [("/r", spec, None)]
        for name in ("a", "P", "<", "x", "Px", "b.log", "z"):
            for is_dir in (False, True):
                assert ws._ignored(fast, "/r/" + name, is_dir) == ws._ignored(plain, "/r/" + name, is_dir), (lines, name)

"""The walk's RE2 gitignore matcher ignores exactly what pathspec's reference backend does."""

from __future__ import annotations

import os

import pathspec
from hypothesis import assume, given, settings
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
def test_the_re2_matcher_agrees_with_pathspecs_reference(top, inner, parts, is_dir):
    # The walk matches repository patterns with RE2 (linear time); what is ignored must be
    # what pathspec's reference backend (Python's re) says.
    base = "/r"
    path = base + "/" + "/".join(parts)
    inner_base = base + "/" + parts[0]
    fast = [(base, sp) for sp in ws.ignore_spec(top)] + [(inner_base, sp) for sp in ws.ignore_spec(inner)]
    plain = [(base, pathspec.GitIgnoreSpec.from_lines(top, backend="simple")),
             (inner_base, pathspec.GitIgnoreSpec.from_lines(inner, backend="simple"))]
    # The walk never asks about a path below an ignored folder (it does not go in), and
    # there the two backends may differ: `*`, `!*.py` on `keep.pyc/y.py/`.
    for i in range(1, len(parts)):
        assume(not ws._ignored(plain, base + "/" + "/".join(parts[:i]), True))
    assert ws._ignored(fast, path, is_dir) == ws._ignored(plain, path, is_dir)


def test_rel_is_a_slice_under_the_base_and_relpath_elsewhere():
    assert ws._rel("/r/a/b.py", "/r") == "a/b.py"
    assert ws._rel("/r/a/b.py", "/r/a") == "b.py"
    assert ws._rel("/rr/a.py", "/r") == os.path.relpath("/rr/a.py", "/r")  # not under it


def test_a_bracket_holding_group_syntax_matches_as_pathspec_says():
    # pathspec copies a bracket expression verbatim: `[(?P<a>]` ignores files named "a" or "P".
    for lines in (["[(?P<a>]"], ["[(?P<ps_d>/)]x"], ["*.log", "[(?P<a>]"]):
        fast = [("/r", sp) for sp in ws.ignore_spec(lines)]
        plain = [("/r", pathspec.GitIgnoreSpec.from_lines(lines, backend="simple"))]
        for name in ("a", "P", "<", "x", "Px", "b.log", "z"):
            for is_dir in (False, True):
                assert ws._ignored(fast, "/r/" + name, is_dir) == ws._ignored(plain, "/r/" + name, is_dir), (lines, name)


def test_a_gitignore_too_big_for_one_re2_set_is_matched_in_parts(tmp_path):
    # ~3,000 patterns: RE2 cannot compile them as one set, and every walk of the tree failed
    # with an internal error. In parts, the last match still wins, as pathspec says.
    lines = [f"build{i}/**/*.o{i}" for i in range(3000)] + ["!build7/keep/x.o7", "*.tmp"]
    specs = ws.ignore_spec(lines)
    assert len(specs) > 1
    fast = [("/r", sp) for sp in specs]
    plain = [("/r", pathspec.GitIgnoreSpec.from_lines(lines, backend="simple"))]
    for path in ("/r/build7/a/x.o7", "/r/build7/keep/x.o7", "/r/build2999/y/z.o2999", "/r/src/a.py",
                 "/r/src/a.tmp", "/r/build5/q.o6"):
        assert ws._ignored(fast, path, False) == ws._ignored(plain, path, False), path
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    (tmp_path / "build3").mkdir()
    (tmp_path / "build3" / "m.o3").write_text("x")
    (tmp_path / "main.py").write_text("def main():\n    return 1\n")
    rep = ws.walk(tmp_path, [], max_file_bytes=1 << 20)
    assert [f.path for f in rep.files] == [".gitignore", "main.py"]  # build3/m.o3 ignored
    assert not any(p.startswith("internal") for p in rep.problems)

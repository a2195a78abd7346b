"""File-level ranking for `search --files`: a file's evidence is the sum of its chunks'
(with decay), and a test file passes part of its evidence to the source file it tests.

Pure functions over paths, scores and texts; the service supplies a `lookup(path) -> bool`
for "is this path indexed" (one indexed query each), never the whole file list.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence

from .fuse import is_test_path


def aggregate(scores: Iterable[tuple[str, float]], decay: float, top: int) -> dict[str, float]:
    """File scores from (path, chunk score) pairs: the best chunk's score, plus each next
    best chunk's times decay^j (j = 1 .. top - 1). decay 0 or top 1: the best chunk alone."""
    per: dict[str, list[float]] = {}
    for path, s in scores:
        per.setdefault(path, []).append(s)
    out: dict[str, float] = {}
    for path, ss in per.items():
        ss.sort(reverse=True)
        out[path] = sum(s * decay ** j for j, s in enumerate(ss[:max(1, top)]))
    return out


_TEST_AFFIX = re.compile(r"^(?:test_|tests_|test(?=[A-Z]))|(?:_test|_tests|_spec|Test|Tests|Spec)$")


def tested_name(path: str) -> str | None:
    """The name a test file says it tests: test_foo.py, foo_test.go, foo.test.ts,
    foo.spec.js, FooTest.java -> foo / Foo; a plain file inside a test folder -> its stem.
    None for a file that is not a test, or whose name is only "test"."""
    if not is_test_path(path):
        return None
    core = _TEST_AFFIX.sub("", posixpath.basename(path).split(".")[0]).strip("_")
    if not core or core.lower() in ("test", "tests", "conftest", "init", "__init__"):
        return None
    return core


# `from a.b import c, d` / `import a.b` (Python); `from './x'`, `require('../x')` (JS / TS).
_PY_FROM = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+\(?([\w ,\t\\\n]+?)\)?[ \t]*(?:#.*)?$",
                      re.M)
_PY_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w., \t]+?)[ \t]*(?:#.*)?$", re.M)
_JS_IMPORT = re.compile(r"""(?:\bfrom\s*|\brequire\s*\(\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}/[^'"]+)['"]""",
                        re.M)


def python_imports(text: str) -> list[str]:
    """Dotted modules a Python file imports (`from a.b import c` gives a.b and a.b.c, since
    c may be a module); relative imports are left out."""
    out: list[str] = []
    for m in _PY_FROM.finditer(text):
        base = m.group(1)
        if base.startswith("."):
            continue
        out.append(base)
        out += [f"{base}.{n}" for n in re.findall(r"\w+", m.group(2)) if n != "as"]
    for m in _PY_IMPORT.finditer(text):
        out += [part.split()[0] for part in m.group(1).split(",") if part.split()]
    return list(dict.fromkeys(out))


_JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs")


def _leaf_matches(leaf: str, subject: str) -> bool:
    leaf = leaf.lower().replace("_", "")
    return len(leaf) >= 3 and leaf in subject.lower().replace("_", "")


def _package_prefixes(top: str, known: Sequence[str]) -> list[str]:
    """Where the package `top` lives, from paths already known to exist: "src/" for
    src/top/..., "" for top/... (tried first), and the usual roots when nothing says."""
    found: list[str] = []
    for p in known:
        parts = p.split("/")
        for i, part in enumerate(parts[:-1]):
            if part == top:
                found.append("/".join(parts[:i]) + ("/" if i else ""))
                break
        if parts[-1] == top + ".py":
            found.append("/".join(parts[:-1]) + ("/" if len(parts) > 1 else ""))
    return list(dict.fromkeys(found + ["", "src/", "lib/"]))


def is_top_package(path: str) -> bool:
    """The project's own top package (`pkg/__init__.py`, `src/pkg/__init__.py`): a test named
    after the whole project (test_requests.py) says nothing about where in it to look."""
    parts = path.split("/")
    return parts[-1] == "__init__.py" and (len(parts) == 2 or (len(parts) == 3 and parts[0] in ("src", "lib")))


_TEST_FOLDERS = {"test", "tests", "testing", "__tests__", "spec", "specs"}


def tested_files(test_path: str, test_text: str, lookup: Callable[[str], bool],
                 known: Sequence[str] = (), limit: int = 2) -> list[str]:
    """Source files the test file `test_path` tests: the modules it imports whose name is
    part of the test's name (test_assertrewrite.py importing _pytest.assertion.rewrite), else
    a sibling named like it (foo_test.go -> foo.go, foo.test.ts -> foo.ts), else one in the
    folder above a tests folder (pkg/tests/test_foo.py -> pkg/foo.py), else the main
    tree's mirror (src/test/java/a/FooTest.java -> src/main/java/a/Foo.java), else the one
    file of `known` named like it. `lookup` says whether a path is indexed; `known` are paths
    known to exist (the best candidates: package roots, files named like the test)."""
    subject = tested_name(test_path)
    if not subject:
        return []
    out: list[str] = []

    def add(path: str) -> bool:
        if path not in out and path != test_path and not is_test_path(path) \
                and not is_top_package(path) and lookup(path):
            out.append(path)
            return True
        return False

    folder, name = posixpath.split(test_path)
    ext = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if ext in (".py", ".pyi"):
        mods = [m for m in python_imports(test_text) if _leaf_matches(m.rsplit(".", 1)[-1], subject)]
        # the most specific first: a.b.c before a.b
        for mod in sorted(mods, key=lambda m: -m.count(".")):
            parts = mod.split(".")
            for prefix in _package_prefixes(parts[0], [*known, test_path]):
                base = prefix + "/".join(parts)
                # a package: the module inside it named like the test, else its __init__
                # (test_forms.py importing django.forms -> django/forms/forms.py)
                if add(base + ".py") or add(f"{base}/{subject.lower()}.py") \
                        or add(base + "/__init__.py"):
                    break
            if len(out) >= limit:
                return out
    elif ext in _JS_EXTS:
        for rel in _JS_IMPORT.findall(test_text):
            if not _leaf_matches(posixpath.basename(rel).split(".")[0], subject):
                continue
            base = posixpath.normpath(posixpath.join(folder, rel))
            if base.startswith("../"):
                continue
            for cand in ([base] if posixpath.splitext(base)[1] in _JS_EXTS else
                         [base + e for e in _JS_EXTS] + [base + "/index" + e for e in _JS_EXTS]):
                if add(cand):
                    break
            if len(out) >= limit:
                return out
    if not out:
        parent, leaf = posixpath.split(folder)
        if not add(posixpath.join(folder, subject + ext)) and not (
                leaf.lower() in _TEST_FOLDERS and add(posixpath.join(parent, subject + ext))) \
                and not ("/test/" in f"/{folder}/" and add(posixpath.join(
                    f"/{folder}/".replace("/test/", "/main/", 1).strip("/"), subject + ext))):
            # the one known file of that name elsewhere (xarray/tests/test_dataset.py ->
            # xarray/core/dataset.py, when the ranking already holds it)
            same = [k for k in known if posixpath.basename(k) == subject + ext and not is_test_path(k)]
            if len(same) == 1:
                add(same[0])
    return out[:limit]


def resolve_written(paths: Iterable[str], lookup: Callable[[str], bool],
                    present: Iterable[str] = ()) -> list[str]:
    """Indexed files the written paths name. A path with folders matches the indexed path
    equal to its longest suffix of two or more parts (an absolute or site-packages path
    still finds the repository's file); a bare file name matches only a file already among
    the candidates `present` with that name, and only when it is the one such file."""
    present = list(present)
    out: list[str] = []
    for p in paths:
        parts = [x for x in p.split("/") if x not in ("", ".")]
        if len(parts) >= 2:
            for i in range(len(parts) - 1):
                cand = "/".join(parts[i:])
                if lookup(cand):
                    out.append(cand)
                    break
            else:  # not indexed under that name: a candidate ending with it
                tail = "/" + "/".join(parts[-2:])
                got = [f for f in present if ("/" + f).endswith(tail)]
                if len(got) == 1:
                    out.append(got[0])
        elif parts:
            got = [f for f in present if f.rsplit("/", 1)[-1] == parts[0]]
            if len(got) == 1:
                out.append(got[0])
    return list(dict.fromkeys(out))

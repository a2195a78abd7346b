"""Chunkers: cut points, labels, and the coverage property on odd and generated input."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_recall.chunkers import CHUNKER_VERSION, chunk_file, language_for
from dsh_recall.chunkers import languages as langs
from dsh_recall.chunkers.base import split_lines


def covers(text: str, chunks, max_lines: int) -> None:
    """Chunks are in order, cover every non-blank line exactly once, quote their lines."""
    lines = split_lines(text)
    prev = 0
    for c in chunks:
        assert c.start_line > prev, "chunks overlap or are out of order"
        gap = lines[prev : c.start_line - 1]
        assert all(not ln.strip() for ln in gap), f"lines {prev + 1}..{c.start_line - 1} lost"
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
        assert c.end_line - c.start_line + 1 <= max_lines + max_lines // 10
        assert c.text.strip(), "an all-blank chunk was kept"
        prev = c.end_line
    assert all(not ln.strip() for ln in lines[prev:]), "the tail of the file was lost"


def cut(path: str, src: str, max_lines: int = 60):
    src = textwrap.dedent(src).lstrip("\n")
    chunks = chunk_file(path, src, max_lines=max_lines)
    covers(src, chunks, max_lines)
    return chunks


def starts(chunks) -> list[int]:
    return [c.start_line for c in chunks]


def syms(chunks) -> list[tuple[str, ...]]:
    return [c.symbols for c in chunks]


# --- one sample per language -------------------------------------------------------


def test_python_class_split_at_methods_with_comments_and_decorators_attached():
    src = """
    import os

    # Tuning knob.
    LIMIT = 3


    class Cache:
        \"\"\"A tiny cache.\"\"\"

        def __init__(self):
            self.d = {}

        # Looks a key up.
        @staticmethod
        def get(key):
            return key
    """
    chunks = cut("pkg/cache.py", src, max_lines=6)
    # The class header is small: it rides with the first method.
    assert starts(chunks) == [1, 7, 13]
    assert syms(chunks) == [("LIMIT",), ("Cache", "Cache.__init__"), ("Cache.get",)]
    assert chunks[2].text.startswith("    # Looks a key up.\n    @staticmethod")
    assert all(c.language == "python" for c in chunks)
    # With room for everything, one chunk names the class and its methods.
    whole = cut("pkg/cache.py", src)
    assert len(whole) == 1
    assert whole[0].symbols == ("LIMIT", "Cache", "Cache.__init__", "Cache.get")


def test_javascript_functions_and_class():
    src = """
    const fs = require("fs");

    function load(path) {
      return fs.readFileSync(path, "utf8");
    }

    export class Store {
      constructor() { this.items = []; }
      add(x) { this.items.push(x); }
    }

    export const VERSION = "1.0";
    """
    chunks = cut("web/store.js", src, max_lines=4)
    assert starts(chunks) == [1, 3, 7, 12]
    assert syms(chunks) == [("fs",), ("load",), ("Store", "Store.constructor", "Store.add"), ("VERSION",)]


def test_javascript_class_expression_in_a_bundle_is_cut_at_members():
    methods = "\n".join(f"  m{k}() {{\n" + "".join(f"    this.x{i} = {i};\n" for i in range(5)) + "  }" for k in range(3))
    src = f"var Channel = class {{\n  stream;\n  onData = (c) => {{\n    use(c);\n  }};\n{methods}\n}};\n"
    chunks = cut("dist/bundle.js", src, max_lines=9)
    assert syms(chunks) == [("Channel", "Channel.stream", "Channel.onData"), ("Channel.m0",),
                            ("Channel.m1",), ("Channel.m2",)]


def test_typescript_interfaces_types_enums_and_namespaces():
    src = """
    // Shapes we accept.
    export interface Shape {
      area(): number;
    }
    export type Id = string;
    export enum Color { Red, Green }
    namespace Geometry {
      export const PI = 3.14;
    }
    """
    assert syms(cut("src/shape.ts", src)) == [("Shape", "Shape.area", "Id", "Color", "Geometry")]
    chunks = cut("src/shape.ts", src, max_lines=4)
    assert starts(chunks) == [1, 5, 7]
    assert syms(chunks) == [("Shape", "Shape.area"), ("Id", "Color"), ("Geometry",)]
    assert chunks[0].text.startswith("// Shapes")


def test_tsx_component():
    src = """
    import React from "react";

    export function Button({ label }: { label: string }) {
      return <button className="btn">{label}</button>;
    }

    export default function App() {
      return <Button label="hi" />;
    }
    """
    chunks = cut("ui/App.tsx", src, max_lines=4)
    assert language_for("ui/App.tsx") == "tsx"
    assert [c.language for c in chunks] == ["tsx"] * len(chunks)
    assert syms(chunks) == [(), ("Button",), ("App",)]
    assert starts(chunks) == [1, 3, 7]


def test_go_methods_carry_their_receiver_type():
    src = """
    package server

    import "net/http"

    // Server answers requests.
    type Server struct {
    	mux *http.ServeMux
    }

    func (s *Server) Start(addr string) error {
    	return http.ListenAndServe(addr, s.mux)
    }

    const Port, Host = 80, "localhost"
    """
    chunks = cut("server/server.go", src, max_lines=5)
    assert syms(chunks) == [(), ("Server",), ("Server.Start", "Port", "Host")]
    assert starts(chunks) == [1, 5, 10]


def test_rust_impl_and_attributes():
    src = """
    use std::fmt;

    /// A point.
    #[derive(Debug)]
    pub struct Point { x: i32 }

    impl fmt::Display for Point {
        fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "{}", self.x)
        }
    }
    """
    chunks = cut("src/point.rs", src, max_lines=5)
    assert starts(chunks) == [1, 7]
    assert syms(chunks) == [("Point",), ("Point", "Point.fmt")]
    assert "#[derive(Debug)]" in chunks[0].text


def test_java_big_class_is_cut_at_methods():
    body = "\n".join(f"        total += {i};" for i in range(8))
    src = f"""
package demo;

import java.util.List;

/** Sums things. */
public class Summer {{
    private int total;

    public Summer() {{
        total = 0;
    }}

    public int sum(List<Integer> xs) {{
{body}
        return total;
    }}
}}
"""
    chunks = cut("src/Summer.java", src, max_lines=12)
    assert syms(chunks) == [("Summer", "Summer.total", "Summer.Summer"), ("Summer.sum",)]
    assert chunks[1].start_line == 13  # the method, not its class header
    assert chunks[1].text.rstrip().endswith("}\n}")


def test_c_functions_structs_and_macros():
    src = """
    #include <stdio.h>
    #define MAX 10

    struct point { int x, y; };

    static int *find(int *xs, int n) {
        for (int i = 0; i < n; i++)
            if (xs[i] == MAX) return &xs[i];
        return 0;
    }

    int main(void) { return 0; }
    """
    chunks = cut("src/find.c", src, max_lines=5)
    assert starts(chunks) == [1, 6, 12]
    assert syms(chunks) == [("MAX", "point"), ("find",), ("main",)]


def test_cpp_namespace_class_and_include_guard():
    src = """
    #ifndef GEO_H
    #define GEO_H
    namespace geo {
    class Circle {
     public:
      double area() const { return 3.14 * r * r; }
      double r;
    };
    double Circle::perimeter() { return 2 * 3.14 * r; }
    }  // namespace geo
    #endif
    """
    chunks = cut("include/geo.h", src)
    assert chunks[0].language == "cpp"  # a C++ header despite the .h
    assert chunks[0].symbols == ("GEO_H", "geo", "geo.Circle", "geo.Circle.area", "geo.Circle.perimeter")
    small = cut("include/geo.h", src, max_lines=4)
    assert syms(small) == [("GEO_H", "geo", "geo.Circle"), ("geo.Circle.area", "geo.Circle.r"),
                           ("geo.Circle.perimeter",)]


# --- merging, splitting, labels ----------------------------------------------------


def test_small_declarations_merge_with_all_their_names():
    src = "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(30))
    chunks = cut("m.py", src, max_lines=20)
    assert chunks[0].symbols == tuple(f"f{i}" for i in range(7))
    assert [n for c in chunks for n in c.symbols] == [f"f{i}" for i in range(30)]
    assert all(c.kind == "declaration" for c in chunks)


def test_a_10000_line_function_is_cut_into_windows_that_keep_its_name():
    src = "def huge():\n" + "".join(f"    x{i} = {i}\n" for i in range(10_000)) + "\nTAIL = 1\n"
    chunks = cut("big.py", src, max_lines=60)
    windows = [c for c in chunks if c.symbols == ("huge",)]
    assert len(windows) >= 10_001 // 60
    assert all(c.kind == "fragment" for c in windows)
    assert chunks[-1].symbols == ("TAIL",)


def test_long_function_windows_prefer_blank_lines():
    paras = ["\n".join(f"    a{p}_{i} = {i}" for i in range(7)) for p in range(6)]
    src = "def f():\n" + "\n\n".join(paras) + "\n"
    chunks = cut("f.py", src, max_lines=20)
    assert len(chunks) > 1
    # Every cut falls just after a blank line.
    lines = src.split("\n")
    assert all(lines[c.start_line - 2] == "" for c in chunks[1:])


def test_large_class_header_is_its_own_chunk_when_methods_are_big():
    methods = "\n".join(
        f"    def m{k}(self):\n" + "".join(f"        y = {i}\n" for i in range(8)) for k in range(3)
    )
    src = "class Big:\n    X = 1\n    Y = 2\n" + methods
    chunks = cut("big.py", src, max_lines=10)
    assert [c.symbols for c in chunks] == [("Big", "Big.X", "Big.Y"), ("Big.m0",), ("Big.m1",), ("Big.m2",)]
    assert chunks[0].kind in ("header", "declaration")


# --- markdown and text -------------------------------------------------------------


def test_markdown_sections_carry_their_heading_path():
    src = """
    # Tool

    Intro text.

    ## Install

    ### From source

    Run make.

    ```sh
    # not a heading
    make install
    ```

    ## Usage
    Run it.
    Setext title
    ------------
    Body.
    """
    chunks = cut("README.md", src)
    assert syms(chunks) == [
        ("Tool",),
        ("Tool > Install", "Tool > Install > From source"),
        ("Tool > Usage",),
        ("Tool > Setext title",),
    ]
    assert starts(chunks) == [1, 5, 16, 18]
    assert all(c.kind == "heading" for c in chunks)


def test_markdown_long_section_is_split_at_blank_line_blocks():
    paras = "\n\n".join(f"Paragraph {i} line one.\nParagraph {i} line two." for i in range(20))
    src = "# Notes\n\n" + paras + "\n"
    chunks = cut("notes.md", src, max_lines=10)
    assert len(chunks) >= 6
    assert all(c.symbols == ("Notes",) for c in chunks)
    assert all(c.text.startswith(("# Notes", "Paragraph")) for c in chunks)


def test_markdown_front_matter_is_not_a_heading():
    src = "---\ntitle: x\n---\nText\n\n# Real\nbody\n"
    chunks = cut("a.md", src)
    assert syms(chunks) == [(), ("Real",)]


def test_text_blocks_merge_and_long_blocks_split():
    src = "\n\n".join(f"line {i}a\nline {i}b" for i in range(10)) + "\n" + "\n".join(f"log {i}" for i in range(50))
    chunks = cut("app.log", src, max_lines=12)
    assert chunks[0].start_line == 1 and chunks[0].end_line == 11
    assert all(c.language == "log" and c.kind == "block" for c in chunks)


# --- robustness --------------------------------------------------------------------


@pytest.mark.parametrize(
    "path,text",
    [
        ("a.py", ""),
        ("a.py", "\n\n  \n"),
        ("a.py", "def f():\n    return 1"),  # no newline at the end
        ("a.py", "def f():\r\n    return 1\r\n\r\nclass A:\r\n    pass\r\n"),
        ("a.py", "def f(:\n  )))\nclass\n\x00\x00 def g(): pass\n"),
        ("a.go", "func (\n\x00}}}{{{\n"),
        ("a.c", "int f() { return 1;\n" * 50),
        ("a.js", "x" * 200_000 + "\nfunction f() {}\n"),
        ("a.md", "```\n# unterminated fence\n" * 40),
        ("a.txt", "\x00\r\n\u2028\x0b\x0c\n" * 30),
        ("a.py", "def f():\n    s = '\udc80\udcff'\n" * 20),  # undecodable bytes kept as surrogates
    ],
)
def test_odd_inputs_never_raise_and_are_covered(path, text):
    chunks = chunk_file(path, text, max_lines=8)
    covers(text, chunks, 8)


def test_crlf_text_has_no_carriage_returns_and_same_cuts():
    src = "import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n"
    a = chunk_file("a.py", src, max_lines=3)
    b = chunk_file("a.py", src.replace("\n", "\r\n"), max_lines=3)
    assert [(c.start_line, c.end_line, c.symbols, c.text) for c in a] == [
        (c.start_line, c.end_line, c.symbols, c.text) for c in b
    ]


def test_a_grammar_that_fails_to_load_falls_back_to_text(monkeypatch):
    monkeypatch.setattr("dsh_recall.chunkers.code.get_parser", lambda name: None)
    src = "def f():\n    return 1\n\ndef g():\n    return 2\n"
    chunks = chunk_file("a.py", src, max_lines=3)
    covers(src, chunks, 3)
    assert all(c.symbols == () and c.kind == "block" for c in chunks)


def test_language_for_and_version():
    assert language_for("x/y.py") == "python"
    assert language_for("x/y.d.ts") == "typescript"
    assert language_for("C:\\src\\main.CPP") == "cpp"
    assert language_for("docs/guide.md") == "markdown"
    assert language_for("Dockerfile") == "dockerfile"
    assert language_for("notes") == "text"
    assert isinstance(CHUNKER_VERSION, str) and CHUNKER_VERSION
    assert set(langs.GRAMMARS) == {"python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp"}


def test_every_grammar_loads():
    for name in langs.GRAMMARS:
        assert langs.get_parser(name) is not None, name


# --- the coverage property ---------------------------------------------------------

_FRAGMENTS = {
    "a.py": ["def f(x):", "    return x", "class A(B):", "    def m(self):", "        pass", "@dec",
             "# note", '"""doc"""', "X = 1", "import os", "if x:", "    y = (", ")", "try:"],
    "a.ts": ["export class C {", "  m(): void {}", "}", "interface I { a: string }", "function f() {",
             "// c", "const x = 1;", "namespace N {", "type T = number;", "@Dec()", "  return 1;"],
    "a.rs": ["impl A {", "    fn f(&self) {}", "}", "#[test]", "/// doc", "mod m {", "struct S;",
             "fn main() {", "    let x = 1;", "trait T {"],
    "a.cpp": ["namespace n {", "}", "class K {", " public:", "  int f() { return 1; }", "};",
              "#ifdef X", "#endif", "template <class T>", "int g();", "// c"],
    "a.md": ["# H", "## Sub", "text", "```", "~~~", "---", "===", "- item", "", "---"],
    "a.txt": ["log line", "ERROR x", "  indented"],
}

_line = st.one_of(
    st.sampled_from(sorted({ln for v in _FRAGMENTS.values() for ln in v})),
    st.just(""),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(sorted(_FRAGMENTS) + ["a.go", "a.java", "a.c", "a.tsx", "a.js"]),
    lines=st.lists(_line, max_size=80),
    newline=st.sampled_from(["\n", "\r\n"]),
    final=st.booleans(),
    max_lines=st.integers(min_value=1, max_value=25),
)
def test_chunks_always_cover_the_file(path, lines, newline, final, max_lines):
    text = newline.join(lines) + (newline if final and lines else "")
    chunks = chunk_file(path, text, max_lines=max_lines)
    covers(text, chunks, max_lines)


@settings(max_examples=40, deadline=None)
@given(max_lines=st.integers(min_value=1, max_value=40))
def test_coverage_on_real_source(max_lines):
    import dsh_recall.chunkers.code as mod

    text = open(mod.__file__, encoding="utf-8").read()
    chunks = chunk_file("code.py", text, max_lines=max_lines)
    covers(text, chunks, max_lines)
    assert any("chunk_code" in c.symbols for c in chunks)


def test_threads_get_their_own_parsers_and_the_same_answer():
    from concurrent.futures import ThreadPoolExecutor

    import dsh_recall.chunkers.code as mod

    text = open(mod.__file__, encoding="utf-8").read()
    want = chunk_file("code.py", text, max_lines=20)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: chunk_file("code.py", text, max_lines=20), range(8)))
    assert all(g == want for g in got)

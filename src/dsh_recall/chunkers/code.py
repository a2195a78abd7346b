"""Code chunker: cut at declarations found by tree-sitter.

The file is partitioned into units, one per top-level node (nodes sharing a line share a
unit; comments and attributes directly above a node join it). The lines between units
are unlabelled glue. A unit over max_lines is a container (class, impl, namespace, ...)
cut at its members, labelled `Class.member`, or else cut into line windows that keep its
name. Small neighbours, glue included, are then packed up to max_lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .base import Span, pack, split_long
from .languages import get_parser

Node = Any  # tree_sitter.Node, imported lazily

COMMENTS = {"comment", "line_comment", "block_comment"}
# Things that describe the declaration below them.
ATTACHED = COMMENTS | {"attribute_item", "decorator", "marker_annotation", "annotation"}

# Nodes that only wrap a declaration: the field holding it, or None for "last named child".
WRAPPERS: dict[str, str | None] = {
    "decorated_definition": "definition",
    "export_statement": "declaration",
    "template_declaration": None,
    "ambient_declaration": None,
    "expression_statement": None,
}
_WRAPPER_SKIP = {"template_parameter_list", "decorator"} | COMMENTS

# Declarations whose body is cut at its members when they are too long.
CONTAINERS = {
    "class_definition", "class_declaration", "class", "abstract_class_declaration",
    "interface_declaration", "internal_module", "module", "impl_item", "trait_item",
    "mod_item", "enum_declaration", "record_declaration", "annotation_type_declaration",
    "class_specifier", "struct_specifier", "union_specifier", "namespace_definition",
    "linkage_specification", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
}
# Members whose names label a whole (uncut) container chunk as `Class.member`.
FUNCTIONS = {
    "function_definition", "function_declaration", "method_definition", "method_declaration",
    "constructor_declaration", "function_item", "function_signature_item", "method_signature",
    "abstract_method_signature", "function_signature",
}
# Nodes that have a `name` field but declare nothing worth a label.
NO_NAMES = {
    "import_statement", "import_from_statement", "future_import_statement", "import_declaration",
    "preproc_include", "use_declaration", "package_declaration", "package_clause",
    "ERROR", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif",
} | ATTACHED
# Nodes that declare several things through their children.
LISTS = {
    "lexical_declaration", "variable_declaration", "type_declaration", "const_declaration",
    "var_declaration",
}
_IDENT = {"identifier", "field_identifier", "type_identifier", "qualified_identifier",
          "destructor_name", "operator_name", "namespace_identifier"}

_MAX_PARSE_CHARS = 4_000_000
_MAX_AVG_LINE = 1_000  # minified code: one line holds everything, declarations cannot help


def _rows(node: Node) -> tuple[int, int]:
    s, e = node.start_point.row, node.end_point.row
    if e > s and node.end_point.column == 0:  # a node that swallowed its newline
        e -= 1
    return s, e


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def unwrap(node: Node) -> Node:
    """The declaration inside export/decorator/template wrappers."""
    for _ in range(6):
        key = WRAPPERS.get(node.type, "")
        if key == "":
            return node
        inner = node.child_by_field_name(key) if key else None
        if inner is None:
            kids = [c for c in node.named_children if c.type not in _WRAPPER_SKIP]
            if node.type == "expression_statement" and len(kids) != 1:
                return node
            inner = kids[-1] if kids else None
        if inner is None:
            return node
        node = inner
    return node


def _declarator_name(node: Node | None) -> str:
    for _ in range(12):
        if node is None:
            return ""
        if node.type in _IDENT:
            return _text(node)
        inner = node.child_by_field_name("declarator")
        if inner is None and node.named_child_count:
            inner = node.named_children[0]
        node = inner
    return ""


def _clean(name: str) -> str:
    name = name.strip().strip("\"'`").replace("::", ".")
    return name.split("<", 1)[0].strip()


def names_of(node: Node) -> list[str]:
    """The names a top-level node declares ([] for imports, comments, statements)."""
    node = unwrap(node)
    t = node.type
    if t in NO_NAMES:
        return []
    if t == "impl_item":
        ty = node.child_by_field_name("type")
        if ty is not None and ty.type == "generic_type":
            ty = ty.child_by_field_name("type") or ty
        return [_clean(_text(ty))] if ty is not None else []
    key = "property" if t == "field_definition" else "name"  # JS class fields
    names = [n for n in node.children_by_field_name(key) if n.is_named]
    if names:
        out = [_clean(_text(n)) for n in names]
        if t == "method_declaration":  # Go: `func (s *Server) Start()` -> Server.Start
            recv = node.child_by_field_name("receiver")
            m = re.search(r"[A-Za-z_]\w*(?=\s*(?:\[[^\]]*\])?\s*\)\s*$)", _text(recv)) if recv else None
            if m:
                out = [f"{m.group(0)}.{n}" for n in out]
        return [n for n in out if n]
    if t in ("assignment", "assignment_expression"):
        left = node.child_by_field_name("left")
        return [_text(left)] if left is not None and left.type == "identifier" else []
    declarators = node.children_by_field_name("declarator")
    if declarators:
        return [_clean(n) for n in map(_declarator_name, declarators) if n]
    if t in LISTS:
        return [n for c in node.named_children for n in names_of(c)]
    return []


def _members(node: Node) -> list[Node] | None:
    """The member nodes of a container, or None if it is not one."""
    node = unwrap(node)
    if node.type in ("lexical_declaration", "variable_declaration") and node.named_child_count == 1:
        value = node.named_children[0].child_by_field_name("value")
        if value is not None and value.type == "class":  # JS `var Channel = class { ... }`
            node = value
    if node.type not in CONTAINERS:
        return None
    body = node.child_by_field_name("body")
    if body is None:
        if not node.type.startswith("preproc_"):
            return None
        skip = {id(node.child_by_field_name(f)) for f in ("name", "condition")}
        return [c for c in node.named_children if id(c) not in skip]
    out: list[Node] = []
    for c in body.named_children:
        if c.type == "enum_body_declarations":  # Java: the methods after enum constants
            out.extend(c.named_children)
        else:
            out.append(c)
    return out


def _labels(node: Node, prefix: str, depth: int) -> list[str]:
    """Names a whole node declares: its own, its methods as `Class.method`, and for a
    nameless wrapper (`#ifndef` guard, `extern "C"`) everything inside it."""
    own = names_of(node)
    out = [prefix + n for n in own]
    members = _members(node) if depth < 4 else None
    if members:
        inner = prefix + own[0] + "." if own else prefix
        for m in members:
            t = unwrap(m).type
            if not own or t in FUNCTIONS or t in CONTAINERS:
                out.extend(_labels(m, inner, depth + 1))
    return out


@dataclass
class _Unit:
    start: int
    end: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def attached_only(self) -> bool:
        return all(n.type in ATTACHED for n in self.nodes)

    def main(self) -> Node | None:
        decls = [n for n in self.nodes if n.type not in ATTACHED]
        return max(decls, key=lambda n: _rows(n)[1] - _rows(n)[0]) if decls else None


def _units(nodes: list[Node], lo: int, hi: int) -> list[_Unit]:
    units: list[_Unit] = []
    for node in nodes:
        s, e = _rows(node)
        s, e = max(s, lo), min(e, hi)
        if s > e:
            continue
        if units and s <= units[-1].end:
            units[-1].end = max(units[-1].end, e)
            units[-1].nodes.append(node)
        else:
            units.append(_Unit(s, e, [node]))
    # Comments and attributes with no blank line below them belong to what follows.
    for i in range(len(units) - 2, -1, -1):
        u, nxt = units[i], units[i + 1]
        if u.attached_only and nxt.start == u.end + 1:
            nxt.start = u.start
            nxt.nodes[:0] = u.nodes
            del units[i]
    return units


class _Cutter:
    def __init__(self, lines: list[str], max_lines: int):
        self.lines = lines
        self.max_lines = max_lines

    def region(self, nodes: list[Node], lo: int, hi: int, prefix: str, depth: int) -> list[Span]:
        """Spans partitioning lines [lo, hi], cut at the given nodes."""
        spans: list[Span] = []
        cursor = lo
        for u in _units(nodes, lo, hi):
            if u.start > cursor:
                spans.append(Span(cursor, u.start - 1))
            spans.extend(self.unit(u, prefix, depth))
            cursor = u.end + 1
        if cursor <= hi:
            spans.append(Span(cursor, hi))
        return spans

    def unit(self, u: _Unit, prefix: str, depth: int) -> list[Span]:
        if u.end - u.start + 1 <= self.max_lines:
            labels = tuple(dict.fromkeys(n for node in u.nodes for n in _labels(node, prefix, 0)))
            return [Span(u.start, u.end, labels, "declaration" if labels else "block")]
        names = [prefix + n for n in dict.fromkeys(n for node in u.nodes for n in names_of(node))]
        main = u.main()
        members = _members(main) if main is not None else None
        kind = "declaration" if names else "block"
        if members and depth < 8:
            return self.container(u, main, members, names, prefix, depth)
        return split_long(self.lines, Span(u.start, u.end, tuple(names), kind), self.max_lines)

    def container(self, u: _Unit, main: Node, members: list[Node], names: list[str],
                  prefix: str, depth: int) -> list[Span]:
        own = names_of(main)
        inner_prefix = prefix + own[0] + "." if own else prefix
        first = _units(members, u.start, u.end)
        if not first:
            return split_long(self.lines, Span(u.start, u.end, tuple(names), "declaration"), self.max_lines)
        lo = first[0].start
        spans: list[Span] = []
        if lo > u.start:
            header = Span(u.start, lo - 1, tuple(names), "header")
            spans.extend(split_long(self.lines, header, self.max_lines))
        inner = self.region(members, lo, u.end, inner_prefix, depth + 1)
        if lo <= u.start and inner:  # no header lines of its own: the first member carries the name
            inner[0] = Span(inner[0].start, inner[0].end, tuple(dict.fromkeys(tuple(names) + inner[0].symbols)),
                            inner[0].kind, inner[0].mergeable)
        return spans + inner


def chunk_code(lines: list[str], text: str, language: str, max_lines: int) -> list[Span] | None:
    """Spans for a source file, or None when tree-sitter cannot help (no grammar, minified)."""
    if not lines or len(text) > _MAX_PARSE_CHARS or len(text) / len(lines) > _MAX_AVG_LINE:
        return None
    parser = get_parser(language)
    if parser is None:
        return None
    try:
        tree = parser.parse(text.encode("utf-8", "replace"))
    except Exception:  # never let a parser problem cost the file its chunks
        return None
    cutter = _Cutter(lines, max_lines)
    spans = cutter.region(list(tree.root_node.named_children), 0, len(lines) - 1, "", 0)
    return pack(spans, max_lines)

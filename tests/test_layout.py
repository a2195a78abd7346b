"""The layout keeps itself: imports point downward only, no two modules import each other
(directly or round a loop), the two store backends never import each other, and no module
grows past the size a reader can hold (docs/CONTRIBUTING.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "dsh_recall"

# Top to bottom; a room may import from rooms below it (and from itself), never above.
LAYERS = [
    {"frontends"},
    {"services"},
    {"policy"},
    {"rank"},
    {"chunkers"},
    {"readers"},
    {"embedders", "rerankers"},
    {"stores"},
    {"core"},
]
LEVEL = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}

MAX_LINES = 500
# Modules allowed past MAX_LINES, each with its reason (at most three).
LONG_OK: dict[str, str] = {}


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        parts = list(rel.with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield path, rel, ["dsh_recall", *parts], is_pkg


def _imports(path: Path, mod: list[str], is_pkg: bool):
    """Absolute dotted names of every dsh_recall module this file imports (lazy ones too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod if is_pkg else mod[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "dsh_recall":
                target = node.module.split(".")
            else:
                continue
            yield node.lineno, target, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "dsh_recall":
                    yield node.lineno, a.name.split("."), []


def test_every_room_is_in_a_layer():
    rooms = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms <= set(LEVEL), f"rooms without a layer: {sorted(rooms - set(LEVEL))}"


def test_imports_point_downward_only():
    upward = []
    for path, rel, mod, is_pkg in _modules():
        if len(mod) < 3:  # dsh_recall/__init__.py and __main__.py: the public API and the entry
            continue
        room = mod[1]
        for line, target, _names in _imports(path, mod, is_pkg):
            if len(target) < 2 or target[1] not in LEVEL or target[1] == room:
                continue
            if LEVEL[target[1]] < LEVEL[room]:
                upward.append(f"{rel}:{line} imports {'.'.join(target)}")
    assert not upward, "imports that point upward:\n" + "\n".join(upward)


def _graph() -> dict[str, set[str]]:
    """Module -> the dsh_recall modules it imports: every import, the lazy ones and those
    for type checking too (a loop of either still ties the modules together)."""
    mods = {".".join(mod): (path, mod, is_pkg) for path, _rel, mod, is_pkg in _modules()}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, mod, is_pkg) in mods.items():
        for _line, target, names in _imports(path, mod, is_pkg):
            t = ".".join(target)
            subs = [f"{t}.{n}" for n in names if f"{t}.{n}" in mods]
            graph[name].update(x for x in (subs or ([t] if t in mods else [])) if x != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    found = _cycles(_graph())
    assert not found, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_store_backends_never_import_each_other():
    crossing = []
    for path, rel, mod, is_pkg in _modules():
        if mod[1:2] != ["stores"] or len(mod) < 3 or mod[2] not in ("sqlite", "postgres"):
            continue
        other = "postgres" if mod[2] == "sqlite" else "sqlite"
        for line, target, names in _imports(path, mod, is_pkg):
            if target[1:3] == ["stores", other] or (target[1:] == ["stores"] and other in names):
                crossing.append(f"{rel}:{line} imports {'.'.join(target)}")
    assert not crossing, "a store backend imports the other:\n" + "\n".join(crossing)


# Modules directly in services/ beside its packages (__init__ aside): past this, group them
# into a package named for what they hold (docs/CONTRIBUTING.md).
MAX_FLAT_SERVICES = 10


def test_services_holds_packages_more_than_flat_modules():
    flat = sorted(p.name for p in (PKG / "services").glob("*.py") if p.name != "__init__.py")
    assert len(flat) <= MAX_FLAT_SERVICES, (
        f"{len(flat)} modules directly in services/ (at most {MAX_FLAT_SERVICES}): {', '.join(flat)}")


def test_no_module_over_the_size_limit():
    long = []
    for path, rel, _mod, _is_pkg in _modules():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES and str(rel) not in LONG_OK:
            long.append(f"{rel}: {n} lines")
    assert len(LONG_OK) <= 3
    assert not long, f"modules over {MAX_LINES} lines:\n" + "\n".join(long)

"""The two store backends never import each other: what they share lives in
stores/contracts/ (and stores/fts5.py). Read from the source with ast, so a lazy import
inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STORES = Path(__file__).resolve().parents[1] / "src" / "dsh_recall" / "stores"
BACKENDS = ("sqlite", "postgres")


def imported_modules(path: Path, package: str) -> set[str]:
    """Dotted names of every module `path` imports (relative imports resolved against
    `package`, the module's own package)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[:len(parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from . import chunks`
    return out


def test_the_helper_resolves_relative_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from ..sqlite.chunks import X\nfrom . import util\nimport os\n"
                 "def f():\n    from ...core import errors\n")
    got = imported_modules(f, "dsh_recall.stores.postgres")
    assert {"dsh_recall.stores.sqlite.chunks", "dsh_recall.stores.postgres.util", "os",
            "dsh_recall.core"} <= got


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backend_imports_nothing_of_the_other(backend):
    other = next(b for b in BACKENDS if b != backend)
    files = sorted((STORES / backend).glob("*.py"))
    assert files
    bad = {f.name: sorted(m for m in imported_modules(f, f"dsh_recall.stores.{backend}")
                          if m == f"dsh_recall.stores.{other}"
                          or m.startswith(f"dsh_recall.stores.{other}."))
           for f in files}
    assert {k: v for k, v in bad.items() if v} == {}


def test_contracts_import_no_backend():
    files = sorted((STORES / "contracts").glob("*.py"))
    assert len(files) >= 6
    for f in files:
        mods = imported_modules(f, "dsh_recall.stores.contracts")
        assert not [m for m in mods for b in BACKENDS if m.startswith(f"dsh_recall.stores.{b}")], f.name


def test_every_contract_name_loads_and_alone():
    import subprocess
    import sys

    from dsh_recall.stores import contracts

    assert sorted(contracts.__all__) == sorted(contracts._WHERE)
    for name in contracts.__all__:
        assert getattr(contracts, name) is not None
    # An object read's rows load without the chunk, history and lineage ones.
    code = ("import sys\nfrom dsh_recall.stores.contracts import ObjectRow, BlobParts\n"
            "print(sorted(m for m in sys.modules if m.startswith('dsh_recall.stores.contracts')"
            " or m == 'dsh_recall.core.types'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['dsh_recall.stores.contracts', 'dsh_recall.stores.contracts.objects']"

"""numpy, imported on first use.

numpy costs a cold process 0.1-0.2 s to import. A search's lexical layer never needs it, and
its vector layer runs in a worker thread started first (services/code/), so importing it
there overlaps the FTS5 query (which releases the GIL) instead of preceding it. Modules on
that path write `from ..core.lazy import np`; annotations stay strings (PEP 563).
"""

from __future__ import annotations

import importlib
from typing import Any


class _Lazy:
    """Stands for a module until first used; from then on holds the module's names in its
    own __dict__, so a lookup costs what a module attribute costs (no __getattr__ call)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:  # only for names not copied in yet
        module = importlib.import_module(self._name)
        self.__dict__.update(vars(module))
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


np: Any = _Lazy("numpy")

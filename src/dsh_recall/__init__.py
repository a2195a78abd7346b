"""dsh-recall: a local recall engine for AI coding agents.

The handful of names a library user needs (imported lazily, so `import dsh_recall` is cheap):

    from dsh_recall import CodeService, load_config
    svc = CodeService(".", load_config(workspace="."))
    svc.search("where is the retry policy decided")

    from dsh_recall import HistoryService, NotesService, ObjectService, search_all

Every source answers with an `Answer` (hits, notes, the layers that answered, a `Backlog`);
a `Viewer` is the caller's identity (channel) a source filters by.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs a cold CLI about 10 ms to import
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load_config": ("dsh_recall.core.config", "load_config"),
    "Config": ("dsh_recall.core.config", "Config"),
    "RecallError": ("dsh_recall.core.errors", "RecallError"),
    "CodeService": ("dsh_recall.services.code", "CodeService"),
    "HistoryService": ("dsh_recall.services.history", "HistoryService"),
    "NotesService": ("dsh_recall.services.notes", "NotesService"),
    "ObjectService": ("dsh_recall.services.objects", "ObjectService"),
    "search_all": ("dsh_recall.services.federated", "search_all"),
    "Answer": ("dsh_recall.services.base", "Answer"),
    "Backlog": ("dsh_recall.services.base", "Backlog"),
    "Viewer": ("dsh_recall.services.access.channel", "Viewer"),
    "history": ("dsh_recall.services.history", None),  # the history functions (search, show)
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'dsh_recall' has no attribute {name!r}") from None
    import importlib  # here: its import pulls `warnings` into every handed-over call

    mod = importlib.import_module(module)
    return mod if attr is None else getattr(mod, attr)

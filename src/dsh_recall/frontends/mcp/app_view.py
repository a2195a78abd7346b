"""What the tool-handler mixins (sources.py, lineage.py) read of the server (RecallApp in
handlers.py): a read-only view, so they need not import the module that imports them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ...core.config import Config
from .tools import ToolSpec


class AppView(Protocol):
    @property
    def allowed_roots(self) -> list[Path]: ...
    @property
    def available(self) -> dict[str, ToolSpec]: ...

    def fill(self, data: Any, cfg: Config, workspace: Path) -> None: ...

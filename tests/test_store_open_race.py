"""Several processes creating the same database at once: every one opens it, none refuses it
as foreign (the check and the claim happen in one transaction)."""

from __future__ import annotations

import subprocess
import sys

import pytest

OPENERS = {
    "chunks": "from dsh_recall.stores.sqlite.chunks import SqliteChunkStore as S",
    "history": "from dsh_recall.stores.sqlite.history import HistoryStore as S",
    "objects": "from dsh_recall.stores.sqlite.objects import ObjectStore as S",
}


@pytest.mark.parametrize("kind", sorted(OPENERS))
def test_simultaneous_creation(tmp_path, kind):
    code = OPENERS[kind] + "; import sys; from pathlib import Path; S(Path(sys.argv[1]))"
    for round_ in range(6):
        path = tmp_path / f"{kind}-{round_}.sqlite"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE)
                 for _ in range(4)]
        errors = [p.communicate(timeout=120)[1].decode() for p in procs]
        assert all(p.returncode == 0 for p in procs), "\n".join(e for e in errors if e)[-2000:]

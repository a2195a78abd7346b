"""Which repository config files the user trusts (`dsh-recall trust`, like `direnv allow`).

A workspace's `.dsh-recall.toml` comes with the repository, so it is not trusted: only keys
that change ranking and walking inside that workspace apply from it. The user may trust one
exact file; the record holds its resolved path and the SHA-256 of its bytes, so an edited
file (a `git pull` that changes it) is untrusted again until trusted anew.

The record lives in the recall home (`trusted.json`), written atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .errors import InputError
from .paths import recall_home

TRUST_FILE = "trusted.json"


def _record_path(home: Path | None = None) -> Path:
    return (home or recall_home()) / TRUST_FILE


def file_sha(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read(1 << 20)).hexdigest()
    except OSError:
        return None


def _load(home: Path | None = None) -> dict[str, str]:
    try:
        data = json.loads(_record_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _save(data: dict[str, str], home: Path | None = None) -> None:
    target = _record_path(home)
    target.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # only when writing

    fd, tmp = tempfile.mkstemp(prefix=".trusted-", dir=str(target.parent))
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, target)


def is_trusted(path: Path, home: Path | None = None) -> bool:
    """True when the user trusted this exact file (same resolved path, same bytes)."""
    key = str(Path(path).resolve())
    want = _load(home).get(key)
    return want is not None and want == file_sha(Path(key))


def trust(path: Path, home: Path | None = None) -> str:
    """Record `path` (as it is now) as trusted; returns its hash."""
    p = Path(path).resolve()
    if not p.is_file():
        raise InputError(f"{p} is not a file; pass a workspace's .dsh-recall.toml")
    sha = file_sha(p)
    if sha is None:
        raise InputError(f"cannot read {p}")
    data = _load(home)
    data[str(p)] = sha
    _save(data, home)
    return sha


def revoke(path: Path, home: Path | None = None) -> bool:
    """Forget a trusted file; returns whether it was trusted."""
    data = _load(home)
    gone = data.pop(str(Path(path).resolve()), None)
    if gone is not None:
        _save(data, home)
    return gone is not None


def trusted_files(home: Path | None = None) -> dict[str, bool]:
    """Every recorded file -> whether it still matches its recorded hash."""
    return {k: v == file_sha(Path(k)) for k, v in _load(home).items()}

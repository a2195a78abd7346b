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
from .files import open_regular, read_fd, read_regular
from .paths import recall_home, write_private

TRUST_FILE = "trusted.json"


def _record_path(home: Path | None = None) -> Path:
    return (home or recall_home()) / TRUST_FILE


TRUST_MAX_BYTES = 16 << 20  # a config file is a few KB; past this `trust` refuses it


def file_sha(path: Path) -> str | None:
    """SHA-256 of the whole file, read in 1 MiB pieces; None when it is not a readable
    regular file of at most TRUST_MAX_BYTES (then it is never trusted)."""
    try:
        fd, st = open_regular(path, follow_symlinks=True)
    except OSError:
        return None
    try:
        if st.st_size > TRUST_MAX_BYTES:
            return None
        h = hashlib.sha256()
        pos = 0
        while pos <= TRUST_MAX_BYTES:
            chunk = read_fd(fd, 1 << 20, pos)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
            pos += len(chunk)
        return None  # it grew past the bound while read
    except OSError:
        return None
    finally:
        os.close(fd)


def _load(home: Path | None = None) -> dict[str, str]:
    try:
        data = json.loads(read_regular(_record_path(home), 16 << 20, follow_symlinks=True))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _save(data: dict[str, str], home: Path | None = None) -> None:
    write_private(_record_path(home), json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))


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
    try:
        size = p.stat().st_size
    except OSError:
        size = 0
    if size > TRUST_MAX_BYTES:
        raise InputError(f"{p} is {size:,} bytes; a config file to trust may be at most "
                         f"{TRUST_MAX_BYTES:,}")
    sha = file_sha(p)
    if sha is None:
        raise InputError(f"cannot read {p} (not a readable regular file)")
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

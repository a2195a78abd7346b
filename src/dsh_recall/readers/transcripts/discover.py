"""Find transcript files: default locations per harness, or explicit paths and folders."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...core.clean import clean_text, refuse_nul
from ...core.errors import InputError
from ..workspace import is_pseudo_fs, read_regular
from . import aider, claude_code, cline, codex, cursor, dsh, gemini, generic, goose, locations, opencode
from .base import ReadContext, ReadResult, parse_record

_SNIFF_BYTES = 1 << 20  # enough for the first few records of any format
_SUFFIXES = (".jsonl", ".jsonl.zstd", ".jsonl.zst")

Reader = Callable[[Path, int, ReadContext], ReadResult]
READERS: dict[str, Reader] = {
    "dsh": dsh.read,
    "claude-code": claude_code.read,
    "codex": codex.read,
    "generic": generic.read,
    "cursor": cursor.read,
    "gemini": gemini.read,
    "opencode": opencode.read,
    "aider": aider.read,
    "cline": cline.reader("cline"),
    "roo-code": cline.reader("roo-code"),
    "goose": goose.read,
}
# Formats read whole (a rewritten JSON file, a database): imported per session, not by offset.
DOCUMENTS = frozenset({"cursor", "gemini", "opencode", "aider", "cline", "roo-code", "goose"})


def formats() -> list[str]:
    return sorted(READERS)


def reader(fmt: str) -> Reader:
    try:
        return READERS[fmt]
    except KeyError:
        raise InputError(f"unknown transcript format '{fmt}'; valid formats: {', '.join(formats())}") from None


def default_roots() -> dict[str, Path]:
    """Where each harness keeps its transcripts on this machine (may not exist)."""
    dsh_home = Path(os.environ.get("DSH_HOME") or Path.home() / ".dsh").expanduser()
    codex_home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()
    return {
        "dsh": dsh_home / "sessions",
        "claude-code": Path.home() / ".claude" / "projects",
        "codex": codex_home / "sessions",
    }


def _globs(fmt: str) -> list[str]:
    return {
        "dsh": ["**/session.v4.jsonl", "**/session.v4.jsonl.zstd", "**/*.session.v4.jsonl", "**/*.session.v4.jsonl.zstd"],
        "claude-code": ["*/*.jsonl"],
        "codex": ["**/rollout-*.jsonl", "**/rollout-*.jsonl.zst"],
        "generic": ["**/*.jsonl"],
        "cursor": ["**/state.vscdb"],
        "gemini": ["**/session-*.json", "**/session-*.jsonl", "**/chats/*/*.jsonl"],
        "opencode": ["**/opencode*.db"],
        "aider": ["**/.aider.chat.history.md"],
        "cline": ["**/api_conversation_history.json", "**/*.messages.json"],
        "roo-code": ["**/api_conversation_history.json"],
        "goose": ["**/sessions.db", "**/*.jsonl"],
    }[fmt]


def discover_default() -> list[tuple[Path, str]]:
    """Every transcript under the default locations, as (path, format)."""
    out: list[tuple[Path, str]] = []
    for fmt, root in default_roots().items():
        if root.is_dir():
            out.extend(_under(root, fmt))
    return out + locations.defaults()


def _under(root: Path, fmt: str) -> list[tuple[Path, str]]:
    seen: set[Path] = set()
    out = []
    for pattern in _globs(fmt):
        for p in sorted(root.glob(pattern)):
            if p.is_file() and p not in seen:
                seen.add(p)
                out.append((p, fmt))
    return out


def sniff(path: Path) -> str:
    """Guess a file's format from its name, then from its first record."""
    name = path.name
    if ".session.v4." in name or name.startswith("session.v4.") or name.endswith(".zstd"):
        return "dsh"
    if name.startswith("rollout-"):
        return "codex"
    if (known := locations.by_name(path)) is not None:
        return known
    firsts = []
    try:
        head = read_regular(path, _SNIFF_BYTES, follow_symlinks=True)
    except OSError:
        head = b""
    for line in head.split(b"\n")[:5]:
        if line.strip().startswith(b"{"):
            try:
                obj = parse_record(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict):
                firsts.append(obj)
    for first in firsts:
        if isinstance(first.get("sessionId"), str) and isinstance(first.get("projectHash"), str):
            return "gemini"
        if first.get("type") == "session" and "version" in first:
            return "dsh"
        if first.get("type") in ("session_meta", "response_item") and "payload" in first:
            return "codex"
        if "sessionId" in first or (first.get("type") in ("user", "assistant") and "uuid" in first):
            return "claude-code"
        if {"session", "role", "text"} <= first.keys():
            return "generic"
    if ".claude" in path.parts:
        return "claude-code"
    return "generic"


def expand(paths: list[str], fmt: str | None) -> list[tuple[Path, str]]:
    """Explicit files and folders -> (file, format). Folders are searched recursively."""
    out: list[tuple[Path, str]] = []
    for raw in paths:
        p = Path(os.path.expanduser(refuse_nul(clean_text(raw), "transcript path")))
        if is_pseudo_fs(p):
            raise InputError(f"{raw} is on a kernel pseudo-filesystem (/proc, /sys, /dev); "
                             "pass a transcript file or folder")
        if p.is_file():
            out.append((p, fmt or sniff(p)))
        elif p.is_dir():
            if fmt:
                out.extend(_under(p, fmt))
            else:
                out.extend((f, sniff(f)) for f in _files_under(p))
        elif p.exists():
            raise InputError(f"{raw} is not a regular file or a folder")
        else:
            raise InputError(f"no such file or folder: {raw}")
    return out


def _files_under(root: Path) -> list[Path]:
    """Transcript-named regular files under `root`, never following a symlinked folder."""
    out: list[Path] = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not is_pseudo_fs(os.path.join(d, x)))
        out.extend(Path(d) / f for f in files if f.endswith(_SUFFIXES) or locations.by_name(Path(d) / f))
    return sorted(p for p in out if p.is_file())

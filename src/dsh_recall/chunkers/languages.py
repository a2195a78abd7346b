"""Which language a path is, and the tree-sitter grammars behind the code chunker.

Grammars are the official per-language wheels (tree-sitter-python, ...), imported on
first use. A grammar that fails to load gives None and the caller falls back to the
text chunker.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from typing import Any

# language -> (module, function returning the grammar pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}

_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp", ".inl": "cpp", ".tpp": "cpp",
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown", ".mdown": "markdown",
    # Text-chunked, but named so a search can filter on them.
    ".rst": "rst", ".txt": "text", ".log": "log",
    ".json": "json", ".jsonl": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
    ".ini": "ini", ".cfg": "ini", ".xml": "xml", ".html": "html", ".htm": "html",
    ".css": "css", ".scss": "css", ".sql": "sql", ".sh": "shell", ".bash": "shell",
    ".zsh": "shell", ".rb": "ruby", ".php": "php", ".kt": "kotlin", ".kts": "kotlin",
    ".swift": "swift", ".scala": "scala", ".cs": "csharp", ".lua": "lua", ".r": "r",
    ".proto": "protobuf", ".gradle": "gradle", ".cmake": "cmake",
}

_FILENAMES: dict[str, str] = {
    "dockerfile": "dockerfile", "makefile": "make", "gnumakefile": "make",
    "cmakelists.txt": "cmake", "readme": "markdown",
}

# Cheap signs that a .h header is C++ (the C grammar would read these as errors).
_CPP_HINT = re.compile(r"^\s*(?:class|namespace|template\s*<|using\s|public:|private:)", re.M)


def language_for(path: str) -> str:
    """The language of a path from its name: "python", "tsx", "markdown", "text", ..."""
    name = os.path.basename(path.replace("\\", "/")).lower()
    if name in _FILENAMES:
        return _FILENAMES[name]
    if name.endswith(".d.ts"):
        return "typescript"
    _, ext = os.path.splitext(name)
    return _EXTENSIONS.get(ext, "text")


def refine_language(language: str, path: str, text: str) -> str:
    """Correct a guess from the name with a glance at the content (C vs C++ headers)."""
    if language == "c" and path.lower().endswith(".h") and _CPP_HINT.search(text[:200_000]):
        return "cpp"
    return language


_languages: dict[str, Any] = {}
_failed: set[str] = set()
_lock = threading.Lock()
# tree-sitter parsers are not safe to share between threads: one per thread.
_local = threading.local()


def _language(name: str) -> Any | None:
    if name in _languages:
        return _languages[name]
    if name in _failed or name not in GRAMMARS:
        return None
    with _lock:
        if name in _languages:
            return _languages[name]
        try:
            from tree_sitter import Language

            module, fn = GRAMMARS[name]
            lang = Language(getattr(importlib.import_module(module), fn)())
        except Exception:  # a missing or broken wheel: fall back, never crash
            _failed.add(name)
            return None
        _languages[name] = lang
        return lang


def get_parser(name: str) -> Any | None:
    """A cached tree-sitter Parser for a language, or None if its grammar is unavailable."""
    cache = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    if name in cache:
        return cache[name]
    lang = _language(name)
    if lang is None:
        return None
    from tree_sitter import Parser

    parser = cache[name] = Parser(lang)
    return parser

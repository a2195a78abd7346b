"""Where settings come from, before they are validated: TOML files, the environment and a
repository's own file (limited to `WORKSPACE_KEYS` unless the user trusts it), each checked
for unknown keys against the settings model and merged in order (`core.config.load_config`).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError
from .files import read_bounded
from .settings import Section

# Sections whose tables merge key by key (a later file's [embedder] adds to an earlier one's)
# and of which a repository's file may set the keys in WORKSPACE_KEYS (none of [reads]: how
# much of a file dsh shows is the user's to choose).
SECTIONS = {"embedder", "history", "objects", "notes", "mcp", "rerank", "reads", "scrub",
            "lineage", "daemon"}
# Not settings: where data lives, which config file, which session the caller is in, and
# the switches for tracebacks (the CLI's own error message names it), the usage log and
# handing searches to a running daemon (DSH_RECALL_DAEMON=0: never).
RESERVED_ENV = {"DSH_RECALL_HOME", "DSH_RECALL_CONFIG", "DSH_RECALL_SESSION",
                 "DSH_RECALL_CHANNEL", "DSH_RECALL_DEBUG", "DSH_RECALL_USAGE",
                 "DSH_RECALL_DAEMON",
                 # the ledger's model of the dsh profile (services/report/ledger.py)
                 "DSH_RECALL_DSH_INLINE_BYTES", "DSH_RECALL_DSH_COMPACT_RESERVE"}

# What a repository's own `.dsh-recall.toml` may set without the user trusting the file:
# ranking and walking inside that workspace. Everything else chooses where data goes or
# who may see it (embedder endpoint and credentials, notes roots and access, object
# retention, the MCP bind address), or reaches outside the workspace.
WORKSPACE_KEYS = frozenset({
    "source_roots",  # entries inside the workspace only (checked one by one)
    "focus_markers", "ignore", "max_file_bytes", "excerpt_lines", "limit", "candidate_pool",
    "rrf_k", "lexical_weight", "vector_weight", "embed_budget_s", "search_deadline_s",
    "weak_score", "test_weight", "doc_weight", "identifier_boost", "symbol_boost",
    "long_query_words", "config_weight", "file_decay", "file_chunks", "test_transfer",
    "transfer_top", "path_boost",
    "mcp.token_budget",
})


# What no repository file sets, even one the user trusted: where the model may write.
USER_ONLY_KEYS = frozenset({"notes.write_roots"})


def drop_user_only(data: dict[str, Any], path: Path, notices: list[str]) -> dict[str, Any]:
    """`data` of a repository's file without USER_ONLY_KEYS, with a notice naming them."""
    out = dict(data)
    refused = []
    for key in sorted(USER_ONLY_KEYS):
        section, _, name = key.partition(".")
        table = out.get(section)
        if isinstance(table, dict) and name in table:
            out[section] = {k: v for k, v in table.items() if k != name}
            refused.append(key)
    if refused:
        notices.append(f"ignored {', '.join(refused)} from {path}: only your own config "
                       "(the recall home's config.toml, --config, DSH_RECALL_*) may make "
                       "notes writable")
    return out


def _valid_keys(model: type[Section]) -> list[str]:
    return sorted(model.model_fields)


def check_keys(data: dict[str, Any], model: type[Section], where: str, prefix: str = "") -> None:
    for key, value in data.items():
        if key not in model.model_fields:
            raise ConfigError(
                f"unknown config key '{prefix}{key}' in {where}; valid keys: "
                + ", ".join(_valid_keys(model))
            )
        ann = model.model_fields[key].annotation
        if isinstance(ann, type) and issubclass(ann, Section):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{prefix}{key}' in {where} must be a table")
            check_keys(value, ann, where, f"{prefix}{key}.")


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k in SECTIONS:
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


CONFIG_MAX_BYTES = 4 << 20  # a config file is a few KB


def read_toml(path: Path, model: type[Section]) -> dict[str, Any]:
    try:
        data = tomllib.loads(read_bounded(path, CONFIG_MAX_BYTES, "config file").decode("utf-8"))
    except InputError as e:  # missing, a FIFO or a device, unreadable, too large
        raise ConfigError(str(e)) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}") from e
    except RecursionError:
        raise ConfigError(f"config file {path} nests too deeply to read") from None
    check_keys(data, model, str(path))
    return data


def _env_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def from_env(environ: dict[str, str], model: type[Section]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("DSH_RECALL_") or name in RESERVED_ENV:
            continue
        rest = name[len("DSH_RECALL_"):].lower()
        section, _, key = rest.partition("__")
        if key:
            out.setdefault(section, {})[key] = _env_value(raw)
        else:
            out[section] = _env_value(raw)
    check_keys(out, model, "environment (DSH_RECALL_*)")
    return out


def limit_workspace_file(data: dict[str, Any], path: Path, workspace: Path,
                          notices: list[str]) -> dict[str, Any]:
    """Keep only what an untrusted repository file may set; one notice lists what was refused."""
    root = workspace.resolve()
    refused: list[str] = []
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in SECTIONS:
            kept = {k: v for k, v in value.items() if f"{key}.{k}" in WORKSPACE_KEYS}
            refused += [f"{key}.{k}" for k in value if k not in kept]
            if kept:
                out[key] = kept
        elif key == "source_roots" and isinstance(value, list):
            kept_roots = []
            for entry in value:
                _, sep, raw = str(entry).partition("=")
                raw = raw if sep else str(entry)
                p = Path(os.path.expanduser(raw.strip()))
                p = (p if p.is_absolute() else root / p).resolve()
                if p.is_relative_to(root):
                    kept_roots.append(entry)
                else:
                    refused.append(f"source root '{entry}' (outside the workspace)")
            out[key] = kept_roots
        elif key in WORKSPACE_KEYS:
            out[key] = value
        else:
            refused.append(key)
    if refused:
        notices.append(f"ignored {', '.join(refused)} from {path}: a repository's config may only "
                       f"tune ranking and walking inside it; `dsh-recall trust {path}` allows the rest")
    return out

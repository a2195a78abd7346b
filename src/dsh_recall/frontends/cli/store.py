"""`dsh-recall store`: where indexes live, and moving them from SQLite to PostgreSQL."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ...core.errors import InputError
from ...core.paths import recall_home, workspace_dir
from .common import emit, get_config, handle_errors, json_option


@click.group("store")
def store_group() -> None:
    """The index store: embedded SQLite (default) or PostgreSQL + pgvector (`store` config)."""


@store_group.command("migrate")
@click.option("--to", "url", default=None, help="PostgreSQL URL (default: the config's `store`).")
@click.option("--workspace", "workspaces", multiple=True, type=click.Path(file_okay=False),
              help="A workspace whose code index to copy (repeatable; default: the current one).")
@click.option("--notes", is_flag=True, help="Copy every notes index too.")
@click.option("--history", is_flag=True, help="Copy the history store too.")
@click.option("--all", "everything", is_flag=True,
              help="Every code index under the recall home, every notes index and history.")
@click.option("--replace", is_flag=True, help="Overwrite namespaces that already hold data.")
@json_option
@click.pass_context
@handle_errors
def migrate(ctx: click.Context, url: str | None, workspaces: tuple[str, ...], notes: bool,
            history: bool, everything: bool, replace: bool, as_json: bool) -> None:
    """Copy SQLite indexes into PostgreSQL without re-embedding (vectors are copied).

    Then set `store = "<URL>"` (or DSH_RECALL_STORE) so searches use it. Objects stay in the
    local SQLite store and are not copied."""
    from ...services.code import find_workspace
    from ...stores import migrate as mig
    from ...stores import registry

    cfg = get_config(ctx, Path(os.getcwd()).resolve())
    url = url or cfg.store
    if registry.backend(url) != "postgresql":
        raise InputError("no PostgreSQL to copy into: pass --to postgresql://... or set store "
                         "(DSH_RECALL_STORE)")
    home = recall_home()
    code_dbs: list[tuple[str, Path]] = []
    if everything:
        code_dbs = [(d.name, d / "index.sqlite") for d in sorted((home / "workspaces").glob("*"))
                    if (d / "index.sqlite").is_file()]
        notes = history = True
    else:
        for ws in workspaces or ((None,) if not (notes or history) else ()):
            root = find_workspace(Path(ws or os.getcwd()), home)
            d = workspace_dir(root, home)
            if not (d / "index.sqlite").is_file():
                raise InputError(f"no SQLite index for workspace {root}; run `dsh-recall index` first")
            code_dbs.append((d.name, d / "index.sqlite"))
    jobs = [("code", name, path) for name, path in code_dbs]
    if notes:
        jobs += [("notes", p.stem, p) for p in sorted((home / "notes").glob("*.sqlite"))]
    reports = []

    def progress(phase: str, done: int, total: int) -> None:
        if not as_json:
            print(f"\r  {phase} {done}/{total}", end="", file=sys.stderr, flush=True)

    for kind, name, path in jobs:
        ns = registry.code_namespace(name) if kind == "code" else registry.notes_namespace(name)
        dst = registry.chunk_store(url, ns, path)
        # Code vectors also fill the database's shared embedding cache (notes indexes keep
        # using the recall home's cache).
        cache = registry.embed_cache(url, home) if kind == "code" else None
        try:
            reports.append({"kind": kind, "namespace": ns,
                            **mig.copy_chunk_store(path, dst, replace, progress, cache)})
        finally:
            dst.close()
            if cache is not None:
                cache.close()
        if not as_json:
            print(file=sys.stderr)
    if history and (home / "history.sqlite").is_file():
        dst = registry.history_store(url, home / "history.sqlite")
        try:
            reports.append({"kind": "history", "namespace": "history",
                            **mig.copy_history(home / "history.sqlite", dst, replace, progress)})
        finally:
            dst.close()
        if not as_json:
            print(file=sys.stderr)

    def human(rs: list[dict]) -> str:
        if not rs:
            return "nothing to copy"
        lines = [f"{r['kind']:8} {r['namespace']}: " + ", ".join(
            f"{k} {r[k]}" for k in ("files", "sessions", "chunks", "blocks", "vectors", "seconds")
            if k in r) for r in rs]
        return "\n".join(lines + ["searches use them once `store` is set to this URL "
                                  "(config file or DSH_RECALL_STORE)"])

    emit(reports, as_json, human)

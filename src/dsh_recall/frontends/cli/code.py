"""`dsh-recall search | index | status`: code recall from the command line."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ...services.base import match_note
from ...services.code import CodeService, find_workspace
from .common import emit, get_config, handle_errors, json_option


def _workspace(ws: str | None) -> Path:
    """An explicit directory as given; otherwise the workspace enclosing the cwd."""
    return Path(ws).resolve() if ws else find_workspace(Path(os.getcwd()))


_WS_HELP = ("Workspace root (default: walking up from the cwd, the first directory already "
            "indexed or that is a version-control root: a repository never borrows an index "
            "above it; else the cwd).")


def _service(ctx: click.Context, ws: Path, **overrides: Any) -> CodeService:
    return CodeService(ws, get_config(ctx, ws, **overrides))


def render_search(data: dict[str, Any]) -> str:
    # How sure the answer is, when it is not (the value is the service's: base.match_note).
    said = match_note(data.get("match") or "")
    lines: list[str] = [f"-- {said}", ""] if said else []
    for r in data["results"]:
        sym = f"  [{', '.join(r['symbols'][:4])}]" if r["symbols"] else ""
        stale = "  (stale: file changed since indexed)" if r["stale"] else ""
        weak = "  (weak)" if r.get("match") == "weak" else ""
        lines.append(f"== {r['path']}:{r['start_line']}-{r['end_line']}  score {r['score']}"
                     f"{weak}{sym}{stale}")
        if "ranks" in r:
            ranks = ", ".join(f"{k} #{v}" for k, v in r["ranks"].items())
            lines.append(f"   ranks: {ranks}")
        lines.append(r["excerpt"])
        lines.append("")
    if not data["results"]:
        lines.append("no results")
    lines.append(f"-- layers: {', '.join(data['layers']) or 'none'}; pending vectors: "
                 f"{data['pending']}; returned {data['returned_chars']} chars of "
                 f"{data['source_chars']} in the source files")
    for n in data["notes"]:
        lines.append(f"-- note: {n}")
    return "\n".join(lines)


@click.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--workspace", "ws", type=click.Path(file_okay=False), help=_WS_HELP)
@click.option("--path", "path",
              help="Only results under this directory (from the cwd, else the workspace root).")
@click.option("--focus", "focus",
              help="Search inside this scope (from the cwd, else the workspace root; default: "
                   "the project around the cwd, e.g. the folder with its go.mod); a scope that "
                   "finds nothing falls back to the whole workspace. `--focus .`: everything.")
@click.option("--limit", "-n", type=click.IntRange(1, 200), default=None, help="Number of results (1-200).")
@click.option("--files", is_flag=True, help="Rank distinct files (best chunk each).")
@click.option("--explain", is_flag=True, help="Show each ranker's rank per result.")
@click.option("--lexical-only", is_flag=True, help="Skip the vector layer.")
@click.option("--sources", default=None,
              help="Search these sources as one ranked answer, each hit labelled: any of "
                   "code,history,notes,objects (or all).")
@json_option
@click.pass_context
@handle_errors
def search(ctx: click.Context, query: tuple[str, ...], ws: str | None, path: str | None,
           focus: str | None, limit: int | None, files: bool, explain: bool,
           lexical_only: bool, sources: str | None, as_json: bool) -> None:
    """Search code: ranked, bounded excerpts (path, lines, <= 40 lines each). With
    --sources: one answer over code, history, notes and offloaded objects."""
    if not " ".join(query).strip():  # as history and notes do: no silent index + "no results"
        raise click.UsageError("give words to search for, e.g. dsh-recall search \"where is X handled\"")
    if sources is not None:
        from .federated import search_all
        return search_all(ctx, " ".join(query), sources, _workspace(ws), limit, as_json)
    svc = _service(ctx, _workspace(ws))
    layers = ("lexical",) if lexical_only else ("lexical", "vector")
    data = svc.search(" ".join(query), limit=limit, path=path, focus=focus, files=files,
                      explain=explain, cwd=Path.cwd(), layers=layers)
    emit(data, as_json, render_search)


def _progress_bar() -> tuple[Callable[[str, int, int], None] | None, Callable[[], None] | None]:
    """A progress callback drawing on stderr when it is a terminal, else None."""
    if not sys.stderr.isatty():
        return None, None
    state: dict[str, Any] = {}

    def cb(phase: str, done: int, total: int) -> None:
        bar = state.get(phase)
        if bar is None:
            for other in state.values():
                other.__exit__(None, None, None)
            state.clear()
            bar = click.progressbar(length=total, label=phase, file=sys.stderr)
            bar.__enter__()
            state[phase] = bar
        bar.update(done - bar.pos)

    def close() -> None:
        for b in state.values():
            b.__exit__(None, None, None)

    return cb, close


@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--wait", is_flag=True, help="Run in the foreground until done.")
@click.option("--lexical-only", is_flag=True, help="Skip embedding.")
@click.option("--drop", is_flag=True,
              help="Remove DIRECTORY's index instead (e.g. a parent folder indexed by mistake) "
                   "and say what it freed; the embedding cache stays.")
@json_option
@click.pass_context
@handle_errors
def index(ctx: click.Context, directory: str | None, wait: bool, lexical_only: bool,
          drop: bool, as_json: bool) -> None:
    """Index a workspace: lexical first, then vectors. In the background unless --wait.
    `index --drop PATH` removes PATH's index."""
    if drop:
        return _drop(ctx, directory, as_json)
    ws = _workspace(directory)
    svc = _service(ctx, ws)
    if not wait:
        log = svc.dir / "index.log"
        cmd = [sys.executable, "-m", "dsh_recall", "index", str(ws), "--wait", "--json"]
        cfg_file = ctx.find_root().params.get("config_file")
        if cfg_file:
            cmd[3:3] = ["--config", str(Path(cfg_file).resolve())]
        if lexical_only:
            cmd.append("--lexical-only")
        with open(log, "ab") as out:
            import subprocess  # only for a background job

            proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        svc.record_job({"state": "starting", "pid": proc.pid, "started": time.time(),
                        "log": str(log)})
        emit({"background": True, "pid": proc.pid, "log": str(log), "workspace": str(ws)}, as_json,
             lambda d: f"indexing {d['workspace']} in the background (pid {d['pid']}); "
                       f"`dsh-recall status` shows progress, log: {d['log']}")
        return
    cb, close = _progress_bar() if not as_json else (None, None)
    try:
        rep = svc.index(embed=not lexical_only, progress=cb)
    finally:
        if close:
            close()
    emit(rep.as_dict(), as_json, lambda d: (
        f"{d['files']} files ({d['indexed']} indexed, {d['unchanged']} unchanged, "
        f"{d['deleted']} deleted), {d['chunks']} chunks, {d['embedded']} embedded"
        + (f" + {d['reused']} reused from the embedding cache" if d.get("reused") else "")
        + f", {d['pending']} pending, {d['seconds']} s"
        + "".join(f"\nnote: {n}" for n in (d['notes'] or []) + (d['problems'] or []))))


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} bytes"
    for unit in ("KB", "MB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GB"


def _drop(ctx: click.Context, directory: str | None, as_json: bool) -> None:
    """`index --drop PATH`: the path is required (never the cwd's workspace by default)."""
    from ...services.code.drop import drop_index

    if not directory:
        raise click.UsageError("name the workspace whose index to drop: dsh-recall index --drop PATH")
    ws = Path(directory).expanduser().resolve()
    data = drop_index(ws, get_config(ctx, ws if ws.is_dir() else None))
    emit(data, as_json, lambda d: (
        f"no code index for {d['workspace']} (`dsh-recall report` lists the indexed workspaces)"
        if not d["dropped"] else
        f"dropped the code index of {d['workspace']}: {d['files']} files, {d['chunks']} chunks; "
        f"freed {_size(d['freed_bytes'])}"
        + (" (its namespace in the PostgreSQL store emptied too)" if d["store"] == "postgresql" else "")))


def _embedder_line(e: dict[str, Any]) -> str:
    line = f"{e['name']} ({e.get('fingerprint') or 'not loaded'})"
    if "endpoint_ok" in e:
        line += f"; endpoint {'answered' if e['endpoint_ok'] else 'did not answer'}: {e.get('endpoint', '')}"
    if e.get("error"):
        line += f"; unavailable: {e['error']}"
    return line


def _job_line(j: dict[str, Any]) -> str:
    line = j["state"]
    if j["state"] in ("starting", "running"):
        if j.get("total"):
            line += f" ({j.get('phase')} {j.get('done')}/{j.get('total')})"
        line += f", pid {j.get('pid')}"
        if j.get("log"):
            line += f", log {j['log']}"
    elif j.get("report"):
        line += " - " + ", ".join(f"{k} {v}" for k, v in j["report"].items())
    if j.get("error"):
        line += f" - {j['error']}"
    if j["state"] == "interrupted":
        line += " (the indexer stopped before finishing; run `dsh-recall index` again)"
    return line


def render_status(d: dict[str, Any]) -> str:
    db = (f"{d['database']} ({d['index_bytes']} bytes)" if d["indexed"] or d["index_bytes"]
          else f"none yet ({d['database']} once indexed)")
    lines = [f"workspace  {d['workspace']}", f"database   {db}",
             f"files      {d['files']}   chunks {d['chunks']}   vectors {d['vectors']}   pending {d['pending']}",
             "embedder   " + _embedder_line(d["embedder"]),
             f"index of   embedder {d['fingerprint']['embedder'] or '-'}, chunker {d['fingerprint']['chunker'] or '-'}",
             "roots      " + ", ".join(f"{r['label'] or '.'}={r['path']}" for r in d["roots"]),
             "scopes     " + (", ".join(d["scopes"]) or "(none)")]
    job = d.get("job") or {}
    if job.get("state", "idle") != "idle":
        lines.append("job        " + _job_line(job))
    if d["skipped"]:
        lines.append("skipped    " + ", ".join(f"{k}: {v}" for k, v in sorted(d["skipped"].items())))
    lines += [f"problem    {p}" for p in d["problems"]]
    if not d["indexed"]:
        lines.append("not indexed yet: run `dsh-recall index` (or just search)")
    return "\n".join(lines)


@click.command()
@click.option("--workspace", "ws", type=click.Path(file_okay=False), help=_WS_HELP)
@click.option("--no-probe", is_flag=True, help="Do not probe a remote embedding endpoint.")
@json_option
@click.pass_context
@handle_errors
def status(ctx: click.Context, ws: str | None, no_probe: bool, as_json: bool) -> None:
    """Index status: files, chunks, pending vectors, size, fingerprint, roots, scopes.
    Looking never creates an index: a folder never indexed is reported as such."""
    from ...services.code.status import has_index, unindexed_status

    where = _workspace(ws)
    if not has_index(where):
        emit(unindexed_status(where, get_config(ctx, where)), as_json, render_status)
        return
    emit(_service(ctx, where).status(probe=not no_probe), as_json, render_status)

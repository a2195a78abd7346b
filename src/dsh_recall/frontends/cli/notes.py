"""`dsh-recall notes index | search | eval | status`: markdown memory from the command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ...services.access.channel import Viewer, channel_key_from_env
from ...services.base import match_note
from ...services.notes import NotesService, remember_roots
from .common import emit, get_config, handle_errors, json_option


def _service(ctx: click.Context, roots: tuple[str, ...] | list[str]) -> NotesService:
    ws = Path(os.getcwd()).resolve()
    return NotesService(get_config(ctx, ws), roots=list(roots) or None, workspace=ws)


@click.group()
def notes() -> None:
    """Notes: hybrid search over markdown memory, with access levels that fail closed."""


def _render_index(d: dict[str, Any]) -> str:
    if d.get("background"):
        return (f"indexing notes in the background (pid {d['pid']}); log: {d['log']}")
    out = (f"{d['files']} notes ({d['indexed']} re-chunked, {d['unchanged']} unchanged, "
           f"{d['deleted']} deleted), {d['chunks']} chunks, {d['embedded']} embedded, "
           f"{d['pending']} pending, {d['seconds']} s")
    return out + "".join(f"\nnote: {n}" for n in d["notes"] + d["problems"])


@notes.command("index")
@click.argument("roots", nargs=-1, type=click.Path())
@click.option("--wait", is_flag=True, help="Run in the foreground until done.")
@click.option("--accept-spec-change", is_flag=True,
              help="Re-chunk (and re-embed) every note after the chunking rules changed.")
@click.option("--lexical-only", is_flag=True, help="Skip embedding.")
@json_option
@click.pass_context
@handle_errors
def index_cmd(ctx: click.Context, roots: tuple[str, ...], wait: bool, accept_spec_change: bool,
              lexical_only: bool, as_json: bool) -> None:
    """Index note roots (config's, else the ones last indexed). In the background unless --wait.

    Roots given here become the default for later notes commands while notes.roots is unset.
    """
    svc = _service(ctx, roots)
    if roots:
        remember_roots(svc.roots, svc.home)
    if not wait:
        log = svc.dir / f"{svc.key}.log"
        cmd = [sys.executable, "-m", "dsh_recall"]
        cfg_file = ctx.find_root().params.get("config_file")
        if cfg_file:
            cmd += ["--config", str(Path(cfg_file).resolve())]
        cmd += ["notes", "index", *[str(r) for r in svc.roots], "--wait", "--json"]
        if accept_spec_change:
            cmd.append("--accept-spec-change")
        if lexical_only:
            cmd.append("--lexical-only")
        with open(log, "ab") as out:
            import subprocess  # only for a background job

            proc = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        emit({"background": True, "pid": proc.pid, "log": str(log),
              "roots": [str(r) for r in svc.roots]}, as_json, _render_index)
        return
    try:
        rep = svc.index(accept_spec_change=accept_spec_change, embed=not lexical_only)
    finally:
        svc.close()
    emit(rep, as_json, _render_index)


def _render_search(d: dict[str, Any]) -> str:
    said = match_note(d.get("match") or "")
    lines: list[str] = [f"-- {said}", ""] if said else []
    for r in d["results"]:
        head = f" [{r['heading']}]" if r["heading"] else ""
        stale = "  (stale: edited since indexed)" if r.get("stale") else ""
        weak = "  (weak)" if r.get("match") == "weak" else ""
        lines.append(f"== {r['path']}:{r['start_line']}-{r['end_line']}{head}  {r['level']}  "
                     f"score {r['score']}{weak}{stale}")
        if "evidence" in r:
            lines.append(f"   evidence {r['evidence']}: coverage {r['coverage']}, "
                         f"cosine {r['cosine']}")
        lines.append(r["text"])
        lines.append("")
    if not d["results"]:
        lines.append("no results")
    lines.append(f"-- layers: {', '.join(d['layers']) or 'none'}; access: {d['access']['channel']}; "
                 f"pending vectors: {d['pending']}")
    lines += [f"-- note: {n}" for n in d["notes"]]
    return "\n".join(lines)


@notes.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--root", "roots", multiple=True, type=click.Path(),
              help="Search the index of these roots (repeatable; default: config's roots).")
@click.option("--session", default=None, help="Session key (for access levels; default: $DSH_RECALL_CHANNEL).")
@click.option("--limit", "-n", type=click.IntRange(1, 200), default=None, help="Number of results.")
@click.option("--explain", is_flag=True, help="Show ranks, cosine and term coverage.")
@click.option("--lexical-only", is_flag=True, help="Skip the vector layer.")
@json_option
@click.pass_context
@handle_errors
def search_cmd(ctx: click.Context, query: tuple[str, ...], roots: tuple[str, ...],
               session: str | None, limit: int | None, explain: bool, lexical_only: bool,
               as_json: bool) -> None:
    """Search notes: ranked passages with file, lines, heading path, level and score."""
    svc = _service(ctx, roots)
    try:
        layers = ("lexical",) if lexical_only else ("lexical", "vector")
        viewer = Viewer(svc.cfg, session or channel_key_from_env())
        data = svc.search(" ".join(query), viewer=viewer, limit=limit, layers=layers, explain=explain)
    finally:
        svc.close()
    emit(data, as_json, _render_search)


@notes.command("recall")
@click.argument("message", nargs=-1, required=True)
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Index of these roots.")
@click.option("--session", default=None, help="Session key (for access levels; default: $DSH_RECALL_CHANNEL).")
@json_option
@click.pass_context
@handle_errors
def recall_cmd(ctx: click.Context, message: tuple[str, ...], roots: tuple[str, ...],
               session: str | None, as_json: bool) -> None:
    """The auto-recall block for a message (empty when nothing is relevant enough)."""
    svc = _service(ctx, roots)
    try:
        block = svc.auto_recall(" ".join(message),
                                viewer=Viewer(svc.cfg, session or channel_key_from_env()))
    finally:
        svc.close()
    emit({"block": block}, as_json, lambda d: d["block"])


def _render_eval(d: dict[str, Any]) -> str:
    lines = [f"{d['cases']} cases, layers {', '.join(d['layers'])}: hit@1 {d['hit@1']:.3f}  "
             f"hit@3 {d['hit@3']:.3f}  hit@5 {d['hit@5']:.3f}  mrr {d['mrr']:.3f}"]
    for m in d["misses"]:
        lines.append(f"  miss (rank {m['rank'] or '-'}): {m['query']!r} -> top {m['top']}")
    lines += [f"note: {n}" for n in d["notes"]]
    return "\n".join(lines)


@notes.command("eval")
@click.argument("cases", type=click.Path(exists=True, dir_okay=False))
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Index of these roots.")
@click.option("--layers", type=click.Choice(["hybrid", "lexical", "vector"]), default="hybrid",
              help="Which layers to rank with.")
@json_option
@click.pass_context
@handle_errors
def eval_cmd(ctx: click.Context, cases: str, roots: tuple[str, ...], layers: str,
             as_json: bool) -> None:
    """Top-1/3/5 hit rates on your own cases file (question -> expected file or passage)."""
    svc = _service(ctx, roots)
    try:
        chosen = ("lexical", "vector") if layers == "hybrid" else (layers,)
        data = svc.evaluate(cases, layers=chosen)
    finally:
        svc.close()
    emit(data, as_json, _render_eval)


def _render_status(d: dict[str, Any]) -> str:
    roots = ", ".join(f"{r['path']}{'' if r['ok'] else ' (missing)'}" for r in d["roots"])
    spec = d["spec"]
    lines = [f"roots: {roots or 'none'}",
             f"index: {d['database']}" + ("" if d["indexed"] else " (not built yet)"),
             f"{d['files']} notes, {d['chunks']} chunks, {d['vectors']} vectors, "
             f"{d['pending']} pending; embedder {d['embedder']['name']}",
             f"chunk spec: {spec['index']}" + (f" (current {spec['current']}: "
                                               f"{spec['pending_notes']} notes to re-chunk)"
                                               if spec["pending"] else "")]
    if d["access"]["session_map"]:
        lines.append(f"access: session map {d['access']['session_map']}, "
                     f"{d['access']['owners']} owner ids")
    lines += [f"problem: {p}" for p in d["problems"]]
    return "\n".join(lines)


@notes.command("status")
@click.option("--root", "roots", multiple=True, type=click.Path(), help="Index of these roots.")
@json_option
@click.pass_context
@handle_errors
def status_cmd(ctx: click.Context, roots: tuple[str, ...], as_json: bool) -> None:
    """Notes index status: roots, files, chunks, vectors, chunk spec, problems."""
    svc = _service(ctx, roots)
    try:
        data = svc.status()
    finally:
        svc.close()
    emit(data, as_json, _render_status)


# Writable memory: save, supersede, forget (defined beside, in notes_write.py).
from .notes_write import forget_cmd, save_cmd, supersede_cmd  # noqa: E402 - after the group

for _cmd in (save_cmd, supersede_cmd, forget_cmd):
    notes.add_command(_cmd)

"""`dsh-recall object put|get|search|stats|gc`: offloaded tool results from the shell."""

from __future__ import annotations

import os
import stat
import sys
from typing import Any

import click

from ...core.errors import InputError
from ...core.files import read_regular
from ...services.objects import ObjectService
from ...services.objects.types import line_range
from .common import emit, get_config, handle_errors, json_option


def _service(ctx: click.Context, config: bool = True) -> ObjectService:
    """The service; `config=False` for reads by id, which no config key changes (so they
    start without loading and validating the config)."""
    return ObjectService(get_config(ctx).objects, scrub=get_config(ctx).scrub) if config else ObjectService()


def _read_input(file: str, cap: int) -> bytes:
    """FILE's bytes (or stdin's for -), at most `cap`: a bad path or a too-big input is a
    one-line InputError, never a traceback."""
    name = click.format_filename(file)
    too_big = (f"{name} is over the object store's cap of {cap:,} bytes "
               "(objects.max_object_bytes); nothing was stored")
    try:
        if file == "-":
            raw = sys.stdin.buffer.read(cap + 1)
        else:
            st = os.stat(file)
            if stat.S_ISDIR(st.st_mode):
                raise InputError(f"{name} is a directory; give a file, or - for stdin")
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block or never end
                raise InputError(f"{name} is not a regular file; give a file, or pipe it to - (stdin)")
            if stat.S_ISREG(st.st_mode) and st.st_size > cap:
                raise InputError(f"{name} is {st.st_size:,} bytes, over the object store's cap "
                                 f"of {cap:,} bytes (objects.max_object_bytes); nothing was stored")
            raw = read_regular(file, cap + 1, follow_symlinks=True)  # no FIFO swapped in since
    except OSError as e:
        raise InputError(f"cannot read {name}: {e.strerror or e}") from e
    if len(raw) > cap:
        raise InputError(too_big)
    return raw


@click.group("object")
def object_group() -> None:
    """Offloaded tool results: put one, get it back by range or search, stats, gc."""


@object_group.command("put")
@click.argument("file", required=False, default="-")
@click.option("--session", default=None, help="Session the result belongs to (default: cli).")
@click.option("--seq", type=int, default=None,
              help="Position of the result in its session; a repeat is not stored twice.")
@click.option("--tool", default=None, help="Name of the tool that produced the result.")
@json_option
@click.pass_context
@handle_errors
def put_cmd(ctx: click.Context, file: str, session: str | None, seq: int | None,
            tool: str | None, as_json: bool) -> None:
    """Offload FILE (or stdin) if it is big; print what stays inline."""
    with _service(ctx) as svc:
        text = _read_input(file, svc.max_object_bytes).decode("utf-8", errors="replace")
        res = svc.put(text, session=session, seq=seq, tool=tool, refuse_over_cap=True)
    emit(res.to_dict(), as_json, lambda d: d["inline"])


@object_group.command("get")
@click.argument("obj_id", metavar="ID")
@click.option("--start", type=int, default=None, help="First code point (default 0).")
@click.option("--count", type=int, default=None,
              help="How many code points (default 8,000, at most 24,000).")
@click.option("--lines", "lines", default=None, metavar="A-B",
              help="Lines A to B (1-based), as the offload notice names them; --count caps their characters.")
@json_option
@click.pass_context
@handle_errors
def get_cmd(ctx: click.Context, obj_id: str, start: int | None, count: int | None,
            lines: str | None, as_json: bool) -> None:
    """Print a range of object ID: --lines A-B, or --start/--count in code points."""
    if lines is not None:
        if start is not None:
            raise InputError("pass --lines or --start, not both")
        first, last = line_range(lines)
        with _service(ctx, config=False) as svc:
            got = svc.lines(obj_id, first, last, count)
        emit(got, as_json, lambda d: d["text"] + (f"\n[lines {d['line']}-{d['end_line']} of {d['line_count']}]"
                                                 if d["end_line"] < d["line_count"] or d["line"] > 1 else ""))
        return
    with _service(ctx, config=False) as svc:
        res = svc.get(obj_id, start, count)

    def human(d: dict[str, Any]) -> str:
        end = d["start"] + len(d["text"])
        more = f"\n[chars {d['start']}-{end} of {d['total']}]" if end < d["total"] or d["start"] else ""
        return d["text"] + more

    emit(res.to_dict(), as_json, human)


# Every word after ID that is not one of this command's own options is the query, even one
# that starts with "-" ("-----", "-e"); `--` ends the options for a query like "--json".
@object_group.command("search", context_settings={"ignore_unknown_options": True,
                                                  "help_option_names": ["--help"]})
@click.argument("obj_id", metavar="ID")
@click.argument("query", nargs=-1, type=click.UNPROCESSED)
@click.option("--limit", "-n", type=int, default=20, help="At most this many lines (1-20).")
@json_option
@click.pass_context
@handle_errors
def search_cmd(ctx: click.Context, obj_id: str, query: tuple[str, ...], limit: int,
               as_json: bool) -> None:
    """Lines of object ID matching QUERY (the rest of the words), with line numbers and
    offsets; without QUERY, where it failed: the likely failure region (error lines, stack
    traces, assertion diffs, exit codes), in file order. The query is cut to its first
    1,000 chars."""
    if not 1 <= limit <= 20:
        raise InputError(f"--limit must be from 1 to 20, not {limit}")
    with _service(ctx) as svc:
        if query:
            res = svc.search_in(obj_id, " ".join(query), limit)
        else:
            res = svc.failures(obj_id, limit)
    if res.note and not as_json:
        click.echo(f"dsh-recall: {res.note}", err=True)

    def human(d: dict[str, Any]) -> str:
        if not d["matches"]:
            return f"no line of {d['id']} matches"
        # grep's marks: `:` after a matching line's number, `-` after a context line's
        return "\n".join(f"{m['line']}-@{m['offset']}- {m['text']}" if m.get("context")
                         else f"{m['line']}:@{m['offset']}: {m['text']}" for m in d["matches"])

    emit(res.to_dict(), as_json, human)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _age(s: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= span:
            return f"{s / span:.0f}{unit}"
    return f"{s:.0f}s"


def _human_stats(d: dict[str, Any]) -> str:
    lines = [
        f"object store {d['path']}",
        f"offloaded {d['offloaded']} results ({d['live']} live, {d['evicted']} evicted), "
        f"{d['chars_offloaded']:,} chars stored",
        f"kept out of {d['requests_counted']:,} dsh model requests: "
        f"{d['tokens_kept_out_bound'] + ' ' if d.get('tokens_kept_out_bound') else ''}{d['tokens_kept_out']:,} tokens "
        "(against plain dsh, each request counted)",
        f"recalls {d['recalls']} (ratio {d['recall_ratio']}: near 0 nothing was needed, "
        "near 1 the head is too small)",
        f"disk {_size(d['disk_bytes'])} for {_size(d['raw_bytes'])} raw "
        f"({d['blobs']} distinct payloads, {_size(d['stored_bytes'])} compressed)",
    ]
    if d["recent"]:
        lines.append("last offloads:")
        for r in d["recent"]:
            state = " (evicted)" if r["evicted"] else ""
            lines.append(f"  {r['id']}  {r['tool'] or '-':<20} {r['chars']:>10,} chars  "
                         f"{_age(r['age_s'])} ago{state}")
    return "\n".join(lines)


@object_group.command("stats")
@json_option
@click.pass_context
@handle_errors
def stats_cmd(ctx: click.Context, as_json: bool) -> None:
    """What was offloaded, kept out, recalled, and what it costs on disk."""
    from ...services.report.ledger import figures_from_log, with_store

    with _service(ctx) as svc:
        emit(with_store(svc.stats(), figures_from_log()), as_json, _human_stats)


@object_group.command("gc")
@click.option("--max-age-days", type=float, default=None,
              help="Evict objects older than this (default: objects.max_age_days).")
@click.option("--max-bytes", type=int, default=None,
              help="Evict oldest until payloads fit (default: objects.max_bytes).")
@json_option
@click.pass_context
@handle_errors
def gc_cmd(ctx: click.Context, max_age_days: float | None, max_bytes: int | None,
           as_json: bool) -> None:
    """Apply retention: evict oldest first, drop unreferenced payloads, give pages back."""
    with _service(ctx) as svc:
        res = svc.gc(max_age_days=max_age_days, max_bytes=max_bytes)

    def human(d: dict[str, Any]) -> str:
        if d["max_age_days"] is None and d["max_bytes"] is None:
            return ("retention is off (objects.max_age_days and objects.max_bytes unset): "
                    "nothing evicted")
        return f"evicted {d['evicted']} objects; payloads now {_size(d['stored_bytes'])}"

    emit(res, as_json, human)

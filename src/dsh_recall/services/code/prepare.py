"""Read and cut one file for the code index, apart from the store.

What a first index spends its CPU on is here: the tree-sitter parse, the chunker and the
code tokens of every chunk. Nothing here writes, so a large first index runs it in worker
processes (`prepare_many`) while the parent alone writes SQLite, in the files' order: the
index is the same, chunk for chunk, as one process would build.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator, Sequence

from ...core.text import index_text, safe_decode
from ...core.types import SourceFile
from ...readers.workspace import content_skip_reason, read_regular
from ...stores.contracts import FileRow, IndexedChunk
from ..indexing.filesync import Prepared

# Below this many files to read, worker processes cost more to start (each imports the
# chunkers and tree-sitter, about 0.3 s) than they save.
PARALLEL_MIN_FILES = 200
# Files handed to a worker at a time: enough to amortise the round trip, few enough that
# the parent's writer is never idle long.
_WORKER_CHUNKSIZE = 8


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def embed_text(path: str, symbols: tuple[str, ...], text: str) -> str:
    """What the embedder sees for a chunk: where it lives, what it declares, then the code."""
    head = path + (" :: " + ", ".join(symbols) if symbols else "")
    return head + "\n" + text


def prepare(sf: SourceFile, old_hash: str | None, max_file_bytes: int,
            excerpt_lines: int) -> Prepared:
    try:
        data = read_regular(sf.abs_path, max_file_bytes + 1)
    except OSError:
        return Prepared("skip", reason="unreadable")
    reason = content_skip_reason(data)
    if reason:
        return Prepared("skip", reason=reason)
    digest = sha256(data)
    if old_hash == digest:
        return Prepared("same")
    text = safe_decode(data)
    from ... import chunkers  # not at import: a search never chunks

    chunks = chunkers.chunk_file(sf.path, text, max_lines=excerpt_lines)
    path_lex = index_text(sf.path.replace("/", " ").replace(".", " "))
    items = []
    for c in chunks:
        et = embed_text(sf.path, c.symbols, c.text)
        items.append(IndexedChunk(c, index_text(c.text), index_text(" ".join(c.symbols)),
                                  path_lex, et, sha256(et.encode("utf-8", "surrogatepass"))[:32]))
    row = FileRow(sf.path, sf.abs_path, sf.root, digest, sf.size, sf.mtime_ns, len(text))
    return Prepared("index", row=row, items=tuple(items))


def _worker_init(parent: int) -> None:
    """A worker's stdout is its parent's, which for `dsh-recall mcp` is the protocol
    channel: nothing a worker (or a library in it) prints may land there. And a worker
    must not outlive its parent: killed with -9, the parent leaves the job queue open
    (each worker holds a copy of its write end), so a watcher thread ends the worker
    once it has been handed to another parent (`parent` is the pid that started it: the
    parent may die before this runs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _prepare_args(args: tuple[SourceFile, str | None, int, int]) -> Prepared:
    return prepare(*args)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs from /proc/stat, or None where there is none."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields[:8])


def idle_cores(sample_s: float = 0.1) -> float:
    """Cores other work leaves free now: the idle share of all CPUs over `sample_s` (the
    load average lags a minute, and counts this process's own work just before), times the
    cores this process may use; the load average where /proc/stat is missing."""
    first = _cpu_times()
    if first is not None:
        time.sleep(sample_s)
        second = _cpu_times()
        if second is not None and second[1] > first[1]:
            return usable_cores() * (second[0] - first[0]) / (second[1] - first[1])
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return usable_cores() - load


def worker_count(files: int, setting: int) -> int:
    """Worker processes for `files` files to read: `setting` when the user fixed it
    (1 = none), else one per idle core (at most 4) once there are enough files. Workers
    cost CPU (each starts an interpreter, and chunks cross a pipe), which only pays when
    cores are free: on a busy machine one process reads."""
    if setting:
        return setting if files > 1 else 1
    if files < PARALLEL_MIN_FILES:
        return 1
    n = min(4, usable_cores(), int(idle_cores() + 0.5))
    return n if n >= 2 else 1


def prepare_many(jobs: Sequence[tuple[SourceFile, str | None]], max_file_bytes: int,
                 excerpt_lines: int, workers: int) -> Iterator[tuple[SourceFile, Prepared]]:
    """Each job's outcome, in the jobs' order. With `workers` > 1 the work runs in that
    many fresh processes ("spawn": safe beside the threads of an MCP server); if they
    cannot start, it runs here."""
    args = [(sf, old, max_file_bytes, excerpt_lines) for sf, old in jobs]
    if workers <= 1 or len(args) < 2:
        for a in args:
            yield a[0], prepare(*a)
        return
    import concurrent.futures as cf  # imported here: a search never starts workers
    import multiprocessing
    try:
        pool = cf.ProcessPoolExecutor(max_workers=workers, initializer=_worker_init,
                                      initargs=(os.getpid(),),
                                      mp_context=multiprocessing.get_context("spawn"))
    except (OSError, ValueError):
        yield from prepare_many(jobs, max_file_bytes, excerpt_lines, 1)
        return
    done = 0
    try:
        for res in pool.map(_prepare_args, args, chunksize=_WORKER_CHUNKSIZE):
            yield args[done][0], res
            done += 1
    except cf.process.BrokenProcessPool:
        # A worker died (killed, out of memory): finish here what it had not returned.
        for a in args[done:]:
            yield a[0], prepare(*a)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


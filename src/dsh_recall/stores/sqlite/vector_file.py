"""The memory-mapped vector file beside a chunk store: a rebuildable cache of its vectors.

SQLite stays the source of truth (float16 vectors keyed by text hash, stores/vec_codec.py;
each chunk records the sequence number `vec_seq` of the write that gave it a vector). The
file holds int8 copies, one fixed-size record per chunk: chunk id, scale, int8 row. Records [0, rows) are committed:
`rows`, the highest `vec_seq` they cover and the vector epoch (bumped when vectors are
discarded) live in the store's meta table, written in one transaction after the records
are on disk. So:

- a reader maps exactly the committed records (opening costs a `mmap`, not a load);
  vectors that arrived after the file's `seq` come from SQLite as a small delta;
- a writer (holding the index lock) appends past the committed end after truncating any
  tail a killed writer left, then commits the new `rows`; a rebuild writes a new file
  under a fresh name, renames it into place and commits its name, so a `kill -9` at any
  point leaves the previous committed state usable;
- a reader that still maps an unlinked old file keeps a valid mapping (POSIX semantics).

Deleted chunks stay in the file until the next rebuild; search rescoring drops them
because their rows are gone from SQLite.

Beside each vector file, a sign file (`<name>.bits`) holds every record's sign bits, packed
(dim / 8 bytes a row, contiguous): the first pass of a ranking over a large index
(services/vectors.py) scores them by Hamming distance, about an eighth of the int8 rows'
bytes. It is written by the same writer before the same commit (record i of one is record
i of the other), and it is a cache of the cache: a missing or short sign file is rebuilt
from the records (`ensure_bits`) and, meanwhile, a reader ranks the int8 rows alone.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from ...core.lazy import np
from ...core.paths import ensure_dir
from .. import vec_codec

MAGIC = b"DRVEC001"
HEADER = 64  # bytes: magic, dim (u32), reserved
SUFFIX = ".i8v"
BITS_MAGIC = b"DRBIT001"
BITS_SUFFIX = ".bits"  # the sign file of `<name>`: `<name>.bits`


def record_dtype(dim: int) -> np.dtype:
    return np.dtype([("id", "<i8"), ("scale", "<f4"), ("v", "i1", (dim,))])


@dataclass(frozen=True)
class FileState:
    """What the store's meta says about the committed vector file."""

    file: str
    rows: int
    seq: int
    epoch: int
    dim: int

    def dumps(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def loads(raw: str | None) -> FileState | None:
        if not raw:
            return None
        try:
            d = json.loads(raw)
            return FileState(str(d["file"]), int(d["rows"]), int(d["seq"]), int(d["epoch"]),
                             int(d["dim"]))
        except (ValueError, KeyError, TypeError):
            return None


class MappedVectors:
    """Read-only view of the committed records of one vector file."""

    def __init__(self, path: Path, state: FileState):
        self.path, self.state = path, state
        dt = record_dtype(state.dim)
        with open(path, "rb") as f:
            head = f.read(HEADER)
            f.seek(0, os.SEEK_END)
            size = f.tell()
        if head[:8] != MAGIC or int.from_bytes(head[8:12], "little") != state.dim:
            raise ValueError(f"{path} is not a vector file of dimension {state.dim}")
        if size < HEADER + state.rows * dt.itemsize:
            raise ValueError(f"{path} is shorter than its committed {state.rows} records")
        if state.rows:
            self.records = np.memmap(path, dtype=dt, mode="r", offset=HEADER, shape=(state.rows,))
        else:
            self.records = np.zeros(0, dtype=dt)
        self.ids = np.asarray(self.records["id"])
        self._scales: np.ndarray | None = None
        self._bits: np.ndarray | None = None
        self._bits_read = False

    @property
    def rows(self) -> np.ndarray:
        return self.records["v"]

    @property
    def scales(self) -> np.ndarray:
        """The rows' scales, contiguous (a strided view of the records costs a million-row
        multiply several times the contiguous one): 4 bytes a row, copied on first use."""
        if self._scales is None:
            self._scales = np.ascontiguousarray(self.records["scale"], dtype=np.float32)
        return self._scales

    @property
    def bits(self) -> np.ndarray | SignPlanes | None:
        """The committed rows' sign bits, or None when the sign file is missing, damaged or
        shorter than the committed records. Mapped for the first query (rows x dim / 8,
        uint8); from the second on (a process that lives on: the MCP server, the daemon)
        read into this process's memory as `SignPlanes`, 48 bytes a row at 384 dims: every
        query scans all of them, mapped pages were pushed out of the page cache by other work
        between queries (ripgrep over a 1.8 GB tree), and a scan by word is faster than one
        by row."""
        if not self._bits_read:
            self._bits = map_bits(bits_path(self.path), self.state.dim, self.state.rows)
            self._bits_read = True
        elif isinstance(self._bits, np.memmap):
            self._bits = SignPlanes.of(self._bits)
        return self._bits


class SignPlanes:
    """Sign bits laid out by 64-bit word: `words[j, i]` holds bits 64j..64j+63 of row i.
    A Hamming pass then reads each word of every row as one contiguous array (numpy's
    xor and bitwise_count) instead of a row at a time (simsimd's cdist)."""

    def __init__(self, words: np.ndarray, width: int):
        self.words, self.width = words, width

    def __len__(self) -> int:
        return int(self.words.shape[1])

    @staticmethod
    def of(bits: np.ndarray, block: int = 8192) -> SignPlanes:
        """From rows x width uint8 (a mapped sign file), a bounded block at a time (about
        20 ms a million rows of 48 bytes)."""
        n, width = bits.shape
        nw = (width + 7) // 8
        words = np.empty((nw, n), dtype="<u8")
        for i in range(0, n, block):
            part = np.ascontiguousarray(bits[i:i + block])
            if width != nw * 8:  # zero padding to whole words
                part = np.pad(part, ((0, 0), (0, nw * 8 - width)))
            words[:, i:i + len(part)] = part.view("<u8").T
        return SignPlanes(words, width)

    def query_words(self, query: np.ndarray) -> np.ndarray:
        """The query's sign bits as this layout's words (zero padding matches the rows')."""
        packed = np.zeros(self.words.shape[0] * 8, dtype=np.uint8)
        packed[:self.width] = np.packbits(np.asarray(query, dtype=np.float32) > 0)[:self.width]
        return packed.view("<u8")

    def hamming(self, qwords: np.ndarray, block: int = 32768) -> np.ndarray:
        """Every row's Hamming distance (uint16) to the query's words. A block of rows at a
        time, so the xor and its count stay in the core's cache between a word's passes (one
        array pass a word over a million rows: 12 ms against simsimd's 9 by row; blocks of
        32k rows: 6 ms)."""
        n, nw = len(self), self.words.shape[0]
        acc = np.empty(n, dtype=np.uint16)
        tmp = np.empty(min(block, n), dtype="<u8")
        cnt = np.empty(min(block, n), dtype=np.uint8)
        for i in range(0, n, block):
            j = min(n, i + block)
            out, t, c = acc[i:j], tmp[:j - i], cnt[:j - i]
            for w in range(nw):
                np.bitwise_xor(self.words[w, i:j], qwords[w], out=t)
                np.bitwise_count(t, out=c)
                if w:
                    np.add(out, c, out=out)
                else:
                    out[:] = c
        return acc


def bits_path(path: Path) -> Path:
    return path.with_name(path.name + BITS_SUFFIX)


def _bits_header(dim: int) -> bytes:
    return BITS_MAGIC + dim.to_bytes(4, "little") + b"\0" * (HEADER - 12)


def sign_bits(rows: np.ndarray) -> np.ndarray:
    """Packed sign bits (value > 0) of int8 or float rows: rows x ceil(dim / 8) uint8."""
    return np.packbits(np.asarray(rows) > 0, axis=-1)


def map_bits(path: Path, dim: int, rows: int) -> np.ndarray | None:
    """The first `rows` rows of a sign file, memory-mapped, or None when it cannot serve."""
    width = (dim + 7) // 8
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER)
            f.seek(0, os.SEEK_END)
            size = f.tell()
    except OSError:
        return None
    if head[:8] != BITS_MAGIC or int.from_bytes(head[8:12], "little") != dim:
        return None
    if size < HEADER + rows * width:
        return None
    if not rows:
        return np.zeros((0, width), dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=HEADER, shape=(rows, width))


def ensure_bits(path: Path, state: FileState, batch: int = 65536) -> bool:
    """Make the sign file of a committed vector file cover its rows (written by a release
    before sign files, or lost): appended from the records after any rows it already has.
    The caller holds the writer's lock. Returns whether it wrote anything."""
    width = (state.dim + 7) // 8
    bp = bits_path(path)
    if map_bits(bp, state.dim, state.rows) is not None:
        return False
    have = 0
    if map_bits(bp, state.dim, 0) is not None:  # a valid header: keep its whole rows
        have = min(state.rows, (bp.stat().st_size - HEADER) // width)
    mapped = MappedVectors(path, state)
    mode = "r+b" if have else "wb"
    with open(bp, mode) as f:
        if not have:
            f.write(_bits_header(state.dim))
        f.truncate(HEADER + have * width)
        f.seek(0, os.SEEK_END)
        for i in range(have, state.rows, batch):
            f.write(sign_bits(mapped.rows[i:i + batch]).tobytes())
        f.flush()
        os.fsync(f.fileno())
    return True


def quantize(vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, float32 scale per row) with row ~= int8 * scale; symmetric, max-abs."""
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.ndim == 1:
        vecs = vecs[None, :]
    peak = np.abs(vecs).max(axis=1) if vecs.size else np.zeros(len(vecs), np.float32)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(vecs / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def _records(dim: int, ids: np.ndarray, vecs: np.ndarray) -> tuple[bytes, bytes]:
    """(the records, their sign bits) of a batch."""
    rec = np.zeros(len(ids), dtype=record_dtype(dim))
    rec["id"] = ids
    q, s = quantize(vecs) if len(ids) else (np.zeros((0, dim), np.int8), np.zeros(0, np.float32))
    rec["scale"] = s
    rec["v"] = q
    return rec.tobytes(), sign_bits(q).tobytes()


def write_file(folder: Path, dim: int, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> tuple[str, int]:
    """A new vector file under a fresh name (written aside, then renamed); (name, rows)."""
    ensure_dir(folder)
    name = uuid.uuid4().hex + SUFFIX
    tmp = folder / (name + ".tmp")
    btmp = folder / (name + BITS_SUFFIX + ".tmp")
    rows = 0
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f, \
            os.fdopen(os.open(btmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as b:
        f.write(MAGIC + dim.to_bytes(4, "little") + b"\0" * (HEADER - 12))
        b.write(_bits_header(dim))
        rows += _write_records(f, b, dim, batches)
    os.replace(btmp, folder / (name + BITS_SUFFIX))
    os.replace(tmp, folder / name)
    return name, rows


def _write_records(f: BinaryIO, b: BinaryIO, dim: int,
                   batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> int:
    """Write each batch's records and sign bits where `f` and `b` stand, then flush both to
    the disk; returns how many rows it wrote."""
    rows = 0
    for ids, vecs in batches:
        rec, bits = _records(dim, ids, vecs)
        f.write(rec)
        b.write(bits)
        rows += len(ids)
    for out in (f, b):
        out.flush()
        os.fsync(out.fileno())
    return rows


def append_file(path: Path, state: FileState, batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> int:
    """Append records after the committed ones (dropping a tail a killed writer left);
    returns the new row count, to be committed by the caller."""
    rec_size = record_dtype(state.dim).itemsize
    width = (state.dim + 7) // 8
    ensure_bits(path, state)  # record i of the sign file stays record i of this one
    rows = state.rows
    with open(path, "r+b") as f, open(bits_path(path), "r+b") as b:
        f.truncate(HEADER + rows * rec_size)
        b.truncate(HEADER + rows * width)
        f.seek(0, os.SEEK_END)
        b.seek(0, os.SEEK_END)
        rows += _write_records(f, b, state.dim, batches)
    return rows


def scan_vectors(conn, id_hash_sql: str, args: Sequence, batch: int = 16384
                 ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every (item ids, vectors) for a full rebuild: `id_hash_sql` lists (id, embed hash)
    of the items to cover; the vectors table is read in its own order (sequential pages),
    about 3x faster than joining item by item, in batches of bounded size."""
    by_hash: dict[str, list[int]] = {}
    for item, h in conn.execute(id_hash_sql, args):
        by_hash.setdefault(h, []).append(item)
    cur = conn.execute("SELECT hash, vec FROM vectors")
    while rows := cur.fetchmany(batch):
        ids: list[int] = []
        vecs: list[bytes] = []
        for h, v in rows:
            for item in by_hash.get(h, ()):
                ids.append(item)
                vecs.append(v)
        if ids:
            yield (np.asarray(ids, dtype=np.int64),
                   vec_codec.decode_many(vecs))


def remove_stale(folder: Path, keep: str | None) -> None:
    """Delete vector files other than `keep` (old generations, tails of killed writers)."""
    if not folder.is_dir():
        return
    mine = (keep, keep + BITS_SUFFIX) if keep else ()
    ends = (SUFFIX, SUFFIX + ".tmp", SUFFIX + BITS_SUFFIX, SUFFIX + BITS_SUFFIX + ".tmp")
    for p in folder.iterdir():
        if p.name not in mine and p.name.endswith(ends):
            try:
                p.unlink()
            except OSError:
                pass

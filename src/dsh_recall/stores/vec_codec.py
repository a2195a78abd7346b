"""How a SQLite store keeps one vector in a blob: the one codec every reader and writer of
a `vectors` table or an embedding cache goes through.

A blob written now is a tag byte (1: float16) followed by the vector's float16 values:
2 * dim + 1 bytes, an odd length. Earlier releases wrote bare float32 values, 4 * dim
bytes, always a multiple of 4: so a blob's length tells the two apart, and an index or a
cache written before reads as it did (no migration). Decoding always gives float32.

float16 keeps 11 significant bits: a component of a unit vector of 384 dimensions moves by
at most about 1e-4 of its value, a cosine by a few 1e-5 (tests/test_vec_codec.py bounds it
below 1e-3; docs/benchmarks.md has the rankings before and after on the shipped model).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.lazy import np

TAG_F16 = 1


def encode(vec: np.ndarray) -> bytes:
    """The blob of one vector (float16 behind a tag byte)."""
    return bytes((TAG_F16,)) + np.asarray(vec, dtype=np.float32).astype("<f2").tobytes()


def decode(blob: bytes) -> np.ndarray:
    """The float32 vector of one blob, of either layout."""
    if len(blob) % 2:
        if blob[0] != TAG_F16:
            raise ValueError(f"unknown vector blob tag {blob[0]}")
        return np.frombuffer(blob, dtype="<f2", offset=1).astype(np.float32)
    return np.frombuffer(blob, dtype="<f4").astype(np.float32, copy=False)


def decode_many(blobs: Sequence[bytes]) -> np.ndarray:
    """The float32 matrix of blobs of one dimension (each blob a row), either layout or a
    mix of both (an index of an earlier release that received new vectors)."""
    n = len(blobs)
    if not n:
        return np.zeros((0, 0), dtype=np.float32)
    lengths = {len(b) for b in blobs}
    if len(lengths) == 1:
        size = lengths.pop()
        raw = b"".join(blobs)
        if size % 2 == 0:
            return np.frombuffer(raw, dtype="<f4").reshape(n, -1).astype(np.float32, copy=False)
        rows = np.frombuffer(raw, dtype=np.uint8).reshape(n, size)
        if (rows[:, 0] != TAG_F16).any():
            raise ValueError("unknown vector blob tag")
        return np.ascontiguousarray(rows[:, 1:]).view("<f2").astype(np.float32)
    return np.vstack([decode(b) for b in blobs])

"""Token figures for the report: a real tokenizer where one is available, else chars / 4.

The usage log keeps characters only (tokenizing every offloaded megabyte on a hook's hot
path would cost seconds). The report turns characters into tokens with a chars-per-token
ratio per source, measured by the tokenizer shipped with the default embedder (MiniLM's
WordPiece `tokenizer.json`, through the `tokenizers` package) on a sample of the user's own
indexed text of that source: code chunks, history blocks, note entries, offloaded payloads.
Where the tokenizer or a sample is missing, the ratio is 4 and the report says "chars / 4".
An LLM's own tokenizer differs from WordPiece; the report says that too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SAMPLE_CHARS = 40_000  # per source: enough for a stable ratio, about 0.1 s to encode
FALLBACK = 4.0
SOURCES = ("code", "history", "notes", "objects")
TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece (the shipped tokenizer.json)"
_LONG_WORD = re.compile(r"\S{100,}")
PIECE = 20


def _pieces(word: str) -> list[str]:
    return [word[i:i + PIECE] for i in range(0, len(word), PIECE)]


def tokenizer_path() -> Path:
    return (Path(__file__).resolve().parents[2] / "embedders" / "models"
            / "minilm-l6-v2-int8" / "tokenizer.json")


def load_counter() -> Callable[[list[str]], int] | None:
    """A function counting the tokens of texts (no special tokens, no truncation), or None
    when `tokenizers` or the shipped tokenizer.json cannot load."""
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_path()))
        tok.no_truncation()
        tok.no_padding()
    except Exception:  # noqa: BLE001 - any failure means: no real tokenizer here
        return None

    def count(texts: list[str]) -> int:
        # WordPiece makes one [UNK] of any word over 100 chars; hashes, base64 and minified
        # lines in tool output would then look nearly free. Such words are counted in pieces.
        texts = [_LONG_WORD.sub(lambda m: " ".join(_pieces(m.group(0))), t) for t in texts]
        return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))

    return count


def _take(texts: Iterable[str], limit: int = SAMPLE_CHARS) -> list[str]:
    out: list[str] = []
    n = 0
    for t in texts:
        if not t:
            continue
        t = t[: limit - n]
        out.append(t)
        n += len(t)
        if n >= limit:
            break
    return out


def _chunk_texts(paths: list[Path]) -> Iterable[str]:
    from ...stores.sqlite.chunks import SqliteChunkStore

    for p in paths:
        try:
            store = SqliteChunkStore(p)
        except Exception:  # a store that cannot be opened gives no sample
            continue
        try:
            rows = store.chunks_by_id(range(1, 400))
        except Exception:  # a source that cannot be sampled gives no sample
            rows = {}
        finally:
            store.close()
        for i in sorted(rows):
            yield rows[i].text


def samples(home: Path) -> dict[str, list[str]]:
    """Up to SAMPLE_CHARS of indexed text per source, lowest ids first (deterministic)."""
    out: dict[str, list[str]] = {s: [] for s in SOURCES}
    ws = sorted((home / "workspaces").glob("*/index.sqlite"))
    out["code"] = _take(_chunk_texts(ws))
    notes = sorted((home / "notes").glob("*.sqlite"))
    out["notes"] = _take(_chunk_texts(notes))
    if (home / "history.sqlite").exists():
        try:
            from ...stores.sqlite.history import HistoryStore

            hs = HistoryStore(home / "history.sqlite")
            try:
                blocks = hs.blocks(list(range(1, 400)))
            finally:
                hs.close()
            out["history"] = _take(blocks[i].text for i in sorted(blocks))
        except Exception:  # a source that cannot be sampled gives no sample
            pass
    if (home / "objects.sqlite").exists():
        try:
            from ...stores.sqlite.objects import ObjectStore

            os_ = ObjectStore(home / "objects.sqlite")
            try:
                def payloads() -> Iterable[str]:
                    for row in sorted(os_.recent(20), key=lambda r: (r.created, r.id)):
                        data = os_.payload(row.sha) if row.sha else None
                        if data:
                            yield data[: SAMPLE_CHARS * 4].decode("utf-8", "replace")

                out["objects"] = _take(payloads())
            finally:
                os_.close()
        except Exception:  # a source that cannot be sampled gives no sample
            pass
    return out


def ratios(home: Path, method: str = "auto") -> dict[str, Any]:
    """{"method", "chars_per_token": {source: ratio, "all": ratio}, "sample_chars", "note"}.

    `method`: "auto" (the tokenizer when it loads) or "chars/4"."""
    count = load_counter() if method != "chars/4" else None
    flat = {s: FALLBACK for s in (*SOURCES, "all")}
    if count is None:
        why = "asked for" if method == "chars/4" else "the tokenizer could not load"
        return {"method": "chars / 4", "chars_per_token": flat, "sample_chars": {},
                "note": f"tokens are chars / 4 ({why})"}
    got = samples(home)
    measured: dict[str, float] = {}
    sizes: dict[str, int] = {}
    all_chars = all_tokens = 0
    for src, texts in got.items():
        chars = sum(len(t) for t in texts)
        if not chars:
            continue
        toks = count(texts)
        if toks:
            measured[src] = round(chars / toks, 3)
            sizes[src] = chars
            all_chars += chars
            all_tokens += toks
    overall = round(all_chars / all_tokens, 3) if all_tokens else None
    cpt = {s: measured.get(s, overall or FALLBACK) for s in SOURCES}
    cpt["all"] = overall or FALLBACK
    if not measured:
        return {"method": "chars / 4", "chars_per_token": flat, "sample_chars": {},
                "note": "tokens are chars / 4 (nothing indexed yet to measure a tokenizer on)"}
    missing = [s for s in SOURCES if s not in measured]
    note = (f"tokens counted by {TOKENIZER_NAME}: chars per token measured on up to "
            f"{SAMPLE_CHARS:,} chars of your own indexed text per source")
    if missing:
        note += f" ({', '.join(missing)}: no text yet, the overall ratio is used)"
    note += "; an LLM's own tokenizer counts differently"
    return {"method": "tokenizer", "tokenizer": TOKENIZER_NAME, "chars_per_token": cpt,
            "sample_chars": sizes, "note": note}


def tokens(chars: int, ratio: float) -> int:
    """Chars to tokens at `ratio` chars per token (rounded half away from zero)."""
    if ratio <= 0:
        return 0
    q = abs(chars) / ratio
    n = int(q + 0.5)
    return n if chars >= 0 else -n

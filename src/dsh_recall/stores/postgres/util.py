"""What the PostgreSQL stores share: connecting (psycopg 3 + pgvector, imported here only),
namespaces with versioned migrations, and lexical indexing that scores like SQLite FTS5.

Namespaces. One database holds many indexes: each code workspace, each notes index and the
history store is a namespace with its own PostgreSQL schema (`dshr_<hash>`), listed in
`dsh_recall.namespaces` with the schema version it was migrated to. Own schemas keep each
namespace's HNSW index small and its vector search unfiltered.

Lexical. Tokens come from our own tokenizers (FTS5's unicode61, porter and trigram rules,
rebuilt below over core.text's code tokens), so both backends index the same terms. A row
holds its term -> weighted frequency map (an hstore: columns weighted as FTS5's bm25 weighs
them) with a GIN index as the inverted index, so a query reads only the candidate rows'
frequencies of its own terms (a tsvector would have to be unnested whole: 3-5x slower).
Scores are FTS5's bm25() (k1 1.2, b 0.75, idf = log((N - df + .5)/(df + .5)), at least
1e-6); N, total length and each term's document frequency are kept exact per layer, in the
same transaction as the rows.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:  # numpy is imported where used: start-up stays light
    import numpy as np

from ...core.errors import StoreError
from ..fts5 import K1, B, fts5_terms, idf, unicode61  # noqa: F401  (the PostgreSQL stores call them here)

CATALOG = "dsh_recall"
MAX_LEXEME_BYTES = 2000  # longer tokens (a pasted blob) are not indexed


def _psycopg():
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as e:
        raise StoreError("the PostgreSQL store needs psycopg and pgvector: "
                         "pip install 'dsh-recall[pg]'") from e
    return psycopg, register_vector


def redact(url: str) -> str:
    """The URL without its password (for status output and messages)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)
        user = (parts.username or "") + ":***"
        return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))
    except ValueError:
        return "postgresql://(unparsable URL)"


_ext_lock = threading.Lock()
_pool_lock = threading.Lock()
# Idle connections by (process, URL), reused by the next store opened; never across a fork.
_POOL: dict[tuple[int, str], list] = {}
POOL_SIZE = 4


def connect(url: str):
    """An autocommit connection with pgvector's types registered (an idle one from this
    process's pool when there is one); the extensions and the catalog are created on first
    use, under an advisory lock, since many processes may race to do it."""
    psycopg, register_vector = _psycopg()
    with _pool_lock:
        idle = _POOL.get((os.getpid(), url), [])
        while idle:
            conn = idle.pop()
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                return conn
            conn.close()
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to {redact(url)}: {str(e).strip()}") from e
    try:
        ready = conn.execute(
            "SELECT (SELECT count(*) FROM pg_extension WHERE extname IN ('vector', 'hstore')) = 2 "
            f"AND to_regclass('{CATALOG}.namespaces') IS NOT NULL").fetchone()[0]
        if not ready:
            with _ext_lock, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('dsh_recall:extensions'))")
                have = {r[0] for r in conn.execute(
                    "SELECT extname FROM pg_extension WHERE extname IN ('vector', 'hstore')")}
                for ext in ("vector", "hstore"):
                    if ext not in have:
                        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}")
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {CATALOG}")
                conn.execute(f"""CREATE TABLE IF NOT EXISTS {CATALOG}.namespaces (
                    name TEXT PRIMARY KEY, kind TEXT NOT NULL, schema TEXT NOT NULL UNIQUE,
                    version INTEGER NOT NULL DEFAULT 0, created TIMESTAMPTZ NOT NULL DEFAULT now())""")
    except psycopg.Error as e:
        conn.close()
        raise StoreError(f"{redact(url)}: cannot prepare the database ({str(e).strip()}); the "
                         "pgvector and hstore extensions must be installed, and the user allowed to "
                         "create them (or an administrator creates them once)") from e
    register_vector(conn)
    return conn


def release(url: str, conn) -> None:
    """Give a connection back: kept for the next store opened when it is idle and the pool
    has room, else closed."""
    psycopg, _ = _psycopg()
    with _pool_lock:
        idle = _POOL.setdefault((os.getpid(), url), [])
        if any(c is conn for c in idle):
            return
        if (not conn.closed and len(idle) < POOL_SIZE
                and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE):
            idle.append(conn)
            return
    conn.close()


# -- lexical --------------------------------------------------------------------------------

def _keep(lex: str) -> bool:
    return bool(lex) and len(lex.encode("utf-8", "surrogatepass")) <= MAX_LEXEME_BYTES


def term_map(columns: Sequence[tuple[float, Iterable[str]]]) -> tuple[list[str], list[str], int]:
    """(terms, weighted frequencies as text, token count) of a row whose (weight, tokens)
    columns are given: FTS5's bm25 sums a term's hits weighted by column, and counts a
    row's length over every column, unweighted."""
    tf: dict[str, float] = {}
    total = 0
    short = MAX_LEXEME_BYTES // 4  # this many code points fit in any UTF-8 (a bulk load's hot loop)
    get = tf.get
    for weight, tokens in columns:
        for t in tokens:
            total += 1
            if t and (len(t) <= short or _keep(t)):
                tf[t] = get(t, 0.0) + weight
    return list(tf), [repr(v) for v in tf.values()], total


def _hs(x: str) -> str:
    if "\\" not in x and '"' not in x:  # nearly every term: nothing to escape
        return '"' + x + '"'
    return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'


def hstore_literal(keys: Sequence[str], values: Sequence[str]) -> str:
    """hstore input text for these keys and values (any characters, quoted)."""
    return ", ".join(f"{_hs(k)}=>{_hs(v)}" for k, v in zip(keys, values))


def bm25_sql(table: str, col: str, dl: str, where: str = "", select: str = "t.id") -> str:
    """SQL ranking rows of `table` (alias t) by FTS5's bm25 over the term map column `col`.

    Parameters (named): cand (text[]: terms a candidate row must hold one of), terms
    (text[]), w (float8[]: idf x how often the query repeats the term), avgdl, limit. `where`
    adds conditions on t. Returns (id, score), best first; scores are positive."""
    return (
        f"SELECT {select}, sum(q.w * e.tf * {K1 + 1!r} / (e.tf + {K1!r} * "
        f"(1 - {B!r} + {B!r} * t.{dl} / %(avgdl)s))) AS s "
        f"FROM {table} t CROSS JOIN LATERAL (SELECT key, value::float8 AS tf "
        f"FROM each(slice(t.{col}, %(terms)s::text[]))) e "
        f"JOIN unnest(%(terms)s::text[], %(w)s::float8[]) q(term, w) ON q.term = e.key "
        f"WHERE t.{col} ?| %(cand)s::text[]{where} "
        f"GROUP BY {select} ORDER BY s DESC, {select} LIMIT %(limit)s"
    )


CANDIDATE_CAP = 10_000  # rows one lexical query may score (see docs/postgres.md)


def bm25_params(terms: Sequence[str], dfs: dict[str, int], n: int, total: int,
                limit: int) -> dict[str, Any] | None:
    """The parameters of bm25_sql for the query phrases `terms` (duplicates kept), or None
    when no term occurs in the index.

    Candidates are the rows holding the rarest terms, adding terms rarest first until the
    rows they may match reach CANDIDATE_CAP: a row holding only very common terms cannot
    outrank one holding rare ones unless few rows hold those, and then the cap is not
    reached. Every term still scores."""
    mult = Counter(t for t in terms if _keep(t))
    known = [t for t in mult if dfs.get(t, 0) > 0]
    if not known or not n:
        return None
    known.sort(key=lambda t: dfs[t])
    cand: list[str] = []
    seen = 0
    for t in known:
        if cand and seen + dfs[t] > CANDIDATE_CAP:
            break
        cand.append(t)
        seen += dfs[t]
    return {"cand": cand, "terms": known,
            "w": [idf(n, dfs[t]) * mult[t] for t in known],
            "avgdl": max(total / n, 1e-9), "limit": int(limit)}


def lexeme_counts(conn, table: str, column: str, ids: Sequence[int]) -> Counter:
    """How many of the rows `ids` hold each term of their term map `column`."""
    if not ids:
        return Counter()
    return Counter({lex: int(n) for lex, n in conn.execute(
        f"SELECT k, count(*) FROM {table} t CROSS JOIN LATERAL skeys(t.{column}) k "
        f"WHERE t.id = ANY(%s) GROUP BY k", (list(ids),))})


def apply_term_deltas(conn, table: str, delta: Counter) -> None:
    """Add `delta` to the document frequencies in `table` (lexeme, df). Lexemes are locked
    in sorted order, and every writer updates its term tables before its stats row, so
    concurrent writers never wait on each other in a circle."""
    items = sorted((k, v) for k, v in delta.items() if v)
    for i in range(0, len(items), 20000):
        part = items[i:i + 20000]
        conn.execute(f"INSERT INTO {table}(lexeme, df) SELECT l, d FROM unnest(%s::text[], "
                     f"%s::bigint[]) AS x(l, d) ORDER BY l ON CONFLICT (lexeme) DO UPDATE "
                     f"SET df = {table}.df + excluded.df",
                     ([k for k, _ in part], [v for _, v in part]))


# -- FTS5's tokenizers, in Python, so PostgreSQL rows hold the terms SQLite's would ----------
# unicode61 lives in fts5.py (the SQLite store's kept document frequencies use it too).

_STEMS: dict[str, str] = {}
_stemmer: Callable[[str], str] | None = None  # Porter's, loaded on first use


def porter(tokens: Iterable[str]) -> list[str]:
    """FTS5's porter tokenizer over unicode61 tokens (Porter's algorithm, memoised)."""
    global _stemmer
    stem = _stemmer
    if stem is None:
        try:
            import snowballstemmer
        except ImportError as e:
            raise StoreError("the PostgreSQL history store needs snowballstemmer: "
                             "pip install 'dsh-recall[pg]'") from e
        stem = _stemmer = snowballstemmer.stemmer("porter").stemWord
    out = []
    for t in tokens:
        s = _STEMS.get(t)
        if s is None:
            s = stem(t) if t.isascii() and len(t) > 2 else t
            if len(_STEMS) > 200_000:
                _STEMS.clear()
            _STEMS[t] = s
        out.append(s)
    return out


def trigram_tokens(text: str) -> list[str]:
    """FTS5's trigram tokenizer: every window of three characters, case-folded."""
    low = text.lower()
    return [low[i:i + 3] for i in range(len(low) - 2)]


def as_array(v) -> np.ndarray:
    """A vector read from the database as float32 numpy (pgvector returns its own type)."""
    import numpy as np

    to = getattr(v, "to_numpy", None)
    return np.asarray(to() if to else v, dtype=np.float32)

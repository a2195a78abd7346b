"""The Python API on hostile text: a seeded fuzz of every source's public search (and
put/show) and search_all, with lone surrogates, NUL, FTS5 syntax, control characters, very
long tokens and 100 KB inputs. None may raise; each answer keeps the contract's shape and
serialises as UTF-8 (what a front end does next). Bad paging values are one InputError.

The CLI and MCP clean their input before a service sees it; a library caller has no front
end, so the services clean at their entry (core/clean.py `cleaned`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_recall import (
    CodeService,
    HistoryService,
    NotesService,
    ObjectService,
    load_config,
    search_all,
)
from dsh_recall.core.clean import LIMIT_MAX, OFFSET_MAX, as_query, clean_text, cleaned
from dsh_recall.core.errors import InputError

SEED = 28
PER_SOURCE = 440  # short queries per source (x5 with search_all), plus BIG each
BIG = 3  # 100 KB queries per source

WORDS = ["retry", "policy", "ledger", "pool", "deploy", "key", "build", "failure", "error",
         "token", "refresh", "class", "def", "import", "size", "32", "session", "rooms"]
FTS = ["NEAR(", "NEAR(a b, 3)", '"', '""', "*", "AND", "OR", "NOT", "col:", "text:", "^", "(",
       ")", "-", "+", "{a b}", ":", "'", "\\", "%", "_", "[", "]", "NEAR/2", "a*b", "^retry",
       '"unterminated', "AND OR NOT", "OR OR", "()", "-pool", "path:src", "*:*"]


def _surrogate(rng: random.Random) -> str:
    return chr(rng.randint(0xD800, 0xDFFF))


def _control(rng: random.Random) -> str:
    return chr(rng.choice([*range(0, 32), 0x7F, *range(0x80, 0xA0)]))


def _piece(rng: random.Random) -> str:
    kind = rng.randrange(10)
    if kind == 0:
        return _surrogate(rng)
    if kind == 1:
        return "\x00" * rng.randint(1, 3)
    if kind in (2, 3):
        return rng.choice(FTS)
    if kind == 4:
        return _control(rng)
    if kind == 5:
        return rng.choice("ab\U0001F600\u65e5\u0301\u200b\ufeff\ufffd") * rng.randint(1, 40)
    if kind == 6 and rng.random() < 0.08:
        return rng.choice(WORDS) * rng.randint(200, 6000)  # a very long token
    return rng.choice(WORDS)


def query(rng: random.Random) -> str:
    """A short hostile query: words and hostile pieces, with or without spaces between."""
    sep = rng.choice([" ", "", " ", "\t", "\n"])
    return sep.join(_piece(rng) for _ in range(rng.randint(1, 8)))


def big_query(rng: random.Random) -> str:
    """About 100 KB of the same mixture."""
    parts: list[str] = []
    size = 0
    while size < 100_000:
        p = _piece(rng)
        parts.append(p)
        size += len(p) + 1
    return " ".join(parts)[:100_000]


def queries(salt: int, n: int = PER_SOURCE, big: int = BIG) -> list[str]:
    rng = random.Random(SEED * 1000 + salt)
    return [query(rng) for _ in range(n)] + [big_query(rng) for _ in range(big)]


def _blank(q: str) -> bool:
    """No words left once cleaned: an empty query, which a source may refuse by name."""
    return not "".join(c for c in q if c.isprintable() and not c.isspace()
                       and not 0xD800 <= ord(c) <= 0xDFFF)


def _shape(ans: Any, hits: str = "results") -> None:
    assert isinstance(ans, dict)
    assert isinstance(ans[hits], list)
    assert isinstance(ans.get("notes", []), list)
    json.dumps(ans, ensure_ascii=False, default=str).encode("utf-8")  # valid Unicode all through


def run(call: Callable[[str], Any], qs: list[str], hits: str = "results",
        refusable: Callable[[str], bool] = lambda q: False) -> list[tuple[str, str]]:
    """The queries whose call raised (InputError only counts as an answer for a query
    `refusable` says may be refused) or gave an answer of the wrong shape."""
    failed: list[tuple[str, str]] = []
    for q in qs:
        try:
            _shape(call(q), hits)
        except InputError as e:
            if not refusable(q):
                failed.append((q[:80], f"InputError: {e}"))
        except Exception as e:  # noqa: BLE001 - the fuzz counts every kind of failure
            failed.append((q[:80], f"{type(e).__name__}: {e}"))
    return failed


# -- small worlds ------------------------------------------------------------------------------

def _cfg(tmp: Path) -> Any:
    return load_config(workspace=tmp / "ws", overrides={"embedder": {"name": "fake"},
                                                        "notes": {"roots": [str(tmp / "notes")]}})


def code_world(tmp: Path) -> CodeService:
    ws = tmp / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "retry.py").write_text(
        "def retry_policy(attempts: int = 3):\n    \"\"\"Where the retry policy is decided.\"\"\"\n"
        "    return min(attempts, 5)\n\n\nclass Ledger:\n    pool_size = 32\n")
    (ws / "pkg" / "deploy.js").write_text("export function deployKey(token) { return token; }\n")
    (ws / "README.md").write_text("# Demo\n\nRooms, a ledger pool and a retry policy.\n")
    svc = CodeService(ws, _cfg(tmp))
    svc.index()
    return svc


def notes_world(tmp: Path) -> NotesService:
    root = tmp / "notes"
    root.mkdir()
    (root / "deploy.md").write_text("# Deploy\n\nThe deploy key lives in the vault.\n")
    (root / "ledger.md").write_text("# Ledger\n\nWe chose a ledger pool size of 32.\n")
    svc = NotesService(_cfg(tmp))
    svc.index()
    return svc


def history_world(tmp: Path) -> HistoryService:
    rows = [{"session": "s1", "seq": 1, "role": "user", "text": "what ledger pool size?"},
            {"session": "s1", "seq": 2, "role": "assistant", "text": "pool size 32, retry 3"},
            {"session": "s2", "seq": 1, "role": "user", "text": "the deploy key failure"}]
    p = tmp / "h.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    svc = HistoryService(_cfg(tmp))
    svc.index([str(p)], fmt="generic")
    return svc


def objects_world(tmp: Path) -> tuple[ObjectService, str]:
    svc = ObjectService()  # the recall home's store, which search_all reads
    log = "".join(f"step {i}: build ok, retry policy {i % 7}\n" for i in range(4000))
    res = svc.put(log + "ERROR: build failure in ledger pool\n", session="fuzz", tool="bash")
    assert res.id
    return svc, res.id


# -- the fuzz ------------------------------------------------------------------------------------

def test_code_search_survives_fuzzed_queries(tmp_path):
    svc = code_world(tmp_path)
    try:
        failed = run(lambda q: svc.search(q, limit=5), queries(1))
        failed += run(lambda q: svc.search("retry", path=q[:200]), queries(11, 40, 0),
                      refusable=lambda q: True)  # a path may be refused, never crash
    finally:
        svc.close()
    assert failed == []


def test_notes_search_survives_fuzzed_queries(tmp_path):
    svc = notes_world(tmp_path)
    try:
        failed = run(lambda q: svc.search(q, limit=5), queries(2))
    finally:
        svc.close()
    assert failed == []


def test_history_search_and_show_survive_fuzzed_queries(tmp_path):
    with history_world(tmp_path) as svc:
        rng = random.Random(SEED)
        failed = run(lambda q: svc.search(q, all_sessions=True, detail=rng.random() < 0.5,
                                          limit=5), queries(3), hits="hits")
        # A fuzzed session id is an unknown session: an InputError, never another error.
        failed += run(lambda q: svc.show(q[:300]), queries(13, 40, 1), hits="events",
                      refusable=lambda q: True)
        failed += run(lambda q: svc.search(q, session=q[:100], limit=5), queries(23, 40, 0),
                      hits="hits", refusable=lambda q: True)
    assert failed == []


def test_objects_put_search_and_recall_survive_fuzzed_text(tmp_path):
    svc, oid = objects_world(tmp_path)
    with svc:
        failed = run(lambda q: svc.search(q, limit=5), queries(4))
        failed += run(lambda q: svc.search_in(oid, q, limit=5).to_dict(), queries(14, 60, 1),
                      hits="matches", refusable=_blank)
        # Hostile text put through the API is stored as the CLI would store it.
        rng = random.Random(SEED + 4)
        stored: list[str] = []
        for i in range(8):
            body = big_query(rng) + "\n" + "\n".join(query(rng) for _ in range(50))
            try:
                res = svc.put(body, session=query(rng)[:60], seq=i, tool=query(rng)[:40])
                assert res.id, "a 100 KB result is offloaded"
                got = svc.get(res.id, 0, 24_000).text
                assert got == clean_text(body)[:24_000]  # NUL kept, lone surrogates U+FFFD
                stored.append(res.id)
            except Exception as e:  # noqa: BLE001 - counted like the queries
                failed.append((body[:80], f"put {type(e).__name__}: {e}"))
        failed += run(lambda q: svc.search(q, limit=5), queries(24, 100, 0))  # over them too
    assert failed == []
    assert len(stored) == 8


def test_search_all_survives_fuzzed_queries(tmp_path):
    code = code_world(tmp_path)
    notes_world(tmp_path).close()
    history_world(tmp_path).close()
    objects_world(tmp_path)[0].close()
    cfg = code.cfg
    try:
        failed = run(lambda q: search_all(q, cfg=cfg, workspace=code.workspace, limit=5,
                                          code_service=code, history_scope="all"),
                     queries(5), refusable=_blank)
    finally:
        code.close()
    assert failed == []


# -- paging and the roles -------------------------------------------------------------------------

BAD_LIMITS = [-1, 0, LIMIT_MAX + 1, 10**30, "5", 2.5, True, [3]]
BAD_OFFSETS = [-1, OFFSET_MAX + 1, 10**30, "3", 1.5, False]


def _pagers(tmp: Path) -> dict[str, Callable[..., Any]]:
    code = code_world(tmp)
    notes = notes_world(tmp)
    hist = history_world(tmp)
    objs, oid = objects_world(tmp)
    return {
        "code": code.search, "notes": notes.search, "objects": objs.search,
        "history": lambda q, **kw: hist.search(q, all_sessions=True, **kw),
        "all": lambda q, **kw: search_all(q, cfg=code.cfg, workspace=code.workspace,
                                          code_service=code, **kw),
        "search_in": lambda q, **kw: objs.search_in(oid, q, **kw),
        "failures": lambda q, **kw: objs.failures(oid, **kw),
    }


def test_bad_limits_and_offsets_are_one_input_error_naming_the_argument(tmp_path):
    pagers = _pagers(tmp_path)
    for name, call in pagers.items():
        assert call("ledger pool", limit=3) is not None, name  # a good page answers
        for bad in BAD_LIMITS:
            if name == "all" and bad in (0, LIMIT_MAX + 1):
                continue  # search_all clamps its bound itself (0: the empty page past the end)
            with pytest.raises(InputError, match="limit must be a whole number from [01] to"):
                call("ledger pool", limit=bad)
        if name in ("all", "search_in", "failures"):
            with pytest.raises(InputError, match="limit must be a whole number"):
                call("ledger pool", limit=None)  # these have a number for their default
            continue  # no offset: one page
        assert call("ledger pool", limit=None, offset=None) is not None, name  # the defaults
        assert call("ledger pool", limit=3, offset=OFFSET_MAX) is not None, name
        for bad in BAD_OFFSETS:
            with pytest.raises(InputError, match="offset must be a whole number from 0 to"):
                call("ledger pool", offset=bad)


def test_history_show_and_object_reads_refuse_out_of_range_numbers(tmp_path):
    with history_world(tmp_path) as hist:
        assert isinstance(hist.show("s1", around=2**62)["events"], list)  # answers, no overflow
        for kw in ({"around": 2**64}, {"page_size": "20"}, {"offset": -1}, {"window": 1.5}):
            with pytest.raises(InputError, match="must be a whole number"):
                hist.show("s1", **kw)
    objs, oid = objects_world(tmp_path)
    with objs:
        for kw in ({"start": 2**70}, {"count": "10"}):
            with pytest.raises(InputError, match="must be a whole number"):
                objs.get(oid, **kw)
        with pytest.raises(InputError, match="seq must be a whole number"):
            objs.put("x" * 50_000, seq=2**64)


def test_a_nul_reads_as_a_space_and_a_lone_surrogate_as_u_fffd(tmp_path):
    svc = notes_world(tmp_path)
    try:
        plain = svc.search("ledger pool", limit=3)
        nul = svc.search("ledger\x00pool", limit=3)
        lone = svc.search("ledger \ud800 pool", limit=3)
    finally:
        svc.close()
    paths = [[r["path"] for r in a["results"]] for a in (plain, nul, lone)]
    assert paths[0] and paths[0] == paths[1] == paths[2]
    assert "\ufffd" in lone["query"]


def test_a_nul_in_a_path_argument_is_refused_by_name(tmp_path):
    svc = code_world(tmp_path)
    try:
        with pytest.raises(InputError, match="path contains a NUL"):
            svc.search("retry", path="pkg\x00")
        with pytest.raises(InputError, match="workspace contains a NUL"):
            search_all("retry", cfg=svc.cfg, workspace=Path(str(svc.workspace) + "\x00"))
    finally:
        svc.close()


def test_a_huge_query_is_cut_like_the_cli_cuts_it():
    assert len(as_query("word " * 50_000, "query")) <= 32_768
    assert as_query(b"a\xffb", "query") == "a\ufffdb"
    with pytest.raises(InputError, match="query must be text, not NoneType"):
        as_query(None, "query")


def test_cleaned_names_a_missing_parameter_at_decoration():
    with pytest.raises(TypeError, match="no parameter 'qeury'"):
        cleaned(qeury=as_query)(lambda query: query)
    assert cleaned(query=as_query)(lambda query, n=1: (query, n))("a\x00b", n=2) == ("a b", 2)

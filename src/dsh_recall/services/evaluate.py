"""`dsh-recall eval`: Hit@k, MRR and nDCG@10 on your own cases, for any source.

A cases file is a JSON list, `{"cases": [...]}`, or JSON lines; each case has a query and
what a good answer holds, for its source (the case's `source`, else the one given on the
command line, else read from its keys):

| source | expected | a retrieved unit | relevant when |
|---|---|---|---|
| code | `paths`: files relative to the workspace | a distinct file, in rank order | its path is one of them (or ends with `/` + one) |
| history | `seqs` (with `session`, optional) or `events`: [{session, seq}] | a hit (event range) | its range holds an expected seq of that session |
| notes | `files`: note files (a substring of the path, as `notes eval`) | a distinct note file | its path holds one of them |
| objects | `object` (id) and `lines` | a matching line | its line number is one of them |

Metrics over the top 10 units: Hit@k (a relevant unit within the first k), MRR (1 / rank of
the first relevant unit, 0 when none), nDCG@10 (binary gains, each expected item counted
once; the ideal ranks every expected item first). Runs as the user, unfiltered, and leaves
no trace: no usage records, no recall counts.

A file that cannot be read as cases is refused with the reason (which line, which case),
never scored as "0 cases".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.clean import cap_query, clean_int, clean_json
from ..core.config import Config
from ..core.errors import InputError
from ..core.files import read_bounded
from .access.channel import Viewer

if TYPE_CHECKING:
    from .code import CodeService
    from .history import HistoryService
    from .notes import NotesService
    from .objects import ObjectService

# What a source gives for a case: its units in rank order, and which expected items a unit matches.
Ranked = tuple[list[Any], Callable[[Any], set[int]]]

SOURCES = ("code", "history", "notes", "objects")
KS = (1, 3, 5, 10)
DEPTH = 10
_QUERY = ("query", "question", "q")
CASES_MAX_BYTES = 64 << 20  # a cases file is a few KB; /dev/zero or a 10 GB log is refused
# Keys that name a source when a case does not say (`paths` is code's)...
_INFER = {"code": ("paths", "path", "expected_paths"),
          "history": ("seqs", "seq", "events"),
          "notes": ("files", "file", "expected_file", "expected_files"),
          "objects": ("lines", "line")}
# ...and where each source reads its expectation (a notes case may say `paths` too).
_KEYS = {**_INFER, "notes": (*_INFER["notes"], "paths", "path")}


# -- cases ---------------------------------------------------------------------------------------

def _items(raw: str, where: str) -> list[Any]:
    text = raw.strip()
    if not text:
        raise InputError(f"{where} is empty: write one JSON object per line, e.g. "
                         '{"query": "where is retry handled", "paths": ["src/retry.py"]}')
    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError(f"{where} nests too deeply to be cases") from None
    except ValueError:
        items = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except RecursionError:
                raise InputError(f"{where} line {n} nests too deeply to be a case") from None
            except ValueError as e:
                raise InputError(f"{where} line {n} is not JSON ({getattr(e, 'msg', e)}); a cases file is a "
                                 "JSON list or one JSON object per line") from e
        return items
    if isinstance(data, dict):
        return data["cases"] if isinstance(data.get("cases"), list) else [data]
    if isinstance(data, list):
        return data
    raise InputError(f"{where} holds {type(data).__name__}, not cases (a JSON list, "
                     '{"cases": [...]} or one JSON object per line)')


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _number(x: Any) -> int:
    """A seq or line number: a whole number from 0 to SQLite's largest INTEGER (a float
    such as 3.0 counts; 1e400, NaN, true and 2**63 do not): ValueError otherwise."""
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    elif isinstance(x, str) and x.strip().isdigit() and len(x.strip()) < 20:
        x = int(x)
    n = clean_int(x)
    if n is None or n < 0:
        raise ValueError(f"not a whole number from 0 to 2**63-1: {x!r}")
    return n


def _source_of(case: dict[str, Any], default: str | None) -> str | None:
    if case.get("source") is not None:
        return str(case["source"]).strip().lower()
    if default:
        return default
    found = [s for s in SOURCES if any(case.get(k) not in (None, [], "") for k in _INFER[s])]
    if "objects" in found and ("object" in case or "id" in case or found == ["objects"]):
        return "objects"
    found = [s for s in found if s != "objects"]
    return found[0] if len(found) == 1 else None


def parse_case(case: Any, n: int, where: str, default: str | None) -> dict[str, Any]:
    """One case, checked and normalised: {"source", "query", "expect", ...}."""
    if not isinstance(case, dict):
        raise InputError(f"case {n} in {where} is not a JSON object")
    query = next((case[k] for k in _QUERY if isinstance(case.get(k), str) and case[k].strip()), None)
    if not query:
        raise InputError(f"case {n} in {where} has no query (key: query)")
    if "\x00" in query or any("\x00" in str(case.get(k) or "") for k in ("object", "id", "session")):
        raise InputError(f"case {n} in {where} holds a NUL character (\\x00); remove it")
    query = cap_query(query)
    src = _source_of(case, default)
    if src not in SOURCES:
        raise InputError(f"case {n} in {where}: " + (
            f"unknown source '{src}'" if src else "cannot tell its source") +
            f"; give \"source\" ({', '.join(SOURCES)}) or --source")
    val = next((case[k] for k in _KEYS[src] if case.get(k) not in (None, [], "")), None)
    if val is None:
        raise InputError(f"case {n} in {where} ({src}) has no expectation: give "
                         + " / ".join(_KEYS[src]))
    out: dict[str, Any] = {"n": n, "source": src, "query": query}
    try:
        if src in ("code", "notes"):
            out["expect"] = [str(x).strip().strip("/") for x in _as_list(val) if str(x).strip()]
        elif src == "history":
            session = case.get("session")
            if isinstance(val, list) and val and isinstance(val[0], dict):
                out["expect"] = [(str(e["session"]) if e.get("session") is not None else None,
                                  _number(e["seq"])) for e in val]
            else:
                out["expect"] = [(str(session) if session is not None else None, _number(x))
                                 for x in _as_list(val)]
        else:
            obj = case.get("object") or case.get("id")
            if not obj:
                raise InputError(f"case {n} in {where} (objects) needs the object id (key: object)")
            out["object"] = str(obj)
            out["expect"] = [_number(x) for x in _as_list(val)]
    except (TypeError, ValueError, KeyError, OverflowError, AttributeError) as e:
        raise InputError(f"case {n} in {where} ({src}): bad expectation {str(val)[:200]!r}") from e
    if not out["expect"]:
        raise InputError(f"case {n} in {where} ({src}) has an empty expectation")
    return out


def load_cases(path: str | Path, source: str | None = None) -> list[dict[str, Any]]:
    """Every case of the file, checked; InputError saying what is wrong otherwise."""
    p = Path(path)
    if source is not None and source not in SOURCES:
        raise InputError(f"unknown source '{source}'; sources: {', '.join(SOURCES)}")
    data = read_bounded(p, CASES_MAX_BYTES, "cases file")  # never a FIFO, a device, /proc
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"cases file {p} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    # Strings as the CLI and MCP clean them: a lone surrogate (JSON "\ud800") becomes U+FFFD.
    items = clean_json(_items(raw.removeprefix("\ufeff"), f"cases file {p}"))
    if not items:
        raise InputError(f"cases file {p} holds no cases")
    return [parse_case(c, n, str(p), source) for n, c in enumerate(items, 1)]


# -- metrics (pure) ---------------------------------------------------------------------------

def gains(units: Sequence[Any], n_expected: int, matches: Callable[[Any], set[int]],
          depth: int = DEPTH) -> list[int]:
    """Binary gain per rank (top `depth`): 1 when a unit matches an expected item not matched
    by an earlier unit. `matches(unit)` -> indexes of the expected items it matches."""
    seen: set[int] = set()
    out = []
    for u in list(units)[:depth]:
        new = matches(u) - seen
        out.append(1 if new else 0)
        seen |= new
    return out


def first_rank(g: Sequence[int]) -> int | None:
    return next((i for i, x in enumerate(g, 1) if x), None)


def ndcg(g: Sequence[int], n_expected: int, depth: int = DEPTH) -> float:
    dcg = sum(x / math.log2(i + 1) for i, x in enumerate(g[:depth], 1))
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(n_expected, depth) + 1))
    return dcg / ideal if ideal else 0.0


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {"cases": n}
    for k in KS:
        out[f"hit@{k}"] = round(sum(1 for r in rows if r["rank"] and r["rank"] <= k) / n, 4) if n else 0.0
    out["mrr"] = round(sum(1 / r["rank"] for r in rows if r["rank"]) / n, 4) if n else 0.0
    out["ndcg@10"] = round(sum(r["ndcg"] for r in rows) / n, 4) if n else 0.0
    return out


# -- retrieval per source ---------------------------------------------------------------------

class _Runner:
    """Opens each source once for the whole cases file; reaches each through its public
    surface, as the user (unfiltered)."""

    def __init__(self, cfg: Config, workspace: Path):
        self.cfg, self.workspace = cfg, workspace
        self._code: CodeService | None = None
        self._history: HistoryService | None = None
        self._notes: NotesService | None = None
        self._objects: ObjectService | None = None
        self.by_source: dict[str, Callable[[dict[str, Any]], Ranked]] = {
            "code": self.code, "history": self.history, "notes": self.notes,
            "objects": self.objects}

    def code(self, case: dict[str, Any]) -> Ranked:
        from .code import CodeService

        if self._code is None:
            self._code = CodeService(self.workspace, self.cfg)
        res = self._code.search(case["query"], limit=DEPTH * 4, cwd=self.workspace)["results"]
        files = list(dict.fromkeys(r["path"] for r in res))
        want = case["expect"]
        return files, lambda p: {i for i, w in enumerate(want) if p == w or p.endswith("/" + w)}

    def history(self, case: dict[str, Any]) -> Ranked:
        from .history import HistoryService

        if self._history is None:
            self._history = HistoryService(self.cfg)
        res = self._history.search(case["query"], all_sessions=True, detail=True,
                                   limit=DEPTH)["hits"]
        want = case["expect"]
        return res, lambda h: {i for i, (s, q) in enumerate(want)
                               if (s is None or s == h["session"])
                               and h["start_seq"] <= q <= h["end_seq"]}

    def notes(self, case: dict[str, Any]) -> Ranked:
        from .notes import NotesService

        if self._notes is None:
            self._notes = NotesService(self.cfg, workspace=self.workspace)
        # No viewer: the user, every level. The same candidate pool as before (limit * 4).
        res = self._notes.search(case["query"], viewer=Viewer.user(), limit=DEPTH * 4).get("results", [])
        files = list(dict.fromkeys(r["path"] for r in res))
        want = [w.lower() for w in case["expect"]]
        return files, lambda p: {i for i, w in enumerate(want) if w in p.lower()}

    def objects(self, case: dict[str, Any]) -> Ranked:
        from .objects import ObjectService

        if self._objects is None:
            self._objects = ObjectService(self.cfg.objects)
        want = case["expect"]
        try:
            self._objects.size(case["object"])  # live? (reads the row only)
        except InputError as e:
            raise InputError(f"case {case['n']}: no live object '{case['object']}'") from e
        if not str(case["query"]).strip():
            return [], lambda ln: set()
        # Not a recall (an eval is not the agent), and the matches alone: no failure region
        # filled in after them.
        res = self._objects.search_in(case["object"], case["query"], limit=DEPTH, count=False,
                                      fill=False)
        return [m.line for m in res.matches], lambda ln: {i for i, w in enumerate(want) if w == ln}

    def close(self) -> None:
        for s in (self._code, self._history, self._notes, self._objects):
            if s is not None:
                s.close()


def evaluate(cases: list[dict[str, Any]], cfg: Config, workspace: Path) -> dict[str, Any]:
    """Scores per source and overall, with the misses (rank 0 or > 1) listed."""
    from .report import usage

    runner = _Runner(cfg, Path(workspace).resolve())
    rows: list[dict[str, Any]] = []
    try:
        with usage.collect():  # an evaluation is not usage
            for case in cases:
                units, matches = runner.by_source[case["source"]](case)
                g = gains(units, len(case["expect"]), matches)
                rows.append({"case": case, "rank": first_rank(g),
                             "ndcg": ndcg(g, len(case["expect"])),
                             "top": str(units[0]) if units else None})
    finally:
        runner.close()
    by_source = {s: summarise([r for r in rows if r["case"]["source"] == s])
                 for s in SOURCES if any(r["case"]["source"] == s for r in rows)}
    misses = [{"case": r["case"]["n"], "source": r["case"]["source"],
               "query": r["case"]["query"][:120], "rank": r["rank"], "top": r["top"]}
              for r in rows if r["rank"] != 1]
    return {**summarise(rows), "by_source": by_source, "misses": misses}


def render_text(d: dict[str, Any]) -> str:
    head = f"{'source':<9} {'cases':>5} " + " ".join(f"{'hit@' + str(k):>7}" for k in KS) \
        + f" {'mrr':>7} {'ndcg@10':>8}"
    lines = [head]

    def line(name: str, s: dict[str, Any]) -> str:
        return (f"{name:<9} {s['cases']:>5} " + " ".join(f"{s[f'hit@{k}']:>7.3f}" for k in KS)
                + f" {s['mrr']:>7.3f} {s['ndcg@10']:>8.3f}")

    for src, s in d["by_source"].items():
        lines.append(line(src, s))
    if len(d["by_source"]) > 1:
        lines.append(line("all", d))
    for m in d["misses"][:20]:
        lines.append(f"  miss {m['source']} case {m['case']} (rank {m['rank'] or '-'}): "
                     f"{m['query']!r} -> top {m['top']}")
    if len(d["misses"]) > 20:
        lines.append(f"  ... {len(d['misses']) - 20} more misses (--json lists them all)")
    return "\n".join(lines)

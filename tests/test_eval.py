"""`dsh-recall eval`: cases for every source, Hit@k / MRR / nDCG@10 checked against values
worked out here, and files that are not cases refused with the reason."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.cli import cli
from dsh_recall.services import evaluate, history
from dsh_recall.services.code import CodeService
from dsh_recall.services.objects import ObjectService
from dsh_recall.services.report import usage


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- refusing what is not a cases file --------------------------------------------------------

@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("   \n\n", "is empty"),
    ('{"query": "a", "paths": ["x.py"]}\nnot json\n', "line 2 is not JSON"),
    ("42", "holds int, not cases"),
    ('[{"paths": ["x.py"]}]', "case 1 .* has no query"),
    ('[{"query": "a"}]', "case 1 .* cannot tell its source"),
    ('[{"query": "a", "source": "mail", "paths": ["x"]}]', "unknown source 'mail'"),
    ('[{"query": "a", "source": "code"}]', "has no expectation"),
    ('[{"query": "a", "lines": [3]}]', "needs the object id"),
    ('[{"query": "a", "seqs": ["x"]}]', "bad expectation"),
    ("[1]", "case 1 .* is not a JSON object"),
    ("[]", "holds no cases"),
])
def test_a_file_that_is_not_cases_is_refused_with_the_reason(tmp_path, content, message):
    f = write(tmp_path / "cases.jsonl", content)
    with pytest.raises(InputError, match=message):
        evaluate.load_cases(f)


def test_one_line_jsonl_is_one_case_and_sources_are_read_from_keys(tmp_path):
    f = write(tmp_path / "one.jsonl", '{"query": "retry", "paths": ["src/retry.py"]}\n')
    (case,) = evaluate.load_cases(f)
    assert case["source"] == "code" and case["expect"] == ["src/retry.py"]
    f = write(tmp_path / "mixed.jsonl", "\n".join(json.dumps(c) for c in [
        {"query": "a", "files": ["deploy.md"]},
        {"query": "b", "session": "s1", "seqs": [3, 4]},
        {"query": "c", "events": [{"session": "s2", "seq": 9}]},
        {"query": "d", "object": "abcd1234", "lines": 12},
        {"question": "e", "source": "notes", "paths": ["x.md"]},
    ]))
    got = evaluate.load_cases(f)
    assert [c["source"] for c in got] == ["notes", "history", "history", "objects", "notes"]
    assert got[1]["expect"] == [("s1", 3), ("s1", 4)] and got[2]["expect"] == [("s2", 9)]
    assert got[3]["expect"] == [12] and got[3]["object"] == "abcd1234"
    # --source names the source of cases that do not say.
    (case,) = evaluate.load_cases(write(tmp_path / "n.jsonl", '{"query": "x", "paths": ["a.md"]}'),
                                  "notes")
    assert case["source"] == "notes"


def test_cli_refusal_is_one_line_and_exit_1(tmp_path):
    res = CliRunner().invoke(cli, ["eval", str(write(tmp_path / "c.jsonl", "nope\n"))])
    assert res.exit_code == 1
    assert res.output.strip().count("\n") == 0 and "line 1 is not JSON" in res.output
    res = CliRunner().invoke(cli, ["eval", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 1 and "cannot read cases file" in res.output


# -- metrics ---------------------------------------------------------------------------------

def test_metrics_on_worked_examples():
    g = evaluate.gains(["a", "x", "b", "a"], 2, lambda u: {"a": {0}, "b": {1}}.get(u, set()))
    assert g == [1, 0, 1, 0]  # the second "a" adds nothing new
    assert evaluate.first_rank(g) == 1
    assert evaluate.ndcg(g, 2) == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    assert evaluate.first_rank([0, 0, 1]) == 3 and evaluate.first_rank([0, 0]) is None
    rows = [{"rank": 1, "ndcg": 1.0}, {"rank": 3, "ndcg": 0.5}, {"rank": None, "ndcg": 0.0}]
    s = evaluate.summarise(rows)
    assert (s["hit@1"], s["hit@3"], s["hit@10"]) == (round(1 / 3, 4), round(2 / 3, 4), round(2 / 3, 4))
    assert s["mrr"] == round((1 + 1 / 3) / 3, 4) and s["ndcg@10"] == 0.5


@given(st.lists(st.integers(0, 5), max_size=15), st.integers(1, 6))
def test_ndcg_is_between_0_and_1_and_hits_grow_with_k(units, n_expected):
    g = evaluate.gains(units, n_expected, lambda u: {u} if u < n_expected else set())
    assert 0.0 <= evaluate.ndcg(g, n_expected) <= 1.0 + 1e-9
    s = evaluate.summarise([{"rank": evaluate.first_rank(g), "ndcg": evaluate.ndcg(g, n_expected)}])
    assert s["hit@1"] <= s["hit@3"] <= s["hit@5"] <= s["hit@10"]


# -- every source, end to end -------------------------------------------------------------------

def test_every_source_scored_as_worked_out_from_its_own_ranking(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    repo = tmp_path / "repo"
    repo.mkdir()
    write(repo / "retry.py", "def retry_with_backoff(call):\n    return call()\n")
    write(repo / "billing.py", "def compute_invoice_total(items):\n    return sum(items)\n")
    write(repo / "util.py", "def helper():\n    return None\n")
    memory = tmp_path / "memory"
    memory.mkdir()
    write(memory / "deploy.md", "# Deploy\n\nStaging deploys need the vault key.\n")
    write(memory / "people.md", "# People\n\nAlice leads the data team.\n")
    cfg = load_config(workspace=repo, overrides={"embedder": {"name": "fake"},
                                                 "notes": {"roots": [str(memory)]}})
    rows = [{"session": "s1", "seq": 0, "role": "user", "text": "we chose PostgreSQL for the ledger"},
            {"session": "s1", "seq": 1, "role": "assistant", "text": "pool size stays at twenty"},
            {"session": "s2", "seq": 0, "role": "user", "text": "ingress timeout raised to 60s"}]
    src = write(tmp_path / "h.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    history.import_paths([str(src)], fmt="generic", cfg=cfg)
    log = "".join(f"step {i} ok\n" for i in range(300)) + "FATAL: disk full\n" + "tail\n" * 50
    with ObjectService(cfg.objects) as objs:
        obj = objs.put(log, session="o", tool="bash").id
        recalls = objs.stats()["recalls"]

    cases = [
        {"query": "retry with backoff", "paths": ["retry.py"]},
        {"query": "compute invoice total", "paths": ["billing.py", "util.py"]},
        {"query": "nothing matches quux", "paths": ["retry.py"]},
        {"query": "PostgreSQL ledger", "session": "s1", "seqs": [0]},
        {"query": "ingress timeout", "events": [{"session": "s1", "seq": 1}]},
        {"query": "vault key staging", "files": ["deploy.md"]},
        {"query": "FATAL disk", "object": obj, "lines": [301]},
        {"query": "step 7 ok", "object": obj, "lines": [999]},
    ]
    f = write(tmp_path / "cases.json", json.dumps({"cases": cases}))
    before = usage.read(home)[0]
    out = evaluate.evaluate(evaluate.load_cases(f), cfg, repo)
    after = usage.read(home)[0]

    # Worked out here from the code index's own ranking of each case.
    svc = CodeService(repo, cfg)
    ranks, ndcgs = [], []
    for c in cases[:3]:
        order = list(dict.fromkeys(r["path"] for r in svc.search(c["query"], limit=40)["results"]))
        g = [1 if p in c["paths"] else 0 for p in order[:10]]
        ideal = sum(1 / math.log2(i + 1) for i in range(1, len(c["paths"]) + 1))
        ranks.append(g.index(1) + 1 if 1 in g else None)
        ndcgs.append(sum(x / math.log2(i + 1) for i, x in enumerate(g, 1)) / ideal)
    svc.close()
    assert ranks[:2] == [1, 1]
    code = out["by_source"]["code"]
    assert code["cases"] == 3
    assert code["hit@1"] == round(sum(1 for r in ranks if r == 1) / 3, 4)
    assert code["mrr"] == round(sum(1 / r for r in ranks if r) / 3, 4)
    assert code["ndcg@10"] == round(sum(ndcgs) / 3, 4)
    hranks = []
    for c, (sid, seq) in ((cases[3], ("s1", 0)), (cases[4], ("s1", 1))):
        hits = history.search(c["query"], all_sessions=True, detail=True, limit=10, cfg=cfg)["hits"]
        hranks.append(next((i for i, h in enumerate(hits, 1) if h["session"] == sid
                            and h["start_seq"] <= seq <= h["end_seq"]), None))
    assert hranks[0] == 1 and hranks[1] != 1  # s1 seq 1 is not about ingress
    hist = out["by_source"]["history"]
    assert (hist["cases"], hist["hit@1"]) == (2, 0.5)
    assert hist["mrr"] == round(sum(1 / r for r in hranks if r) / 2, 4)
    assert out["by_source"]["notes"] == {"cases": 1, "hit@1": 1.0, "hit@3": 1.0, "hit@5": 1.0,
                                         "hit@10": 1.0, "mrr": 1.0, "ndcg@10": 1.0}
    objects = out["by_source"]["objects"]
    assert (objects["hit@1"], objects["mrr"]) == (0.5, 0.5)
    assert out["cases"] == 8
    assert {(m["source"], m["case"]) for m in out["misses"]} == {
        ("history", 5), ("objects", 8)} | ({("code", 3)} if ranks[2] != 1 else set())
    # An evaluation leaves no usage records and counts no recalls.
    assert after == before
    with ObjectService(cfg.objects) as objs:
        assert objs.stats()["recalls"] == recalls

    res = CliRunner().invoke(cli, ["eval", str(f), "--workspace", str(repo), "--json"],
                             env={"DSH_RECALL_EMBEDDER__NAME": "fake",
                                  "DSH_RECALL_NOTES__ROOTS": json.dumps([str(memory)])})
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["by_source"]["code"] == code
    res = CliRunner().invoke(cli, ["eval", str(f), "--workspace", str(repo)],
                             env={"DSH_RECALL_EMBEDDER__NAME": "fake",
                                  "DSH_RECALL_NOTES__ROOTS": json.dumps([str(memory)])})
    assert "ndcg@10" in res.output and "miss history case 5" in res.output

"""Fusion that cannot lose to its best layer by much (code), on fully embedded trees.

A question in plain words tilts the fusion toward the vector layer (rank/fuse.layer_weights:
the lexical layer counts a quarter). That presumes the vector layer read the question. When
its best cosine is under the calibrated "nothing close" line (rank/confidence.NONE_COSINE)
while the lexical layer's best hit holds the question strongly (confidence.STRONG_COVERAGE),
the fusion follows the layer that found something: no tilt (services/hybrid.rank `answers`).

The repros on real trees use the SWE-bench dev bundle's trees with the shipped model, fully
embedded; they skip, saying why, when RECALL_EVAL_DIR is unset.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.rank.confidence import NONE_COSINE
from dsh_recall.rank.fuse import layer_weights
from dsh_recall.rank.query import Query
from dsh_recall.services import hybrid
from dsh_recall.services.code import CodeService

EVAL = Path(os.environ["RECALL_EVAL_DIR"]) if os.environ.get("RECALL_EVAL_DIR") else None
BUNDLE = EVAL / "swebench-dev" / "trees.bundle" if EVAL else None
needs_bundle = pytest.mark.skipif(
    BUNDLE is None or not BUNDLE.exists(),
    reason="RECALL_EVAL_DIR is unset (or has no swebench-dev/trees.bundle): the fusion repros "
           "run on the dev bundle's real trees, fully embedded (.ci/run sets it)")

FLASK = "flask-d8c37f43724cd9fb0870f77877b7c4c7e38a19e0"
REQUESTS = "requests-847735553aeda6e6633f2b32e14ba14ba86887a4"


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """A dev tree from the bundle, indexed and fully embedded with the shipped model, once
    per module: an open CodeService on it."""
    base = tmp_path_factory.mktemp("fusion")
    bare = base / "trees.git"
    open_: dict[str, CodeService] = {}

    def get(tag: str) -> CodeService:
        if tag not in open_:
            if not bare.exists():
                subprocess.run(["git", "clone", "-q", "--bare", str(BUNDLE), str(bare)], check=True)
            ws = base / tag
            ws.mkdir()
            archive = subprocess.run(["git", "--git-dir", str(bare), "archive", tag], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(ws)], input=archive, check=True)
            svc = CodeService(ws, load_config(workspace=ws), base / "home")
            svc.index()
            assert svc.store.pending_count() == 0
            open_[tag] = svc
        return open_[tag]

    yield get
    for svc in open_.values():
        svc.close()


def files(answer: dict, n: int) -> list[str]:
    return list(dict.fromkeys(r["path"] for r in answer["results"]))[:n]


# -- the repros, on real trees with the shipped model ----------------------------------------

@needs_bundle
def test_a_vector_layer_that_found_nothing_close_does_not_lead_a_plain_words_question(embedded):
    # Fully embedded hybrid answered models.py, sessions.py, docs/user/quickstart.rst first
    # (the vector layer's best cosine 0.33, every hit of it off the topic), and utils.py's
    # default_headers, the lexical layer's 4th, came 5th; lexical only had it in its top 3.
    svc = embedded(REQUESTS)
    query = "where are the default headers set"
    hybrid_top = files(svc.search(query), 3)
    lexical_top = files(svc.search(query, layers=("lexical",)), 3)
    assert "requests/utils.py" in lexical_top
    assert "requests/utils.py" in hybrid_top, hybrid_top


@needs_bundle
@pytest.mark.xfail(strict=True, reason="open: the method sits in a chunk whose first 128 tokens "
                   "(all the shipped model reads) are another method's (docs/code-ranking.md)")
def test_a_method_past_the_models_window_is_found(embedded):
    # `Flask.register_blueprint` shares app.py's chunk 986-1023 with `test_cli_runner`, whose
    # body fills the model's window: the chunk's cosine is 0.24 (the method alone: 0.50) and
    # its words hold "blueprints" once, so neither layer ranks it in its best 80.
    svc = embedded(FLASK)
    out = svc.search("where are blueprints registered on the app", limit=10)
    found = [r for r in out["results"] if "Flask.register_blueprint" in r["symbols"]]
    assert found, [(r["path"], r["symbols"][:2]) for r in out["results"]]


# -- anywhere: the rule itself ------------------------------------------------------------------

def _rank(vector_scores, answers):
    head = hybrid.Head()

    def vector():
        def wait(_deadline):
            return vector_scores
        return wait

    return hybrid.rank(Query.parse("where are the default headers set"), ("lexical", "vector"),
                       lexical=lambda: [(1, 9.0), (2, 8.0), (3, 7.0)], vector=vector,
                       deadline=1e18, notes=[], lexical_weight=1.0, vector_weight=1.0, rrf_k=10,
                       head=head, answers=answers)


def test_the_plain_words_tilt_needs_a_vector_layer_that_found_something():
    asked: list[int] = []

    def answers(item: int) -> bool:
        asked.append(item)
        return True

    off_topic = [(9, NONE_COSINE - 0.02), (8, NONE_COSINE - 0.03), (3, 0.2), (2, 0.1), (1, 0.05)]
    # The vector layer found nothing close, the lexical layer's best answers: both count
    # the same, so the lexical layer's first two (ranked by both) stay ahead.
    followed = [i for i, _, _ in _rank(off_topic, answers).fused]
    assert asked == [1]
    assert followed.index(1) < followed.index(9)
    # The lexical layer's best does not answer either: the tilt stands (the vector layer's
    # first passes the lexical layer's, as before).
    tilted = [i for i, _, _ in _rank(off_topic, lambda _i: False).fused]
    assert tilted.index(9) < tilted.index(1)
    # A vector layer on the topic keeps the tilt, and the lexical hit is never read.
    asked.clear()
    on_topic = [(9, NONE_COSINE + 0.1)] + off_topic[1:]
    kept = [i for i, _, _ in _rank(on_topic, answers).fused]
    assert kept.index(9) < kept.index(1)
    assert asked == []


def test_layer_weights_tilt():
    q = "where are the default headers set"
    assert layer_weights(Query.parse(q), 1.0, 1.0)["lexical"] < 1.0
    assert layer_weights(Query.parse(q), 1.0, 1.0, tilt=False) == {"lexical": 1.0, "vector": 1.0}
    assert layer_weights(Query.parse("default_headers"), 1.0, 1.0) == {"lexical": 1.0, "vector": 1.0}

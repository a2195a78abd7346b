"""The file-ranking rules of docs/code-ranking.md, each on a tiny workspace with the fake
embedder: the rule off gives one order, on (its default) the other; plus the pure helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.rank import code_files as cf
from dsh_recall.rank.fuse import is_config_path, names_file, path_prior
from dsh_recall.rank.query import Query
from dsh_recall.services.code import CodeService

OFF = {"long_query_words": 0, "config_weight": 1.0, "file_decay": 0.0, "test_transfer": 0.0,
       "path_boost": 1.0, "query_focus": False, "title_weight": 0.0}


def service(ws: Path, **over) -> CodeService:
    svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake"}, **over}))
    svc.index()
    return svc


def files_for(svc: CodeService, query: str, layers=("lexical",)) -> list[str]:
    return [r["path"] for r in svc.search(query, files=True, limit=10, layers=layers)["results"]]


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def function(name: str, words: str, lines: int = 24) -> str:
    """A top-level function long enough to be its own chunk."""
    body = "\n".join(f"    step_{i} = {i}  # {words}" if i % 6 == 0 else f"    step_{i} = {i}"
                     for i in range(lines))
    return f"def {name}():\n{body}\n    return step_0\n\n\n"


# -- a long paste never asks for tests / docs ---------------------------------------------

PARSER = "def parse_header(raw):\n    '''Split a header line into name and value.'''\n" \
         "    name, _, value = raw.partition(':')\n    return name.strip(), value.strip()\n"
PARSER_TEST = ("from pkg.parser import parse_header\n\n\ndef test_parse_header_value():\n"
               "    assert parse_header('a: b') == ('a', 'b')  # header value split name\n\n\n"
               "def test_parse_header_colon():\n    assert parse_header('a:b:c') == ('a', 'b:c')"
               "  # header value split name colon\n")
LONG_ISSUE = ("The parser loses part of the header value when the value itself holds a colon; "
              "I wrote a small test to show it, the name comes back fine but the value is split "
              "at the wrong place and my header value ends up truncated in every request we send")


def test_long_paste_saying_test_keeps_the_test_prior(tmp_path):
    ws = write(tmp_path / "ws", {"pkg/parser.py": PARSER, "tests/test_parser.py": PARSER_TEST})
    assert len(LONG_ISSUE.split()) > 24
    before = files_for(service(ws, **OFF), LONG_ISSUE)
    after = files_for(service(ws, **{**OFF, "long_query_words": 24}), LONG_ISSUE)
    assert before[0] == "tests/test_parser.py"  # "test" in the paste lifted the prior
    assert after[0] == "pkg/parser.py"


def test_short_query_may_still_ask_for_tests(tmp_path):
    ws = write(tmp_path / "ws", {"pkg/parser.py": PARSER, "tests/test_parser.py": PARSER_TEST})
    assert files_for(service(ws), "tests for header value split")[0] == "tests/test_parser.py"


def test_intent_terms_pure():
    assert Query.parse("tests for parse").intent(24) == ("tests", "parse")
    assert Query.parse(" ".join(["word"] * 30)).intent(24) == ()
    assert Query.parse(" ".join(["word"] * 30)).intent(0) == ("word",)


# -- build / config files ------------------------------------------------------------------

def test_config_files_rank_below_code_unless_named(tmp_path):
    ws = write(tmp_path / "ws", {
        "tox.ini": "[testenv]\ncoverage_report = true\ncoverage_report_format = xml\n"
                   "# coverage report format coverage report\n",
        "pkg/report.py": "def coverage_report(data, fmt):\n    '''Write the coverage report.'''\n"
                         "    return render(data, fmt)\n",
    })
    q = "coverage report format"
    assert files_for(service(ws, **OFF), q)[0] == "tox.ini"
    assert files_for(service(ws, **{**OFF, "config_weight": 0.5}), q)[0] == "pkg/report.py"
    # a query naming the file (or its format) asks for it
    assert files_for(service(ws, **{**OFF, "config_weight": 0.5}), "tox.ini coverage report format")[0] \
        == "tox.ini"


@pytest.mark.parametrize("path,config", [
    ("setup.py", True), ("tox.ini", True), (".travis.yml", True), ("pyproject.toml", True),
    (".github/workflows/ci.yml", True), (".github/scripts/x.py", True), ("package.json", True),
    ("src/app/models.py", False), ("docs/index.md", False), ("README.rst", False),
    ("web/app.tsx", False), ("CHANGELOG.md", False),
])
def test_is_config_path(path, config):
    assert is_config_path(path) is config


def test_config_prior_pure():
    assert path_prior("tox.ini", [], 0.5, 0.7, 0.5) == 0.5
    assert path_prior("tox.ini", ["ini"], 0.5, 0.7, 0.5) == 1.0
    assert path_prior("tox.ini", ["tox"], 0.5, 0.7, 0.5) == 1.0
    assert path_prior("pkg/tox.py", [], 0.5, 0.7, 0.5) == 1.0
    assert names_file(".travis.yml", ["travis"]) and names_file("a/b.yaml", ["yaml"])
    assert not names_file("a/b.yaml", ["b2"])


# -- per-file evidence ---------------------------------------------------------------------

def test_file_evidence_adds_up_over_chunks(tmp_path):
    # one chunk of single.py matches best; three chunks of spread.py match a little less
    single = function("alpha_one", "cache eviction policy lru eviction cache policy")
    spread = (function("beta_one", "cache eviction policy lru")
              + function("beta_two", "cache eviction policy lru")
              + function("beta_three", "cache eviction policy lru"))
    ws = write(tmp_path / "ws", {"pkg/single.py": single, "pkg/spread.py": spread,
                                 "pkg/noise.py": function("gamma", "unrelated words here")})
    svc = service(ws, **OFF)
    chunks = svc.search("cache eviction policy lru", limit=10, layers=("lexical",))["results"]
    assert [r["path"] for r in chunks[:4]].count("pkg/spread.py") == 3  # own chunks, ranked 2-4
    q = "cache eviction policy lru"
    assert files_for(svc, q)[:2] == ["pkg/single.py", "pkg/spread.py"]
    assert files_for(service(ws, **{**OFF, "file_decay": 0.2}), q)[:2] == ["pkg/spread.py", "pkg/single.py"]


def test_aggregate_pure():
    got = cf.aggregate([("a", 1.0), ("b", 0.9), ("b", 0.5), ("b", 0.5), ("b", 0.5)], 0.5, 3)
    assert got["a"] == 1.0
    assert got["b"] == pytest.approx(0.9 + 0.25 + 0.125)
    assert cf.aggregate([("b", 0.9), ("b", 0.5)], 0.0, 3) == {"b": 0.9}
    assert cf.aggregate([("b", 0.9), ("b", 0.5)], 0.5, 1) == {"b": 0.9}


# -- a test passes evidence to the file it tests --------------------------------------------

def test_test_file_lifts_the_file_it_tests(tmp_path):
    ws = write(tmp_path / "ws", {
        # the test says everything the query says; the module it tests says little of it
        "tests/test_widget.py": "from pkg.widget import render_widget\nfrom pkg import helpers\n\n\n"
                                "def test_render_widget_border_overflow_truncates():\n"
                                "    # widget border overflow truncates label text\n"
                                "    assert render_widget('x' * 99).endswith('...')\n",
        "pkg/widget.py": "def render_widget(label):\n    return label[:10] + '...'\n",
        "pkg/helpers.py": "def label_text(x):\n    return str(x)  # label text border\n",
        "pkg/__init__.py": "",
    })
    q = "widget border overflow truncates label text"
    before = files_for(service(ws, **OFF), q)
    after = files_for(service(ws, **{**OFF, "test_transfer": 0.5}), q)
    assert before.index("pkg/helpers.py") < before.index("pkg/widget.py")
    assert after.index("pkg/widget.py") < after.index("pkg/helpers.py")


def test_test_transfer_reaches_a_file_no_layer_ranked(tmp_path):
    ws = write(tmp_path / "ws", {
        "pkg/tests/test_codec.py": "def test_codec_roundtrip_unicode_surrogates():\n"
                                   "    '''codec roundtrip unicode surrogates'''\n",
        "pkg/codec.py": "def encode(x):\n    return x\n",
        "pkg/other.py": "def unrelated():\n    return 1\n",
    })
    q = "roundtrip unicode surrogates"
    assert "pkg/codec.py" not in files_for(service(ws, **OFF), q)
    assert "pkg/codec.py" in files_for(service(ws, **{**OFF, "test_transfer": 0.5}), q)


@pytest.mark.parametrize("path,subject", [
    ("testing/test_assertrewrite.py", "assertrewrite"), ("pkg/foo_test.go", "foo"),
    ("web/foo.test.ts", "foo"), ("src/test/java/a/FooTest.java", "Foo"),
    ("spec/models/user_spec.rb", "user"), ("tests/conftest.py", None), ("src/foo.py", None),
    ("tests/test.py", None),
])
def test_tested_name(path, subject):
    assert cf.tested_name(path) == subject


def test_tested_files_pure():
    idx = {"astropy/io/fits/card.py", "pkg/foo.go", "src/main/java/a/Foo.java", "web/foo.ts",
           "lib/bar.js", "src/_pytest/assertion/rewrite.py", "requests/__init__.py",
           "src/_pytest/main.py"}
    look = idx.__contains__
    assert cf.tested_files("astropy/io/fits/tests/test_card.py", "from astropy.io import fits", look) \
        == ["astropy/io/fits/card.py"]
    assert cf.tested_files("pkg/foo_test.go", "package pkg", look) == ["pkg/foo.go"]
    assert cf.tested_files("src/test/java/a/FooTest.java", "", look) == ["src/main/java/a/Foo.java"]
    assert cf.tested_files("web/foo.test.ts", "import {x} from './foo'", look) == ["web/foo.ts"]
    assert cf.tested_files("lib/__tests__/bar.test.js", "const b = require('../bar')", look) == ["lib/bar.js"]
    # the import whose module is part of the test's name, under the package's real root
    assert cf.tested_files("testing/test_assertrewrite.py",
                        "from _pytest.main import ExitCode\nfrom _pytest.assertion.rewrite import X",
                        look, ["src/_pytest/main.py"]) == ["src/_pytest/assertion/rewrite.py"]
    # a package's module named like the test before its __init__
    pk = {"django/forms/__init__.py", "django/forms/forms.py", "django/db/__init__.py"}
    assert cf.tested_files("tests/forms_tests/tests/test_forms.py", "from django.forms import Form",
                           pk.__contains__, ["django/db/__init__.py"]) == ["django/forms/forms.py"]
    # the one candidate named like the test, wherever it lives
    xr = {"xarray/core/dataset.py", "xarray/core/variable.py"}
    assert cf.tested_files("xarray/tests/test_dataset.py", "import xarray as xr", xr.__contains__,
                           ["xarray/core/variable.py", "xarray/core/dataset.py"]) == ["xarray/core/dataset.py"]
    assert cf.tested_files("xarray/tests/test_dataset.py", "import xarray as xr", xr.__contains__,
                           ["xarray/core/dataset.py", "xarray/io/dataset.py"]) == []
    # a test named after the whole project points nowhere in it
    assert cf.tested_files("tests/test_requests.py", "import requests", look) == []
    assert cf.tested_files("src/app.py", "from pkg import foo", look) == []


def test_python_imports_pure():
    text = ("import os, sys as s\nfrom a.b import (c,\n    d)\nfrom . import x\n"
            "from e.f import g  # why\n    import h.i\n")
    got = cf.python_imports(text)
    assert {"os", "sys", "a.b", "a.b.c", "e.f", "e.f.g", "h.i"} <= set(got)
    assert not any(m.startswith(".") for m in got)


# -- a path the query writes ----------------------------------------------------------------

TRACE = """Crash when saving a record with an empty name, the save fails with this traceback

Traceback (most recent call last):
  File "/home/me/venv/lib/python3.11/site-packages/pkg/store.py", line 40, in persist
ValueError: empty name in record
"""


def test_path_written_in_the_query_is_boosted(tmp_path):
    ws = write(tmp_path / "ws", {
        "pkg/record.py": "def record_name(record):\n    # crash saving record: empty name\n"
                         "    return record.name  # empty name in record, save fails\n",
        "pkg/store.py": "def persist(row):\n    return row\n",
    })
    before = files_for(service(ws, **OFF), TRACE)
    after = files_for(service(ws, **{**OFF, "path_boost": 1.5}), TRACE)
    assert before.index("pkg/record.py") < before.index("pkg/store.py")
    assert after[0] == "pkg/store.py"


def test_path_written_enters_the_answer_when_no_layer_ranked_it(tmp_path):
    ws = write(tmp_path / "ws", {
        "pkg/record.py": "def record_name(record):\n    return record.name  # empty name record\n",
        "pkg/zz_store.py": "def persist():\n    pass\n",
    })
    q = "empty name record breaks, see pkg/zz_store.py"
    assert "pkg/zz_store.py" not in files_for(service(ws, **OFF), "empty name record breaks")
    assert "pkg/zz_store.py" in files_for(service(ws), q)


def test_written_paths_and_resolution_pure():
    q = ('File "/venv/lib/python3.9/site-packages/astropy/io/fits/card.py", line 12\n'
         'File "C:\\proj\\src\\app\\views.py", line 3\n'
         "see requests/sessions.py, sessions.py, main.go:42 and ./web/app.test.ts; v1.2.3")
    written = list(Query.parse(q).paths)
    assert written[:3] == ["venv/lib/python3.9/site-packages/astropy/io/fits/card.py",
                           "proj/src/app/views.py", "requests/sessions.py"]
    assert "main.go" in written and "./web/app.test.ts" in written
    assert not any("1.2.3" in w for w in written)
    idx = {"astropy/io/fits/card.py", "src/app/views.py", "requests/sessions.py",
           "web/app.test.ts"}
    got = cf.resolve_written(written, idx.__contains__, present=["requests/sessions.py", "main.go"])
    assert got == ["astropy/io/fits/card.py", "src/app/views.py", "requests/sessions.py",
                   "main.go", "web/app.test.ts"]
    # a bare name two candidates share names neither
    assert cf.resolve_written(["util.py"], idx.__contains__, ["a/util.py", "b/util.py"]) == []


def test_file_rules_stay_inside_a_path_scope(tmp_path):
    ws = write(tmp_path / "ws", {
        "app/record.py": "def record_name(record):\n    return record.name  # empty name record\n",
        "lib/zz_store.py": "def persist():\n    pass\n",
        "app/tests/test_codec.py": "def test_roundtrip_unicode_surrogates():\n    '''roundtrip'''\n",
        "lib/codec.py": "def encode(x):\n    return x\n",
    })
    svc = service(ws)
    wide = [r["path"] for r in svc.search("empty name record, see lib/zz_store.py", files=True)["results"]]
    assert "lib/zz_store.py" in wide
    scoped = svc.search("empty name record, see lib/zz_store.py", files=True, path="app")["results"]
    assert scoped and all(r["path"].startswith("app/") for r in scoped)
    scoped = svc.search("roundtrip unicode surrogates", files=True, path="app")["results"]
    assert all(r["path"].startswith("app/") for r in scoped)


# -- a long query's title and prose before its pasted environment listing ------------------

from dsh_recall.rank import lexical as lex  # noqa: E402

PACKAGES = [f"pkg{chr(97 + i // 26)}{chr(97 + i % 26)}lib" for i in range(60)]
FREEZE_ISSUE = ("Dynamically adding xfail marker no longer ignores failure\n\n"
                "After the upgrade a marker added while the item runs is not honoured.\n"
                "```\n" + "\n".join(f"{p}=={i}.0.1" for i, p in enumerate(PACKAGES)) + "\n```\n"
                "platform linux -- Python 3.8.5, pytest-6.0.0rc2, pluggy-0.13.1\n")


def tiers_of(text: str) -> dict[str, int]:
    return dict(Query.parse(text).tiers)


def test_focus_tiers_pure():
    tiers = tiers_of(FREEZE_ISSUE)
    assert tiers["xfail"] == 0 and tiers["dynamically"] == 0  # the title
    assert tiers["upgrade"] == 1 and tiers["honoured"] == 1  # prose
    assert tiers["pkgaalib"] == 2 and tiers["pluggy"] == 2  # lines listing versions
    assert all(t != "0" for t in tiers)  # query_terms dropped the lone digits
    assert tiers_of("one line about xfail") == {}
    # an identifier written in a listing line still counts as written
    assert tiers_of("title\n\nthe fix is in parse_header\nparse_header==1.0\n")["parse_header"] == 1


def test_select_terms_takes_tiers_before_rarity():
    terms = ["common", "title"] + [f"rare{i}" for i in range(60)]
    df = {"common": 5, "title": 9, **{f"rare{i}": 1 for i in range(60)}}

    def freqs(ts):
        return {t: df[t] for t in ts}

    plain = lex.select_terms(terms, freqs, 100)
    assert "title" not in plain and len(plain) == lex.MAX_TERMS
    tiered = lex.select_terms(terms, freqs, 100, tiers={"title": 0, "common": 1})
    assert tiered[:2] == ["title", "common"] and len(tiered) == lex.MAX_TERMS
    # a tier lifts only a term in at most `promote_share` of the chunks (here 50 rows at
    # least): in a 1,000-chunk index at 5%, "title" (in 9) is lifted, a word in 60 is not
    df["common"] = 60
    capped = lex.select_terms(terms, freqs, 1000, tiers={"title": 0, "common": 0}, promote_share=0.05)
    assert capped[0] == "title" and "common" not in capped


def test_pasted_listing_does_not_crowd_out_the_title(tmp_path):
    marker = ("def add_marker(item, name):\n    '''Dynamically adding an xfail marker while the item"
              " runs: a failure it ignores.'''\n    item.own_markers.append(name)\n")
    files = {"pkg/skipping.py": marker + function("evaluate_xfail", "xfail marker failure ignores"),
             "pkg/mark.py": function("marker_names", "xfail marker dynamically adding"),
             "pkg/runner.py": function("call_item", "failure ignores marker"),
             # the environment's packages each written once somewhere in the tree
             "pkg/compat.py": "".join(function(f"shim_{p}", p, 6) for p in PACKAGES)}
    ws = write(tmp_path / "ws", files)
    off = files_for(service(ws, query_focus=False, title_weight=0.0), FREEZE_ISSUE)
    on = files_for(service(ws), FREEZE_ISSUE)
    assert off[0] == "pkg/compat.py"  # 48 rarest terms: the listing's package names
    assert on[0] == "pkg/skipping.py"


def test_title_ranking_stands_in_only_when_no_vector_layer_answers(tmp_path):
    ws = write(tmp_path / "ws", {"pkg/skipping.py": function("evaluate_xfail", "xfail marker"),
                                 "pkg/runner.py": function("call_item", "failure runs item")})
    svc = service(ws)
    layers_seen = {}
    for layers in (("lexical",), ("lexical", "vector")):
        out = svc.search(FREEZE_ISSUE, files=True, limit=5, layers=layers, explain=True)
        layers_seen[layers] = {k for r in out["results"] for k in r["ranks"]}
    assert "title" in layers_seen[("lexical",)]
    assert "title" not in layers_seen[("lexical", "vector")] and "vector" in layers_seen[("lexical", "vector")]
    one_line = svc.search("xfail marker", files=True, limit=5, layers=("lexical",), explain=True)
    assert all("title" not in r["ranks"] for r in one_line["results"])  # no title to tell apart


def test_title_query_beside_the_lexical_one_ranks_as_when_run_after(tmp_path, monkeypatch):
    """Without its score lists in memory the title query runs in a thread of its own, beside
    the main lexical query; once they are there it runs inline. Same answer either way."""
    from dsh_recall.services import hybrid
    ws = write(tmp_path / "ws", {"pkg/skipping.py": function("evaluate_xfail", "xfail marker"),
                                 "pkg/runner.py": function("call_item", "failure runs item"),
                                 "pkg/mark.py": function("marker_names", "xfail marker dynamically")})
    svc = service(ws)
    labels = []
    real = hybrid.start_beside
    monkeypatch.setattr(hybrid, "start_beside",
                        lambda *a, **kw: labels.append(kw.get("label")) or real(*a, **kw))
    first = svc.search(FREEZE_ISSUE, files=True, limit=5, layers=("lexical",), explain=True)
    assert labels == ["title ranking"]
    labels.clear()
    for _ in range(2):  # the first search left the lists behind (computed while it answered)
        again = svc.search(FREEZE_ISSUE, files=True, limit=5, layers=("lexical",), explain=True)
    assert labels == []
    assert [(r["path"], r["ranks"]) for r in first["results"]] == \
        [(r["path"], r["ranks"]) for r in again["results"]]
    assert any("title" in r["ranks"] for r in again["results"])
    svc.close()

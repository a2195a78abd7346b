"""A code search parses its query once (rank/query.Query, where the search enters
services/code/service.py): every ranking stage reads the parse, none tokenizes the query
text again. Counted on a small tree with the fake embedder, for a hybrid search, a
lexical-only one and a --files one, with a pasted issue (title, prose, a version line: the
focus tiers read each part) and a one-line question. The chunks' texts are tokenized at
index time (before counting) and, at search time, a hit's lines and words are read for its
excerpt and its confidence: only calls on the query's own text count."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.services.code import CodeService

# Every module of the code search path that could tokenize a query (the fake embedder
# embeds the query's text: that is the vector layer reading it, not a parse).
MODULES = ("dsh_recall.core.text", "dsh_recall.rank.query", "dsh_recall.rank.lexical",
           "dsh_recall.rank.fuse", "dsh_recall.rank.confidence", "dsh_recall.rank.excerpt",
           "dsh_recall.rank.code_files", "dsh_recall.services.hybrid",
           "dsh_recall.services.code.service", "dsh_recall.services.code.priors",
           "dsh_recall.services.code.vector_layer")
TOKENIZERS = ("code_tokens", "code_tokens_each")

ISSUE = ("Session cookies dropped after a redirect to another host\n"
         "\n"
         "When the server answers with a redirect the session loses its cookie jar entries,\n"
         "so the next request is sent without the login token we set before.\n"
         "platform linux -- Python 3.11.1, pytest-7.2.0, requests 2.31.0\n")
QUESTION = "where is the login token stored for the next request"


def make_tree(root: Path) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "sessions.py").write_text(
        "class Session:\n"
        "    def __init__(self):\n"
        "        self.cookie_jar = {}\n\n"
        "    def resolve_redirects(self, response):\n"
        "        for header in response.headers:\n"
        "            self.cookie_jar[header] = response.headers[header]\n"
        "        return response\n")
    (root / "app" / "auth.py").write_text(
        "def store_login_token(session, token):\n"
        "    session.cookie_jar['token'] = token\n"
        "    return token\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_sessions.py").write_text(
        "from app.sessions import Session\n\n"
        "def test_redirect_keeps_cookies():\n"
        "    assert Session().cookie_jar == {}\n")
    return root


def _of_query(arg: object, text: str) -> bool:
    """Is `arg` the query's text or a part of it (a line, a group of lines)?"""
    parts = [arg] if isinstance(arg, str) else list(arg) if isinstance(arg, (list, tuple)) else []
    return any(isinstance(p, str) and " " in p.strip() and p in text for p in parts)


@pytest.mark.parametrize("text", [ISSUE, QUESTION], ids=["issue", "question"])
def test_a_code_search_tokenizes_its_query_once(tmp_path, monkeypatch, text):
    ws = make_tree(tmp_path / "ws")
    svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake"},
                                                                "search_deadline_s": 120}))
    svc.index()
    calls: list[object] = []
    for name in MODULES:
        mod = importlib.import_module(name)
        for fn in TOKENIZERS:
            real = getattr(mod, fn, None)
            if real is None:
                continue

            def wrapped(arg, *a, _real=real, **k):
                calls.append(arg)
                return _real(arg, *a, **k)

            monkeypatch.setattr(mod, fn, wrapped)
    for layers, files in ((("lexical", "vector"), False), (("lexical",), False),
                          (("lexical", "vector"), True)):
        calls.clear()
        out = svc.search(text, limit=5, layers=layers, files=files)
        assert out["results"], out
        on_query = [c for c in calls if _of_query(c, text)]
        assert len(on_query) == 1, (layers, files, [str(c)[:80] for c in on_query])
    svc.close()

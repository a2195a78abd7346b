"""rank/fuse.names_symbol: which chunks declare a name the query writes (the symbol prior)."""

from __future__ import annotations

import pytest

from dsh_recall.rank.fuse import names_symbol


@pytest.mark.parametrize("symbols, named, want", [
    (("requests.Session.send",), {"session.send"}, True),  # a dotted name: whole trailing parts
    (("requests.Session.send",), {"requests.session.send"}, True),
    (("Session.send",), {"send"}, True),  # a plain name: the last part
    (("a.b.c",), {"b.c"}, True),
    (("Foo",), {"foo"}, True),
    (("send_all",), {"send"}, False),
    (("a.b.c",), {"b"}, False),  # a middle part is not what the chunk declares
    (("a.b.c",), {"a.b"}, False),
    (("ab.c",), {"b.c"}, False),  # parts are whole: no match inside a part
    ((), {"x"}, False),
    (("x",), set(), False),
])
def test_names_symbol(symbols, named, want):
    assert names_symbol(symbols, named) is want
    assert names_symbol(symbols, frozenset(named)) is want

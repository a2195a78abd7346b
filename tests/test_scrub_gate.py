"""The scrubber's gates (policy/scrub_gate.py) change where each rule runs, never what
`scrub.find` returns: the gated `find` against the algorithm before the gates (every rule
over the whole text: bench/scrub_speed.py's `whole_find`) on generated texts, the seeded corpus of
bench/scrub_corpus.py, the dev CI logs with secrets planted in them, and hostile texts
(secrets at window edges and on lines next to each other, CRLF, escaped newlines, a very
long line, a megabyte of one character, characters a case-blind regex folds to ASCII)."""

from __future__ import annotations

import os
import random
import re
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_recall.policy import scrub, scrub_gate
from fixtures import bench_module

ROOT = Path(__file__).resolve().parents[1]
_EVAL = os.environ.get("RECALL_EVAL_DIR")
CASES = Path(_EVAL) / "ci-logs-dev" / "cases" if _EVAL else None


# The algorithm before the gates (every rule over the whole text), as the speed bench runs it.
reference_find = bench_module("scrub_speed").whole_find
BENCH = bench_module("scrub_corpus")
_RNG = random.Random(40)
_A = string.ascii_letters + string.digits


def _r(n: int, chars: str = _A) -> str:
    return "".join(_RNG.choice(chars) for _ in range(n))


# Shapes of the library's rules the corpus does not plant, and near misses.
LIBRARY_SHAPES = [
    "123456789:AA" + _r(33, _A + "_-"), "\u0663" * 9 + ":" + _r(35), "bot 12345678:" + _r(34),
    "M" + _r(23) + "." + _r(6) + "." + _r(27), "N\u0661" + _r(22) + "." + _r(6) + "." + _r(27),
    "AC" + _r(32, string.ascii_lowercase + string.digits), "SK" + _r(32, string.ascii_lowercase),
    "glpat-" + _r(20), "glagent-" + _r(50), "GR1348941" + _r(25), "SG." + _r(22) + "." + _r(43),
    "AccountKey=" + _r(88), "pypi-AgEIcHlwaS5vcmc" + _r(70), "sq0csp-" + _r(43),
    "https://HOOKS.slack.com/services/T" + _r(8) + "/B" + _r(8) + "/" + _r(24), "sk_live_" + _r(24),
    "sk-" + _r(20) + "T3BlbkFJ" + _r(20), "xoxb-1234-5678-" + _r(12, string.ascii_lowercase),
    "aws_key = '" + _r(40) + "'", "AWS PASS: \"" + _r(40) + "\"", "ghp_" + _r(36),
    "pri\u0131vate_key=" + _r(12), "private_\u212aey=" + _r(12) + "9", "pa\u017f\u017fword=" + _r(10) + "1",
    "SECRET_ACCESS_KEY " + _r(40), "AKIA" + _r(16, string.ascii_uppercase) + "\n" + _r(40),
    "-----BEGIN RSA PRIVATE KEY-----\r\n" + _r(64) + "\r\n-----END RSA PRIVATE KEY-----",
    "PuTTY-User-Key-File-3: ssh-ed25519\\nEncryption: none\\n", "login bob\npassword " + _r(12),
    "Authorization: Bearer\n" + _r(30) + "9", "mysqldump -u root -p" + _r(10) + " db",
]
SEPARATORS = ["\n", "\r\n", " ", "\t", "=", ": ", '"', "'", "\\", "\\n", "\\\"", ",", "&", ";", "@",
              "://", "-", "_", "\u0130", "\u212a", "\x85"]


def _fragments() -> list[str]:
    docs = BENCH.corpus(80, seed=40)
    lines = [line for d in docs for line in d.text.split("\n")]
    literals = sorted({lit for g in scrub.gates() for lit in g.literals})
    return lines + LIBRARY_SHAPES + literals


FRAGMENTS = _fragments()


@pytest.fixture(params=["default", "a window per line"])
def windows(request, monkeypatch):
    """The gates as shipped, and with every candidate line its own window (no merging, no
    giving up on a common literal), which puts more matches at window edges."""
    if request.param != "default":
        monkeypatch.setattr(scrub_gate, "GAP", -1)
        monkeypatch.setattr(scrub_gate, "MAX_LINES_PER_MB", 10**9)
        monkeypatch.setattr(scrub_gate, "MIN_TEXT", 0)
        monkeypatch.setattr(scrub_gate, "MIN_WINDOWS_TEXT", 0)
    return request.param


def _same(text: str, keep: tuple[str, ...] = ()) -> None:
    assert scrub.find(text, keep) == reference_find(text, keep)


@settings(max_examples=int(os.environ.get("SCRUB_GATE_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(SEPARATORS),
                          st.text(max_size=6)), max_size=40),
       st.lists(st.sampled_from(scrub.kinds()), max_size=2))
def test_generated_texts_find_the_same(windows, parts, keep):
    _same("".join(parts), tuple(keep))


def test_the_seeded_corpus_finds_the_same(windows):
    docs = BENCH.corpus(400, seed=2026)
    for d in docs:
        _same(d.text)
    # Documents far apart in one big text: separate windows, each rule's scan carried over.
    filler = "\n".join(f"[INFO] Tests run: {i}, Failures: 0, Time elapsed: 0.{i} s" for i in range(60))
    _same(("\n" + filler + "\n").join(d.text for d in docs[:150]))
    _same("\r\n".join(d.text.replace("\n", "\r\n") for d in docs[150:300]))


def test_secrets_at_window_edges_and_on_neighbouring_lines(windows):
    shapes = [p for p in FRAGMENTS if "\n" not in p][:200] + LIBRARY_SHAPES
    rng = random.Random(7)
    for _ in range(30):
        lines = []
        for _ in range(rng.randrange(1, 30)):
            shape = rng.choice(shapes)
            lines.append(rng.choice(["", " ", "x", "export ", "\\n"]) + shape + rng.choice(["", " ", "\\", "x", "\r"]))
            if rng.random() < 0.3:
                lines.append("ok " * rng.randrange(0, 900))  # the next candidate past or inside the gap
        _same(rng.choice(["\n", "\r\n", "\\n"]).join(lines))
    for shape in LIBRARY_SHAPES:  # the whole text, its first and its last line
        _same(shape)
        _same(shape + "\n" + "a" * 5000)
        _same("a" * 5000 + "\n" + shape)


@pytest.mark.parametrize("fill", ["a", "=", ":", "\n", "-", ".", "A", "\u0130", "\\"])
def test_a_megabyte_of_one_character(fill):
    text = fill * 1_000_000
    _same(text[:200_000] + " password=Tr0ub4dor3x " + text[:200_000])
    _same(text[:300_000])


def test_a_long_line_and_folding_texts():
    long = "x" * 300_000 + " token=Zx81kQmN0pLr55aa " + "y" * 300_000
    _same(long)
    _same("\u0130 " + long)  # lowercasing changes the length: no case-blind gate
    _same("ok \ud800 password=Tr0ub4dor3x AKIAJ7Q3EXAMPLEZ4KQA")  # a lone surrogate: no RE2
    _same("x" + scrub_gate._SENTINEL + " password=Tr0ub4dor3x")
    _same("PRIVATE_\u212aEY=" + "Zx81kQmN0pLr55aa")


def test_without_re2_the_same(monkeypatch):
    monkeypatch.setattr(scrub_gate, "_re2_set", lambda literals, supersets: None)
    for d in BENCH.corpus(60, seed=5):
        _same(d.text)
    for shape in LIBRARY_SHAPES:
        _same("a b\n" + shape + "\nc")


@pytest.mark.skipif(CASES is None or not CASES.is_dir(),
                    reason="RECALL_EVAL_DIR is unset (or has no ci-logs-dev/cases): the dev CI logs "
                           "are not on this machine")
def test_the_dev_ci_logs_with_planted_secrets_find_the_same():
    assert CASES is not None
    rng = random.Random(11)
    shapes = [line for d in BENCH.corpus(60, seed=11) for line in d.text.split("\n")] + LIBRARY_SHAPES
    for path in sorted(CASES.glob("*/*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")[:400_000]
        _same(text)
        lines = text.split("\n")
        for _ in range(40):
            at = rng.randrange(len(lines) + 1)
            lines.insert(at, rng.choice(["", "  ", "+ "]) + rng.choice(shapes))
        _same("\n".join(lines))


def test_fold_maps_whatever_a_case_blind_regex_takes_for_an_ascii_letter():
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    folds = {m.group(0) for m in re.finditer(r"(?i)[a-z]", every)} - set(string.ascii_letters)
    assert folds >= {"\u212a", "\u017f", "\u0131", "\u0130"}
    for ch in folds:
        folded = scrub_gate.fold(ch)
        for letter in string.ascii_lowercase:
            if re.fullmatch("(?i)" + letter, ch):
                assert folded is None or folded == letter, (ch, letter, folded)
    # A case-blind digit or punctuation mark matches only itself: kept as it is.
    for ch in string.digits + string.punctuation + " \t":
        assert {m.group(0) for m in re.finditer("(?i)" + re.escape(ch), every)} == {ch}


def test_every_rule_has_a_gate_and_every_superset_a_rule():
    gates = scrub.gates()
    assert len(gates) == len(scrub.rules())
    assert all(g.literals for g in gates)
    patterns = {r.pattern.pattern for r in scrub.rules()}
    assert set(scrub_gate.SUPERSETS) <= patterns
    # The rules whose matches span lines (PEM blocks, `login ... password`, a key id and
    # its secret on the next line, `Bearer` then a newline) are run whole when present.
    multi = {r.kind for r, g in zip(scrub.rules(), gates, strict=True) if not g.one_line}
    assert multi == {"private-key", "password", "aws-secret-key", "bearer-token"}
    # The RE2 sets build (else the texts of 4 KB or more above were only checked on the
    # fallback), and the sentinel is what tells a finished pass.
    raw, sups, blind = scrub_gate._searched(gates)
    assert scrub_gate._re2_set(raw, sups) is not None and scrub_gate._re2_set(blind, ()) is not None
    assert scrub_gate._present("x" * 5000 + "AKIA", raw, sups) == {"AKIA"}


@pytest.mark.parametrize(("pattern", "flags", "literals", "folded", "one_line"), [
    (r"ab[cd]e\d+", 0, ("abce", "abde"), False, True),
    (r"[Pp](?i:ass(?:wd|word))", 0, ("passwd", "password"), True, True),
    (r"x[_-]?key=", 0, ("x-key=", "x_key=", "xkey="), False, True),
    (r"token\s+\w+", 0, ("token",), False, False),  # \s takes a newline
    (r"token[^x]\w+", 0, ("token",), False, False),
    (r"(?s)token.\w", 0, ("token",), False, False),
    (r"token.\w", 0, ("token",), False, True),
    (r"(?i)Token", 0, ("token",), True, True),  # flags the pattern sets itself count too
    (r"Token", re.IGNORECASE, ("token",), True, True),
    (r"token\w+$", 0, ("token",), False, False),  # `$` at a window's end is not at the text's
    (r"token(?=\n)", 0, ("token",), False, False),
    (r"(?<=\n)token", 0, ("token",), False, True),  # a lookbehind reads before, in the real text
    (r"\d{8}:\w{4}", 0, (":",), False, True),
    (r"(\w+)=\1", 0, ("=",), False, False),  # a back reference: not known to stay on a line
    (r"[a-z]+", 0, (), False, True),
])
def test_what_a_regex_says_about_its_matches(pattern, flags, literals, folded, one_line):
    g = scrub_gate.gate(pattern, flags)
    assert (g.literals, g.folded, g.one_line) == (literals, folded, one_line)


_C = "[abcdefgh]"  # eight literals: one of a few strings, unlike a range


@pytest.mark.parametrize(("pattern", "match"), [
    ("q(" + _C * 3 + "x)", "qabcx"),  # too many alternatives for one run: cut, not lost
    ("q(?:" + _C * 3 + "x|y)", "qabcx"),
    ("q(" + _C * 3 + ")", "qabc"),
    ("(" + _C * 3 + "x)y", "abcxy"),
    ("(?:ab|c" + _C * 3 + ")z", "cabcz"),
    ("(?i:" + _C * 3 + "X)Y", "ABCxY"),
])
def test_a_match_always_holds_a_literal(pattern, match):
    g = scrub_gate.gate(pattern, 0)
    assert re.fullmatch(pattern, match)
    hay = scrub_gate.fold(match) if g.folded else match
    assert hay is not None and (not g.literals or any(lit in hay for lit in g.literals)), g


def test_the_stored_gates_are_what_the_rules_say():
    """policy/scrub_gates.json (read at run time instead of parsing every rule) is what
    `gate` reads from the rules now: `python -m dsh_recall.policy.scrub` rewrites it."""
    GATES = scrub_gate.stored()

    keys = [(r.pattern.pattern, r.pattern.flags) for r in scrub.rules()]
    assert {k: GATES.get(k) for k in keys} == {k: scrub_gate.gate(*k) for k in keys}
    assert set(GATES) == set(keys)
    assert scrub.gates() == tuple(scrub_gate.gate(*k) for k in keys)


_ATOMS = ["a", "b", "x", "K", "ab", "xyz", r"\n", r"\s", ".", "[ab]", _C, "[a-c]", "[^a]", r"\d", r"\w",
          "(?=a)", "(?<=b)", "(?!x)", r"\b", "$", "^", "-", r"\.", "[_-]"]


def _regex() -> st.SearchStrategy[str]:
    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=4).map("".join),
            st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
            inner.map(lambda p: f"({p})"),
            st.tuples(inner, st.sampled_from(["?", "*", "+", "{2}", "{1,3}", "{0,2}", "*+", "??"])).map(
                lambda p: f"(?:{p[0]}){p[1]}"),
            inner.map(lambda p: f"(?i:{p})"), inner.map(lambda p: f"(?>{p})"),
            inner.map(lambda p: f"(?s:{p})"))
    return st.recursive(st.sampled_from(_ATOMS), grow, max_leaves=10)


@settings(max_examples=int(os.environ.get("SCRUB_GATE_EXAMPLES", "300")), deadline=None)
@given(_regex(), st.lists(st.sampled_from(["a", "b", "x", "y", "z", "K", "k", "\u212a", "\u0131", "A", "1",
                                           "_", "-", ".", " ", "\n", "\r", "\u0661"]), max_size=24).map("".join),
       st.sampled_from([0, re.IGNORECASE]))
def test_what_a_gate_says_holds_for_every_match_of_any_regex(pattern, text, flags):
    """The gate of a generated regex against every match it has in a generated text: the
    match holds one of the literals, and a one-line regex matches the same with its line's
    end as the text's end."""
    try:
        compiled = re.compile(pattern, flags)
    except re.error:
        return
    g = scrub_gate.gate(pattern, flags)
    for s in range(len(text) + 1):
        m = compiled.match(text, s)
        if m is None:
            continue
        if g.literals:
            hay = scrub_gate.fold(m.group(0)) if g.folded else m.group(0)
            assert hay is None or any(lit in hay for lit in g.literals), (g, m)
        if g.one_line:
            nl = text.find("\n", s)
            cut = compiled.match(text, s, len(text) if nl < 0 else nl + 1)
            assert "\n" not in m.group(0) and cut is not None and cut.span() == m.span(), (g, m)

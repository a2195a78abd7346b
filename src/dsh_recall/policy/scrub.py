"""Secrets never stored: credential-shaped strings in text become a typed placeholder
(`[secret:aws-access-key]`) before anything is indexed or written (docs/security.md).

The provider rules are detect-secrets' own (Yelp; its plugins' `denylist` regexes, run
over the whole text at once: its line-by-line scanner with the entropy plugins costs ~12 s
per MB of log and flags every git SHA). Our additions cover what it leaves to its
line-oriented keyword and entropy plugins or does not know: private key blocks whole,
`password=` / `token:` pairs, CLI flags, `aws configure set`, `.netrc`, URL userinfo,
`Authorization: Basic` / `Bearer`, `curl -u`, env assignments, `sk-` keys of the current
formats, Google API keys, GitHub fine-grained tokens, whole JWTs. A key's value is
replaced whole (`value_span`): quoted to its own closing quote at any escape depth, bare
to whitespace. Every pattern is bounded or possessive and a scan continues after each
value, so it stays linear in the text (bench/scrub_corpus.py measures recall). Each rule
runs only where its regex can match (its literals, `policy/scrub_gate.py`): the same
matches, a tenth of the time on a CI log (bench/scrub_speed.py)."""

from __future__ import annotations

import base64
import functools
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .scrub_gate import Gate, gate, plan

if TYPE_CHECKING:  # the config module pulls in pydantic; callers on a hot path pass None
    from ..core.config import ScrubConfig

# A check over the secret and its whole match: False keeps the text as it is.
Check = Callable[[str, "re.Match[str]"], bool]


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    group: int = 0  # the part of the match that is the secret (-1: a key = value's value)
    check: Check | None = None
    # The match must not continue a word (checked after the match, not as a leading
    # lookbehind, which would cost the regex engine its literal-prefix search).
    bounded: bool = False
    yaml: bool = False  # a key = value rule whose value may be a YAML plain value of words


# detect-secrets plugin (module, class) -> our kind and which regex group is the secret
# (0: the whole match; its GitHub pattern's group 1 is only the prefix). Left out: npm
# (`//.+/:_authToken=`: quadratic over a long line; our `token=` pair takes its value),
# artifactory (its match includes the character before the key), keyword and entropy
# (line-oriented; ours are the pairs and env rules below).
# Their patterns are derived into policy/scrub_rules.py by scripts/scrub_rules.py (importing
# the library costs a process about 200 ms; a hook that stores an object is one process).
LIBRARY: dict[tuple[str, str], tuple[str, dict[int, int]]] = {
    ("aws", "AWSKeyDetector"): ("aws-access-key", {1: 1}),
    ("azure_storage_key", "AzureStorageKeyDetector"): ("azure-storage-key", {}),
    ("basic_auth", "BasicAuthDetector"): ("url-password", {0: 1}),
    ("discord", "DiscordBotTokenDetector"): ("discord-token", {}),
    ("github_token", "GitHubTokenDetector"): ("github-token", {}),
    ("gitlab_token", "GitLabTokenDetector"): ("gitlab-token", {}),
    ("openai", "OpenAIDetector"): ("openai-key", {}),
    ("pypi_token", "PypiTokenDetector"): ("pypi-token", {}),
    ("sendgrid", "SendGridDetector"): ("sendgrid-key", {}),
    ("slack", "SlackDetector"): ("slack-token", {}),
    ("square_oauth", "SquareOAuthDetector"): ("square-secret", {}),
    ("stripe", "StripeDetector"): ("stripe-key", {}),
    ("telegram_token", "TelegramBotTokenDetector"): ("telegram-token", {}),
    ("twilio", "TwilioKeyDetector"): ("twilio-key", {}),
}

PLACEHOLDER = re.compile(r"\[secret:[a-z0-9-]+\]")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(\))?")
_NOT_VALUES = frozenset({"none", "null", "nil", "true", "false", "undefined", "required",
                         "optional", "string", "str", "redacted", "xxx", "xxxx", "changeme"})


def entropy(s: str) -> float:
    """Shannon entropy of `s` in bits per character."""
    if not s:
        return 0.0
    counts: dict[str, int] = {}
    for ch in s:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _value(v: str, m: re.Match[str] | None = None) -> bool:
    """A `password=` value that is a value, not code naming one (`password=self.password`,
    `token=None`, `${TOKEN}`, a placeholder already)."""
    low = v.lower().strip("'\"")
    if len(low) < 4 or low in _NOT_VALUES or low.startswith(("$", "{", "<", "%", "[secret:", "*")):
        return False
    # A bare or dotted identifier without a digit is code (`password=form.password`).
    return not (_IDENT.fullmatch(v) and not any(c.isdigit() for c in v))


def _high_entropy(v: str, m: re.Match[str] | None = None) -> bool:
    """A value of an env assignment that looks generated: long, mixed classes, high
    entropy; hex digests and UUIDs (hex only) are not credentials by shape, nor is a path
    or a URL (`PATH=/builds/...`, `OUT=src/main/java/...`: a log's paths are what an agent
    reads it for)."""
    if len(v) < 20 or re.fullmatch(r"[0-9a-fA-F-]+", v):
        return False
    if v.startswith(("/", "./", "../", "~/")) or "://" in v or v.count("/") >= 3:
        return False
    classes = sum((any(c.islower() for c in v), any(c.isupper() for c in v),
                   any(c.isdigit() for c in v)))
    return classes >= 3 and entropy(v) >= 4.0


_CRED_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|AUTH|CRED")


def _env(v: str, m: re.Match[str] | None = None) -> bool:
    name = m.group(0).split("=", 1)[0] if m is not None else ""
    if _CRED_NAME.search(name):  # a number is a setting (`MAX_TOKENS=4096`), not a secret
        return _value(v) and not v.strip("'\"").isdigit()
    return _high_entropy(v)


def _digits_and_letters(v: str, m: re.Match[str] | None = None) -> bool:
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


# passwd password passphrase pwd private_key secret token api_key apikey access_key
# client_secret credential(s), any case: spelt first letter + case-blind rest, so the engine
# can search for the first letter (a case-blind alternation costs 3x as much per MB).
_CRED_WORDS = (r"(?:[Pp](?i:ass(?:wd|word|phrase)|wd|rivate[_-]?key)|[Ss](?i:ecret)|[Tt](?i:oken)"
               r"|[Aa](?i:pi[_-]?key|pikey|ccess[_-]?key)|[Cc](?i:lient[_-]?secret|redentials?))"
               r"(?:[_-](?i:id|key|value))?")
# Where a value starts: an opening quote (escaped, inside a JSON string, too) or nothing;
# `value_span` finds where it ends.
_OPEN = r"""(?P<q>\\{0,15}["'])?"""
# A bare value: a shell word (closed quoted pieces without spaces and backslash escapes
# belong to it), ended by whitespace, by an unclosed quote (the end of the string it sits
# in) or by an escape of that string (`\n`, `\"`).
_BARE = re.compile(r"""(?:[^\s"'`\\]|\\[^\s"nrt\\]|"[^"\s\\]{0,4096}+"|'[^'\s\\]{0,4096}+'){1,8192}+""")
_CODE_CALL = re.compile(r"[A-Za-z_][A-Za-z_.]*[\[(]")


def _closing(text: str, at: int, q: str) -> int:
    """Where the value opened by quote `q` (maybe escaped, `\\"`) at `at` ends: the same
    quote at the same escape depth; a quote escaped deeper is part of the value."""
    depth = len(q) - 1
    # No length cap (an STS token is 1 KB, a pasted key file more); a quote never closed
    # ends at the line's end. A later opening of the same quote is this one's close, so
    # repeated keys cannot make the scan quadratic.
    limit = text.find("\n", at)
    limit = len(text) if limit < 0 else limit
    j = at
    while True:
        j = text.find(q[-1], j, limit)
        if j < 0:
            return limit
        run = 0
        while j - run - 1 >= at and text[j - run - 1] == "\\":
            run += 1
        if run >= depth and (run - depth) % (2 * (depth + 1)) == 0:
            return j - depth
        j += 1


def _key_start(text: str, at: int) -> int:
    """The start of the key a credential word sits in (`db_password`, `X-Api-Key`)."""
    i = at
    while i > 0 and at - i < 64 and (text[i - 1].isalnum() or text[i - 1] in "_.-"):
        i -= 1
    return i


def value_span(text: str, m: re.Match[str], memo: list[int] | None = None) -> tuple[int, int]:
    """The value a key = value match starts: a quoted value runs to its closing quote
    (whatever it holds), a bare one to whitespace, except that `&` ends a value in a
    query string (`?key=v&b=c`) and `;` one in a connection string (`Server=x;Password=v;`)."""
    q = m.group("q")
    at = m.end()
    if q:
        return at, _closing(text, at, q)
    if memo is not None and memo[0] <= at < memo[1]:
        end = memo[1]  # inside the word a rejected value scanned: the same end, not a rescan
    else:
        bare = _BARE.match(text, at)
        if bare is None:
            return at, at
        end = bare.end()
        if memo is not None:
            memo[:] = [at, end]
    before = text[_key_start(text, m.start()) - 1: _key_start(text, m.start())]
    stops = "&#" if before in ("?", "&") else ";" if before == ";" else ""
    for c in stops:
        cut = text.find(c, at, end)
        end = cut if cut >= 0 else end
    while end > at and text[end - 1] in ",;.)]}>":
        end -= 1
    return at, end


_HEAD = re.compile(r"[^,;)\]}|&+?:]*")
_MEMBER = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_SHORT = re.compile(r"[a-z_$]{1,2}(?:[,)\]}?:]|\|\||&&)")


def _not_code(v: str) -> bool:
    """Not code that computes a value (`os.environ['KEY']`, `getpass()`, `Optional[str]`,
    minified `password:t.password}`, `token:e||n`): a call, or a head up to an operator or
    a closing bracket that is a member, a word like `null` or a minified name."""
    if _CODE_CALL.match(v) or _SHORT.match(v):
        return False
    head = _HEAD.match(v)
    h = head.group(0) if head else v
    return h == v or not (_MEMBER.fullmatch(h) or h.lower() in _NOT_VALUES)


def _basic_pair(v: str, m: re.Match[str]) -> bool:
    """`Basic` credentials: base64 of `user:password`."""
    try:
        raw = base64.b64decode(v + "=" * (-len(v) % 4), validate=True)
    except ValueError:
        return False
    return b":" in raw and raw.isascii()


def _named(v: str, m: re.Match[str]) -> bool:
    return bool(_CRED_NAME.search(m.group("name").upper())) and _value(v) and _not_code(v)


def _flag(v: str, m: re.Match[str]) -> bool:
    return not v.startswith("-") and _value(v) and _not_code(v)


_TAG = re.compile(r"!!?[A-Za-z][\w.:/-]{0,40}")


def _pair(v: str, m: re.Match[str]) -> bool:
    # A YAML tag after a colon (`password: !vault |`, `!secret db_pass`, `!Ref DbPass`)
    # says where the value comes from; it is not the value.
    if _TAG.fullmatch(v) and m.group(0).rstrip(" \t\"'\\").endswith(":"):
        return False
    return _value(v) and _not_code(v)


def _url_password(v: str, m: re.Match[str]) -> bool:
    """Any real password (`%21x`, `p@ss`), not a template's slot (`${PASS}`, `<password>`)."""
    return not v.startswith(("$", "{", "<", "*", "[secret:"))


def _line_start(text: str, at: int) -> bool:
    """Only indentation or a `- ` list mark between `at` and its line's start (a real
    newline, or an escaped `\\n` inside a JSON string): a YAML mapping line."""
    i = at
    while i > 0 and at - i < 64 and text[i - 1] in " \t-":
        i -= 1
    return i == 0 or text[i - 1] in "\r\n" or (i >= 2 and text[i - 2:i] == "\\n")


# Words of prose, not of a passphrase: a described value (`password: see the vault entry`,
# `secret: the token the deploy job reads`) keeps them; a passphrase has none.
_PROSE = frozenset("""a an the to of in on at by for from with without as is are was be been not no
    none null nil yet see use used uses ask set get read run stored kept here there this that these
    those it its your our my their and or but if then when where which who how what any all each
    every new old same into onto via per since until after before because about over under than
    also only just still now please todo tbd n/a password passwords secret secrets
    token tokens key keys credential credentials passphrase value values""".split())
_WORD = re.compile(r"[a-z][a-z0-9']{1,23}")


# A YAML plain value of several words: shell-word-like pieces separated by blanks, ended by
# the line's end, an escape of the string it sits in or a ` #` comment.
_PLAIN = re.compile(r"""[^\s"'`#&*!|>{\[%@$<\\,][^\s\\]{0,1024}+(?:[ \t]{1,8}+[^\s#\\][^\s\\]{0,1024}+){1,64}+""")


def _yaml_value(m: re.Match[str], at: int) -> int | None:
    """Where a YAML plain value of several words after a credential key that opens its line
    ends (`password: correct horse battery staple`), when it is one: its first word is a
    value by itself (the rest of the line goes with it), or it is a passphrase of four to
    twelve lowercase words, none of them prose. None: the value is the first word's alone."""
    if m.group("q") or not m.group(0).rstrip(" \t").endswith(":"):
        return None
    plain = _PLAIN.match(m.string, at)
    if plain is None or not _line_start(m.string, _key_start(m.string, m.start())):
        return None
    words = plain.group(0).split()
    if _pair(words[0], m) or (4 <= len(words) <= 12
                              and all(_WORD.fullmatch(w) and w not in _PROSE for w in words)):
        return plain.end()
    return None


def _aws_secret(v: str, m: re.Match[str]) -> bool:
    """A 40-character AWS secret access key named only by what is near it (its access key
    id just before it, `secret access key` earlier on its line): mixed case and digits,
    high entropy. Alone, such a string is as likely a 30-byte base64 value (docs/security.md)."""
    return (any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)
            and entropy(v) >= 4.2)


_AWS_SECRET = r"(?<![A-Za-z0-9+/=])(?P<v>[A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])"
_B64 = r"[A-Za-z0-9+/]{8,8192}+={0,2}"
_OURS: tuple[Rule, ...] = (
    Rule("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
        # The body: base64 and header lines (`Proc-Type: 4,ENCRYPTED`), never a `--`, so an
        # attempt from a header without its END stops at the next header, not 16 KB on.
        r"(?:[A-Za-z0-9+/=:,.\s\\]|-(?!-)){0,65536}?"
        r"-----END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----")),
    # A block cut short (a truncated log): the header and the base64 lines after it.
    Rule("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:\\r)?(?:\\n)|\r?\n|[ \t]){1,4}(?:[A-Za-z0-9+/=:\-]{1,100}(?:(?:\\r)?(?:\\n)|\r?\n)){0,1000}"
        r"[A-Za-z0-9+/=]{0,100}")),
    Rule("private-key", re.compile(r"PuTTY-User-Key-File-[23]: [^\r\n]{0,256}(?:\r?\n|\\n)"
                                   r"(?:[A-Za-z-]{1,32}: [^\r\n\\]{0,4096}(?:\r?\n|\\n)){0,200}")),
    Rule("jwt", re.compile(
        r"(?<![\w-])eyJ[\w-]{8,4096}+={0,2}\.eyJ[\w-]{8,8192}+={0,2}\.[\w-]{0,1024}+={0,2}", re.ASCII),
        bounded=True),
    Rule("github-token", re.compile(r"github_pat_[A-Za-z0-9_]{22,255}"), bounded=True),
    Rule("github-token", re.compile(r"gh[pousr]_[A-Za-z0-9]{36,251}"), bounded=True),
    Rule("api-key", re.compile(
        r"sk-(?:ant-[a-z]{2,8}\d{2}-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,256}"),
        check=_digits_and_letters, bounded=True),
    Rule("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{35}(?![\w-])"), bounded=True),
    Rule("stripe-key", re.compile(r"[sr]k_(?:live|test|prod)_[0-9a-zA-Z]{16,256}"), bounded=True),
    Rule("slack-token", re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,255}"), bounded=True),
    Rule("slack-token", re.compile(r"xapp-\d-[A-Z0-9]{1,32}-\d{1,32}-[a-z0-9]{16,128}"), bounded=True),
    Rule("bearer-token", re.compile(r"[Bb](?i:earer)\s{1,8}([A-Za-z0-9._~+/-]{16,8192}+=*)"), 1,
         check=_digits_and_letters, bounded=True),
    # `Authorization: Basic dXNlcjpwYXNz` (curl -H, an HTTP dump), `curl -u user:password`.
    Rule("basic-auth", re.compile(r"[Bb](?i:asic)[ \t]{1,8}(" + _B64 + r")"), 1,
         check=_basic_pair, bounded=True),
    Rule("basic-auth", re.compile(r"""(?:-u|--user)[ \t]{1,8}\\{0,3}["']?[^\s:'"\\]{1,256}:(?P<v>[^\s'"\\]{1,4096}+)"""),
         -2, check=_pair, bounded=True),
    # postgres://user:pass@host: a password of any RFC 3986 userinfo characters, %-escapes
    # and (unescaped, as people write it) `@` too: the userinfo ends at the last `@`.
    Rule("url-password", re.compile(
        r"[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#\[\]@\\\"'<>]{0,256}+:(?P<v>[^\s/?#\\\"<>]{1,1024})@"
        r"(?=[A-Za-z0-9\[])"), -2, check=_url_password),
    # `--password=v`, `--api-key v`, `mysql -pv`: a flag's value runs to whitespace.
    Rule("password", re.compile(r"--?(?:[A-Za-z0-9]{1,32}[_-]){0,4}" + _CRED_WORDS + r"(?:=|[ \t]{1,8})" + _OPEN),
         -1, check=_flag, bounded=True),
    Rule("password", re.compile(r"""mysql(?:dump|admin)?[ \t][^\r\n|;&]{0,256}?[ \t]-p(?P<v>[^\s'"\\-][^\s'"\\]{0,1024}+)"""),
         -2, check=_pair, bounded=True),
    # `aws configure set aws_secret_access_key v`, `.netrc`'s `login u password v`.
    Rule("password", re.compile(r"configure[ \t]{1,8}set[ \t]{1,8}(?:--[a-z-]{1,32}[ \t]{1,8}\S{1,64}[ \t]{1,8})?"
                                r"(?P<name>[\w.-]{1,80})[ \t]{1,8}" + _OPEN), -1, check=_named, bounded=True),
    Rule("password", re.compile(r"login(?:[ \t]|\r?\n|\\n){1,16}\S{1,256}?(?:[ \t]|\r?\n|\\n){1,16}"
                                r"password[ \t]{1,8}" + _OPEN), -1, check=_pair, bounded=True),
    # `password=...`, `"api_key": "..."`, `DB_PASSWORD: ...`, `{\\"token\\": \\"...\\"}`: the
    # value of a credential word (matched from the word on: `DB_` before it changes nothing).
    # A YAML plain value of several words runs to the line's end when its key opens the
    # line (`password: correct horse battery staple`, `_yaml_value`).
    Rule("password", re.compile(
        _CRED_WORDS + r"""(?:\\{0,15}["'])?[ \t]{0,8}(?::=|=>|[:=])[ \t]{0,8}""" + _OPEN),
        -1, check=_pair, yaml=True),
    # An AWS secret access key named only by what is near it: its access key id just
    # before it (credentials.csv, a pasted pair), `secret access key` on its line before it
    # (aws configure's prompt).
    Rule("aws-secret-key", re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}[\s,;:|\"'=\\]{1,8}"
                                      + _AWS_SECRET), -2, check=_aws_secret),
    Rule("aws-secret-key", re.compile(r"[Ss](?i:ecret[ _-]?access[ _-]?key)[^\r\n\\]{0,64}?" + _AWS_SECRET),
         -2, check=_aws_secret),
    # `export FOO_KEY=...`: an env name that says credential takes any real value; any
    # other env assignment only a value that looks generated. Not inside a word or a
    # base64 run (`...x+WHE="`).
    Rule("env-secret", re.compile(r"(?<![\w+/=.%-])[A-Z][A-Z0-9_]{1,80}=" + _OPEN), -1, check=_env, bounded=True),
)


@functools.cache
def rules() -> tuple[Rule, ...]:
    """The library's rules, then ours (compiled once per process)."""
    from .scrub_rules import RULES

    library = [Rule(kind, re.compile(pattern, flags), group) for kind, group, pattern, flags in RULES]
    return tuple(library) + _OURS


@functools.cache
def gates() -> tuple[Gate, ...]:
    """What each rule's regex says about where it can match (in `rules()`'s order): as
    policy/scrub_gates.json holds it, read now for a rule it does not hold."""
    from .scrub_gate import stored

    gates_ = stored()
    return tuple(gates_.get((r.pattern.pattern, r.pattern.flags)) or gate(r.pattern.pattern, r.pattern.flags)
                 for r in rules())


def kinds() -> list[str]:
    """Every kind a placeholder may name (what `scrub.keep` accepts)."""
    return sorted({r.kind for r in _OURS} | {k for k, _ in LIBRARY.values()})


def _span(rule: Rule, m: re.Match[str], memo: list[int] | None = None) -> tuple[int, int] | None:
    if rule.group >= 0:
        start, end = m.span(rule.group)
    elif rule.group == -2:  # the named group `v`
        start, end = m.span("v")
    else:  # the value of a key = value rule: it starts where the match ends
        start, end = value_span(m.string, m, memo)
        if rule.yaml and (wide := _yaml_value(m, start)) is not None:
            return start, wide
    if start < 0 or end <= start:
        return None
    if rule.bounded and m.start() > 0 and (m.string[m.start() - 1].isalnum()
                                           or m.string[m.start() - 1] in "_-"):
        return None
    if rule.check is not None and not rule.check(m.string[start:end], m):
        return None
    return start, end


def find(text: str, keep: Collection[str] = ()) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each credential in `text`, in order, without overlaps (the
    earliest, then the longest, wins)."""
    found: list[tuple[int, int, str]] = []
    # Each rule runs only where it can match (policy/scrub_gate.py): the same matches.
    for rule, windows in zip(rules(), plan(text, gates()), strict=True):
        if rule.kind in keep:
            continue
        pos = 0
        memo = [0, 0]
        for start, end in [(0, len(text))] if windows is None else windows:
            pos = max(pos, start)
            while (m := rule.pattern.search(text, pos, end)) is not None:
                span = _span(rule, m, memo)
                # The next attempt starts after this value (linear however many keys a
                # line holds), or one past this match's start when it was not a secret.
                pos = max(m.end(), m.start() + 1)
                if span is not None and not PLACEHOLDER.fullmatch(text[span[0]:span[1]]):
                    found.append((span[0], span[1], rule.kind))
                    pos = max(pos, span[1])
    return _merge(found)


def _merge(found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    found.sort(key=lambda f: (f[0], -f[1]))
    out: list[tuple[int, int, str]] = []
    for f in found:
        if out and f[0] < out[-1][1]:
            if f[1] > out[-1][1]:  # overlapping: one placeholder over both
                out[-1] = (out[-1][0], f[1], out[-1][2])
            continue
        out.append(f)
    return out


def scrub(text: str, keep: Collection[str] = ()) -> str:
    """`text` with every credential replaced by `[secret:KIND]`; kinds in `keep` stay."""
    spans = find(text, keep)
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end, kind in spans:
        parts.append(text[last:start])
        parts.append(f"[secret:{kind}]")
        last = end
    parts.append(text[last:])
    return "".join(parts)


def scrub_text(text: str, settings: ScrubConfig | None = None) -> str:
    """`scrub` as the user's `[scrub]` settings say (None: the defaults, on, keep nothing)."""
    if settings is None:
        return scrub(text)
    return scrub(text, settings.keep) if settings.enabled else text


if __name__ == "__main__":  # rewrite policy/scrub_gates.json from the rules as they are
    from pathlib import Path

    from .scrub_gate import GATES_FILE, table

    Path(__file__).with_name(GATES_FILE).write_text(
        table([(r.pattern.pattern, r.pattern.flags) for r in rules()]), encoding="utf-8")

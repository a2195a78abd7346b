"""Secrets never stored: credential-shaped strings in text become a typed placeholder
(`[secret:aws-access-key]`) before anything is indexed or written (docs/security.md).

The provider rules are detect-secrets' own (Yelp; its plugins' `denylist` regexes, run
over the whole text at once: its line-by-line scanner with the entropy plugins costs ~12 s
per MB of log and flags every git SHA). Our additions cover what it leaves to its
line-oriented keyword and entropy plugins or does not know: private key blocks whole,
`password=` / `token:` pairs, env assignments, bearer tokens, `sk-` keys of the current
formats, Google API keys, GitHub fine-grained tokens, whole JWTs. Every pattern is bounded
(no nested repetition), so a scan stays linear in the text.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

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


# detect-secrets plugin -> our kind, and for each of its patterns the group that holds the
# secret (0: the whole match; its GitHub pattern's group 1 is only the prefix).
# detect-secrets plugin (module, class) -> our kind and which regex group is the secret.
# Their patterns are derived into policy/scrub_rules.py by scripts/scrub_rules.py (importing
# the library costs a process about 200 ms; a hook that stores an object is one process).
LIBRARY: dict[tuple[str, str], tuple[str, dict[int, int]]] = {
    ("aws", "AWSKeyDetector"): ("aws-access-key", {1: 1}),
    ("azure_storage_key", "AzureStorageKeyDetector"): ("azure-storage-key", {}),
    ("basic_auth", "BasicAuthDetector"): ("url-password", {0: 1}),
    ("discord", "DiscordBotTokenDetector"): ("discord-token", {}),
    ("github_token", "GitHubTokenDetector"): ("github-token", {}),
    ("gitlab_token", "GitLabTokenDetector"): ("gitlab-token", {}),
    ("npm", "NpmDetector"): ("npm-token", {0: 1}),
    ("openai", "OpenAIDetector"): ("openai-key", {}),
    ("pypi_token", "PypiTokenDetector"): ("pypi-token", {}),
    ("sendgrid", "SendGridDetector"): ("sendgrid-key", {}),
    ("slack", "SlackDetector"): ("slack-token", {}),
    ("square_oauth", "SquareOAuthDetector"): ("square-secret", {}),
    ("stripe", "StripeDetector"): ("stripe-key", {}),
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
               r"|[Aa](?i:pi[_-]?key|pikey|ccess[_-]?key)|[Cc](?i:lient[_-]?secret|redentials?))")
_VALUE = r"""(?:(["'])([^"'\r\n]{1,256})\1|([^\s"'`,;&()}{\[\]]{1,256}))"""

_OURS: tuple[Rule, ...] = (
    Rule("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
        # The body: base64 and header lines (`Proc-Type: 4,ENCRYPTED`), never a `--`, so an
        # attempt from a header without its END stops at the next header, not 16 KB on.
        r"(?:[A-Za-z0-9+/=:,.\s\\]|-(?!-)){0,16384}?"
        r"-----END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----")),
    # A block cut short (a truncated log): the header and the base64 lines after it.
    Rule("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:\\r)?(?:\\n)|\r?\n|[ \t]){1,4}(?:[A-Za-z0-9+/=:\-]{1,100}(?:(?:\\r)?(?:\\n)|\r?\n)){0,400}"
        r"[A-Za-z0-9+/=]{0,100}")),
    Rule("jwt", re.compile(
        r"eyJ[A-Za-z0-9_-]{8,4096}={0,2}\.eyJ[A-Za-z0-9_-]{8,8192}={0,2}\.[A-Za-z0-9_-]{0,1024}={0,2}"), bounded=True),
    Rule("github-token", re.compile(r"github_pat_[A-Za-z0-9_]{22,255}"), bounded=True),
    Rule("api-key", re.compile(
        r"sk-(?:ant-[a-z]{2,8}\d{2}-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,256}"),
        check=_digits_and_letters, bounded=True),
    Rule("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{35}(?![\w-])"), bounded=True),
    Rule("stripe-key", re.compile(r"[sr]k_(?:live|test)_[0-9a-zA-Z]{16,128}"), bounded=True),
    Rule("slack-token", re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,255}"), bounded=True),
    Rule("bearer-token", re.compile(r"[Bb](?i:earer)\s{1,8}([A-Za-z0-9._~+/-]{16,4096}=*)"), 1,
         check=_digits_and_letters, bounded=True),
    # `password=...`, `"api_key": "..."`, `DB_PASSWORD: ...`: the value of a credential word
    # (matched from the word on: `DB_` before it changes nothing that is replaced).
    Rule("password", re.compile(
        _CRED_WORDS + r"""["']?[ \t]{0,8}(?::=|=>|[:=])[ \t]{0,8}""" + _VALUE),
        -1, check=_value),
    # `export FOO_KEY=...`: an env name that says credential takes any real value; any
    # other env assignment only a value that looks generated.
    Rule("env-secret", re.compile(r"[A-Z][A-Z0-9_]{1,80}=" + _VALUE), -1, check=_env,
         bounded=True),
)


@functools.cache
def rules() -> tuple[Rule, ...]:
    """The library's rules, then ours (compiled once per process)."""
    from .scrub_rules import RULES

    library = [Rule(kind, re.compile(pattern, flags), group) for kind, group, pattern, flags in RULES]
    return tuple(library) + _OURS


def kinds() -> list[str]:
    """Every kind a placeholder may name (what `scrub.keep` accepts)."""
    return sorted({r.kind for r in _OURS} | {k for k, _ in LIBRARY.values()})


def _span(rule: Rule, m: re.Match[str]) -> tuple[int, int] | None:
    if rule.group >= 0:
        start, end = m.span(rule.group)
    else:  # the value of a key = value rule: quoted (group 2) or bare (group 3)
        g = m.lastindex or 0
        start, end = m.span(g) if g else (-1, -1)
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
    for rule in rules():
        if rule.kind in keep:
            continue
        for m in rule.pattern.finditer(text):
            span = _span(rule, m)
            if span is not None and not PLACEHOLDER.fullmatch(text[span[0]:span[1]]):
                found.append((span[0], span[1], rule.kind))
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

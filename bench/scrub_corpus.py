"""Recall and false scrubs of the secret scrubber on a seeded corpus: transcripts and logs
with credentials planted in the shapes they take in shells and configs, and ordinary
high-entropy text that must survive, against the previous commit's scrubber in the same run.

    python bench/scrub_corpus.py [--docs 1000] [--seed 2026] [--baseline HEAD]

A planted secret counts as removed when no 8-character piece of it (nor of its escaped
form, in a JSON-wrapped document) is left; an ordinary string counts as scrubbed when it is
not left whole. tests/test_scrub_corpus.py runs a small slice of the same corpus.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import random
import re
import string
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"


def _r(rng: random.Random, n: int, chars: str = ALNUM) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _pw(rng: random.Random, extra: str, n: int = 14) -> str:
    """A password that starts with a letter and holds some of `extra` inside."""
    body = [rng.choice(ALNUM) for _ in range(n)]
    for _ in range(3):
        body.insert(rng.randrange(2, len(body)), rng.choice(extra))
    return rng.choice(string.ascii_letters) + "".join(body) + rng.choice(string.digits)


def _pem(rng: random.Random, label: str, lines: int = 12) -> tuple[str, str]:
    body = "\n".join(_r(rng, 64, B64) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


Plant = tuple[str, str]  # (text the secret sits in, the secret)


def _aws_key(rng: random.Random) -> Plant:
    key = rng.choice(["AKIA", "ASIA"]) + _r(rng, 16, UPPER)
    return rng.choice([f"export AWS_ACCESS_KEY_ID={key}", f"aws configure set aws_access_key_id {key}",
                       f"[default]\naws_access_key_id = {key}", f'"AccessKeyId": "{key}",']), key


def _aws_secret(rng: random.Random) -> Plant:
    s = _r(rng, 40, B64)
    key = "AKIA" + _r(rng, 16, UPPER)
    return rng.choice([f"aws configure set aws_secret_access_key {s}", f"aws_secret_access_key = {s}",
                       f'"SecretAccessKey": "{s}",', f"export AWS_SECRET_ACCESS_KEY={s}",
                       # named only by what is near: aws configure's prompt, credentials.csv
                       f"AWS Access Key ID [None]: {key}\nAWS Secret Access Key [None]: {s}",
                       f"User name,Password,Access key ID,Secret access key\nci,,{key},{s}",
                       f"here are the keys: {key} {s}"]), s


def _aws_session(rng: random.Random) -> Plant:
    s = "FwoGZXIvYXdzE" + _r(rng, rng.randrange(300, 900), B64) + "=="
    return rng.choice([f"aws configure set aws_session_token {s}", f'"SessionToken": "{s}",',
                       f"aws_session_token = {s}", f"export AWS_SESSION_TOKEN={s}"]), s


def _github(rng: random.Random) -> Plant:
    t = rng.choice(["ghp_" + _r(rng, 36), "github_pat_" + _r(rng, 22) + "_" + _r(rng, 59)])
    return rng.choice([f"git clone https://{t}@github.com/o/r", f"gh auth login --with-token <<< {t}",
                       f"GITHUB_TOKEN: {t}", f'curl -H "Authorization: token {t}" https://api.github.com']), t


def _slack(rng: random.Random) -> Plant:
    t = f"xox{rng.choice('bpa')}-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}-" + _r(rng, 24).lower()
    return rng.choice([f"SLACK_BOT={t}", f'slack_token: "{t}"', f"curl -d token={t} https://slack.com/api"]), t


def _stripe(rng: random.Random) -> Plant:
    t = "sk_live_" + _r(rng, rng.choice([24, 99]))
    return rng.choice([f"stripe.api_key = '{t}'", f"curl https://api.stripe.com/v1/charges -u {t}:"]), t


def _openai(rng: random.Random) -> Plant:
    t = rng.choice(["sk-proj-" + _r(rng, 120, URLSAFE) + "a1", "sk-" + _r(rng, 20) + "T3BlbkFJ" + _r(rng, 20),
                    "sk-ant-api03-" + _r(rng, 93, URLSAFE) + "AA"])
    return rng.choice([f"client = OpenAI(api_key='{t}')", f"OPENAI_API_KEY={t} python run.py",
                       f'{{"api_key": "{t}"}}']), t


def _google(rng: random.Random) -> Plant:
    t = "AIza" + _r(rng, 35, URLSAFE)
    return rng.choice([f"https://maps.googleapis.com/maps/api/js?key={t}&callback=init",
                       f"GOOGLE_API_KEY={t}", f'const firebaseConfig = {{apiKey: "{t}"}};']), t


def _jwt(rng: random.Random) -> Plant:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    body = base64.urlsafe_b64encode(json.dumps({"sub": _r(rng, 12), "n": rng.random()}).encode()).decode().rstrip("=")
    t = f"{head}.{body}.{_r(rng, 43, URLSAFE)}"
    return rng.choice([f"Cookie: session={t}; Path=/", f"id_token={t}", f'{{"access": "{t}"}}']), t


def _private_key(rng: random.Random) -> Plant:
    label = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY",
                        "ENCRYPTED PRIVATE KEY"])
    pem, body = _pem(rng, label, rng.randrange(4, 40))
    return f"$ cat ~/.ssh/id_key\n{pem}\n", body


def _url_password(rng: random.Random) -> Plant:
    pw = _pw(rng, "!$&'()*+,;=") + rng.choice(["", "%40", "%2F%3A"]) + _r(rng, 3)
    scheme, port = rng.choice([("postgres", 5432), ("postgresql", 5432), ("mysql", 3306),
                               ("mongodb+srv", 27017), ("mongodb", 27017), ("redis", 6379), ("amqp", 5672)])
    user = rng.choice(["app", "admin", "", "svc_" + _r(rng, 4).lower()])
    url = f"{scheme}://{user}:{pw}@db{rng.randrange(9)}.internal:{port}/app"
    return rng.choice([f"DATABASE_URL={url}", f"psql '{url}'", f'url: "{url}"', f"connecting to {url} ..."]), pw


def _cli_password(rng: random.Random) -> Plant:
    pw = _pw(rng, "!@#%^&*;")
    return rng.choice([f"mysql -u app --password={pw} app", f"mysql -h db -uroot -p{pw} app",
                       f"vault login --token {pw}", f"psql --password {pw}",
                       f"./deploy.sh --api-key={pw} --region eu-west-1",
                       f"sshpass --password {pw} ssh host"]), pw


def _query(rng: random.Random) -> Plant:
    pw = _r(rng, 24, ALNUM + "-._~") + "%2B" + _r(rng, 4)
    return rng.choice([f"GET /v1/data?api_key={pw}&format=json 200",
                       f"https://api.example.com/x?page=2&access_token={pw}&sort=asc"]), pw


def _json_value(rng: random.Random) -> Plant:
    pw = _pw(rng, "&;@!'\\\" ")
    inner = json.dumps({rng.choice(["password", "client_secret", "apiKey", "token"]): pw})
    return rng.choice([inner, json.dumps({"name": "http_request", "arguments": inner})]), pw


WORDS = ("anchor", "battery", "canyon", "correct", "dolphin", "ember", "falcon", "glacier", "harbor",
         "horse", "island", "jasmine", "kettle", "lantern", "meadow", "nickel", "orbit", "pepper",
         "quartz", "river", "saddle", "staple", "timber", "umbrella", "velvet", "walnut", "yonder")


def _yaml_value(rng: random.Random) -> Plant:
    pw = _pw(rng, "&;@!%")
    phrase = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 7)))
    return rng.choice([(f"database:\n  password: {pw}\n  host: db", pw), (f"  client_secret: '{pw}'", pw),
                       (f"redis:\n  auth_token: \"{pw}\"", pw),
                       # plain values with spaces: a passphrase, a value with words after it
                       (f"vault:\n  passphrase: {phrase}\n  path: kv/app", phrase),
                       (f"secrets:\n  db_password: {pw} rotated monthly # ops", f"{pw} rotated monthly")])


def _env_export(rng: random.Random) -> Plant:
    pw = _pw(rng, "&;@!#")
    return rng.choice([f"export DB_PASSWORD='{pw}'", f"export STRIPE_SECRET=\"{pw}\"",
                       f"API_TOKEN={pw} npm start", f"set -x; REGISTRY_PASS={pw}"]), pw


def _bearer(rng: random.Random) -> Plant:
    t = _r(rng, rng.randrange(24, 200), ALNUM + "._-") + "9a"
    return rng.choice([f'curl -H "Authorization: Bearer {t}" https://api.example.com',
                       f"> Authorization: Bearer {t}", f'headers = {{"Authorization": "Bearer {t}"}}']), t


def _basic(rng: random.Random) -> Plant:
    t = base64.b64encode(f"user:{_pw(rng, '!@')}".encode()).decode()
    return rng.choice([f"Authorization: Basic {t}", f'curl -H "Authorization: Basic {t}" https://ci/x']), t


def _netrc(rng: random.Random) -> Plant:
    pw = _pw(rng, "!@#$%")
    return rng.choice([f"machine api.example.com login bob password {pw}",
                       f"machine git.example.com\n  login ci\n  password {pw}\n"]), pw


def _curl_user(rng: random.Random) -> Plant:
    pw = _pw(rng, "!@#$%&;")
    return rng.choice([f"curl -u admin:{pw} https://ci/api", f"curl --user 'deploy:{pw}' https://x"]), pw


PLANTS: dict[str, Callable[[random.Random], Plant]] = {
    "aws-access-key": _aws_key, "aws-secret-key": _aws_secret, "aws-session-token": _aws_session,
    "github-token": _github, "slack-token": _slack, "stripe-key": _stripe, "openai/anthropic-key": _openai,
    "google-api-key": _google, "jwt": _jwt, "private-key": _private_key,
    "url-password": _url_password, "cli-flag": _cli_password, "query-string": _query,
    "json-value": _json_value, "yaml-value": _yaml_value, "env-export": _env_export,
    "bearer-header": _bearer, "basic-header": _basic, "netrc": _netrc, "curl-user": _curl_user,
}


def _js(rng: random.Random) -> str:
    v = [rng.choice(string.ascii_lowercase) for _ in range(6)]
    return (f'!function({v[0]},{v[1]}){{"use strict";var {v[2]}={v[0]}.token||{v[1]}.getToken(),'
            f'{v[3]}={{headers:{{Authorization:"Bearer "+{v[2]}}},password:{v[1]}.password}};'
            f'return {v[4]}.apiKey={v[5]}(),{v[4]}.hash="{_r(rng, 16, "0123456789abcdef")}",'
            f'{v[0]}.e{_r(rng, 6)}={v[3]}}}({v[5]},"{_r(rng, 10)}");')


TEAMS = ("staging", "billing", "payments", "search", "platform", "infra", "mobile", "growth")


def _ordinary(rng: random.Random) -> list[tuple[str, str]]:
    w = rng.choice(TEAMS)  # words of no passphrase (WORDS): a piece of one is never a planted piece
    sha = f"{rng.getrandbits(160):040x}"
    digest = hashlib.sha256(rng.randbytes(16)).hexdigest()
    sha512 = hashlib.sha512(rng.randbytes(16)).hexdigest()
    u = str(uuid.UUID(int=rng.getrandbits(128)))
    b64 = base64.b64encode(rng.randbytes(rng.randrange(24, 120))).decode()
    sri = "sha512-" + base64.b64encode(rng.randbytes(64)).decode()
    return [
        ("git-sha", f"commit {sha}"), ("git-sha", f"GIT_COMMIT={sha}"), ("uuid", f"request_id: {u}"),
        ("uuid", f"BUILD_ID={u}"), ("base64", f'FIXTURE_PNG = b"{b64}"'),
        ("base64", f"data:image/png;base64,{b64}"), ("sha256-lock", f'hash = "sha256:{digest}"'),
        ("sha256-lock", f"docker pull app@sha256:{digest}"), ("sha512-lock", f'"integrity": "{sri}",'),
        ("sha512-lock", f"{sha512}  dist/app.tar.gz"), ("minified-js", _js(rng)),
        ("code", "password=self.password, token=None"), ("code", "api_key=os.environ['OPENAI_API_KEY']"),
        ("query", f"GET /search?q=token&page={rng.randrange(9)}&sort=desc"),
        # credential words before prose, code and templates, each at the start of its line
        ("yaml-not-secret", rng.choice([
            f"password: see the {w} entry in the vault", f"Token: none yet, ask {w}",
            f"secret: the {w} key the deploy job reads", "  password: Optional[str] = None",
            "  token: string | null;", "  password: ${DB_PASSWORD}", "  password: !vault |",
            "  api_key: {{ .Values.apiKey }}", "  password: <your password here>",
            f"  passphrase: {w} {rng.choice(TEAMS)}"])),
        ("base64-40", f'"nonce": "{base64.b64encode(rng.randbytes(30)).decode()}",'),
        ("url", f"https://pypi.org/simple/{_r(rng, 8).lower()}/#sha256={digest}"),
    ]


@dataclass
class Doc:
    text: str
    plants: list[tuple[str, str]] = field(default_factory=list)  # (kind, secret as it appears)
    ordinary: list[tuple[str, str]] = field(default_factory=list)  # (kind, text as it appears)


def _escaped(s: str, depth: int) -> str:
    for _ in range(depth):
        s = json.dumps(s)[1:-1]
    return s


def corpus(n: int = 1000, seed: int = 2026) -> list[Doc]:
    """`n` documents: plain logs, transcript lines (one JSON string) and tool-call arguments
    (JSON inside a JSON string), each holding a few planted secrets and ordinary strings."""
    rng = random.Random(seed)
    kinds = list(PLANTS)
    docs = []
    for i in range(n):
        depth = i % 3
        pieces: list[tuple[str, str, str | None]] = []  # (kind, text, secret or None)
        for j in range(3):
            kind = kinds[(i * 3 + j) % len(kinds)]
            text, secret = PLANTS[kind](rng)
            pieces.append((kind, text, secret))
        pieces += [(k, t, None) for k, t in rng.sample(_ordinary(rng), 5)]
        rng.shuffle(pieces)
        lines = [f"[{i}:{k}] {t}" if s is not None else t for k, t, s in pieces]
        text = _escaped("\n".join(lines), depth)
        if depth:
            text = '{"type": "tool_result", "content": "' + text + '"}'
        docs.append(Doc(text, [(k, _escaped(s, depth)) for k, _, s in pieces if s is not None],
                        [(k, _escaped(t, depth)) for k, t, s in pieces if s is None]))
    return docs


def survives(secret: str, out: str) -> bool:
    """Some 8-character piece of `secret` (the whole of a shorter one) is still in `out`,
    backslashes aside (a run of escapes is in any JSON-wrapped text, secret or not)."""
    secret, out = secret.replace("\\", ""), out.replace("\\", "")
    if len(secret) <= 8:
        return secret in out
    return any(secret[i:i + 8] in out for i in range(len(secret) - 7))


def measure(scrub: Callable[[str], str], docs: list[Doc]) -> tuple[Counter[str], Counter[str], Counter[str], Counter[str]]:
    """(planted, missed, ordinary, scrubbed) counts per kind."""
    planted: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    normal: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for doc in docs:
        out = scrub(doc.text)
        for kind, secret in doc.plants:
            planted[kind] += 1
            missed[kind] += survives(secret, out)
        for kind, text in doc.ordinary:
            normal[kind] += 1
            wrong[kind] += text not in out
    return planted, missed, normal, wrong


def previous(rev: str) -> Callable[[str], str]:
    """The scrub function of commit `rev`, loaded from `git show` into a temporary package."""
    tmp = Path(tempfile.mkdtemp(prefix="scrub-prev-"))
    pkg = tmp / "_prev_scrub"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("scrub", "scrub_rules"):
        src = subprocess.run(["git", "show", f"{rev}:src/dsh_recall/policy/{name}.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        (pkg / f"{name}.py").write_text(src)
    spec = importlib.util.spec_from_file_location("_prev_scrub", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    assert spec is not None and spec.loader is not None
    sys.modules["_prev_scrub"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["_prev_scrub"])
    mod = importlib.import_module("_prev_scrub.scrub")
    return mod.scrub  # type: ignore[no-any-return]


# A context-free rule for an AWS secret access key alone (no key name, no access key id
# beside it), measured here and not adopted: the shape is a 30-byte base64 value's too.
LONE_AWS = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")


def lone_aws_rule(text: str, entropy: Callable[[str], float]) -> bool:
    """Whether the candidate rule would scrub something in `text`."""
    return any(any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)
               and entropy(v) >= 4.2 for v in LONE_AWS.findall(text))


def lone_aws_table(docs: list[Doc], entropy: Callable[[str], float], seed: int) -> None:
    rng = random.Random(seed)
    lone = [f"{rng.choice(['the key is', 'use', 'secret:', '-'])} {_r(rng, 40, B64)}" for _ in range(len(docs))]
    hit = Counter(k for d in docs for k, t in d.ordinary if lone_aws_rule(t, entropy))
    total = Counter(k for d in docs for k, _ in d.ordinary)
    print("\n| context-free rule for a lone 40-char AWS secret (not adopted) | n | would scrub |\n|---|---:|---:|")
    found = sum(lone_aws_rule(t, entropy) for t in lone)
    print(f"| planted alone (`the key is <40 chars>`) | {len(lone)} | {found / len(lone):.1%} |")
    for kind in sorted(k for k in total if hit[k]):
        print(f"| ordinary {kind} | {total[kind]} | {hit[kind]} ({hit[kind] / total[kind]:.1%}) |")
    n, h = sum(total.values()), sum(hit.values())
    print(f"| ordinary, all | {n} | {h} ({h / n:.2%}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--baseline", default="HEAD", help="the commit whose scrubber is the baseline")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from dsh_recall.policy.scrub import scrub

    docs = corpus(args.docs, args.seed)
    old = measure(previous(args.baseline), docs)
    new = measure(scrub, docs)
    print(f"{len(docs)} documents, seed {args.seed}; baseline {args.baseline}\n")
    print("| planted kind | n | recall before | recall after |\n|---|---:|---:|---:|")
    for kind in PLANTS:
        n = new[0][kind]
        print(f"| {kind} | {n} | {1 - old[1][kind] / n:.1%} | {1 - new[1][kind] / n:.1%} |")
    n, a, b = sum(new[0].values()), sum(old[1].values()), sum(new[1].values())
    print(f"| **all** | {n} | {1 - a / n:.1%} | {1 - b / n:.1%} |")
    print("\n| ordinary kind | n | scrubbed before | scrubbed after |\n|---|---:|---:|---:|")
    for kind in sorted(new[2]):
        print(f"| {kind} | {new[2][kind]} | {old[3][kind]} | {new[3][kind]} |")
    n, a, b = sum(new[2].values()), sum(old[3].values()), sum(new[3].values())
    print(f"| **all** | {n} | {a} ({a / n:.2%}) | {b} ({b / n:.2%}) |")
    from dsh_recall.policy.scrub import entropy
    lone_aws_table(docs, entropy, args.seed)


if __name__ == "__main__":
    main()

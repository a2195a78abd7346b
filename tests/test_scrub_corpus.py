"""Secrets never stored, issue 39's repros: a value is scrubbed whole (whatever `&`, `;`,
`@`, quotes or escapes it holds, however long), through `scrub`, through an object put and
read back, and through a history import and `history show`; and a seeded slice of
bench/scrub_corpus.py leaves no planted secret and touches no ordinary string."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

from dsh_recall.core.config import load_config
from dsh_recall.policy.scrub import scrub
from dsh_recall.services import history as svc
from dsh_recall.services.objects import ObjectService
from fixtures import bench_module
from test_scrub import _transcript

ROOT = Path(__file__).resolve().parents[1]
STS = "FwoGZXIvYXdzEJr//////////wEaDM" + "".join(random.Random(3).choice(string.ascii_letters + "+/") for _ in range(600))
ESCAPED = json.dumps({"name": "db_query", "arguments": json.dumps({"password": "hun&ter2;x@y\"z", "db": "app"})})

# (the text, the secret in it, what the scrubbed text must be (None: any text without it))
REPROS: list[tuple[str, str, str | None]] = [
    ("aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8LmPKeyB",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8LmPKeyB", "aws configure set aws_secret_access_key [secret:password]"),
    ("aws configure set aws_access_key_id AKIAJ7Q3EXAMPLEZ4KQA", "AKIAJ7Q3EXAMPLEZ4KQA",
     "aws configure set aws_access_key_id [secret:aws-access-key]"),
    (f"aws configure set aws_session_token {STS}", STS, "aws configure set aws_session_token [secret:password]"),
    ("mysql -u app --password=Tr0ub4dor&3horseY", "Tr0ub4dor&3horseY", "mysql -u app --password=[secret:password]"),
    ("mysql -u app -pTr0ub4dor&3horseY app", "Tr0ub4dor&3horseY", "mysql -u app -p[secret:password] app"),
    # In a query string `&` ends the value, and the next pair is not part of it.
    ("GET /v1/export?api_key=Zx81kQmN0pLr55aa&format=csv", "Zx81kQmN0pLr55aa",
     "GET /v1/export?api_key=[secret:password]&format=csv"),
    ("Server=db;Password=p@ss;w0rd!;Database=app", "p@ss", None),
    ("DATABASE_URL=postgres://app:S3cr3tPassw0rd!@db:5432/app", "S3cr3tPassw0rd!",
     "DATABASE_URL=postgres://app:[secret:url-password]@db:5432/app"),
    ("mongodb://svc:a!$&'()*+,;=b%40c9Zq@mongo0:27017/app", "a!$&'()*+,;=b%40c9Zq",
     "mongodb://svc:[secret:url-password]@mongo0:27017/app"),
    ("redis://:Red1s!pass@cache:6379/0", "Red1s!pass", "redis://:[secret:url-password]@cache:6379/0"),
    ('{"token": "' + "aZ9" * 100 + '"}', "aZ9" * 100, '{"token": "[secret:password]"}'),
    (f'{{"Credentials": {{"SessionToken": "{STS}", "Expiration": "2026-01-01"}}}}', STS,
     '{"Credentials": {"SessionToken": "[secret:password]", "Expiration": "2026-01-01"}}'),
    (ESCAPED, "hun&ter2;x@y", None),
    ("export DB_PASSWORD='it\"s&a;long@secret'", 'it"s&a;long@secret', "export DB_PASSWORD='[secret:password]'"),
    ("machine git.example.com\n  login ci\n  password Netrc!Secret77\n", "Netrc!Secret77", None),
    ("curl -u deploy:Cu7l!pa;ss https://ci.example.com", "Cu7l!pa;ss", None),
    ("Authorization: Basic ZGVwbG95OnMzY3JldCFwYXNz", "ZGVwbG95OnMzY3JldCFwYXNz",
     "Authorization: Basic [secret:basic-auth]"),
    # A YAML plain value with spaces: a passphrase, or a value with words after it, is taken
    # to the line's end (a ` #` comment stays), plain and inside a JSON string.
    ("vault:\n  passphrase: correct horse battery staple\n  path: kv/app", "correct horse battery staple",
     "vault:\n  passphrase: [secret:password]\n  path: kv/app"),
    ("  db_password: Tr0ub4dor&3 rotated monthly # ops", "Tr0ub4dor&3 rotated monthly",
     "  db_password: [secret:password] # ops"),
    ('{"cmd": "cat app.yml", "out": "db:\\n  password: correct horse battery staple\\n  host: x"}',
     "correct horse battery staple",
     '{"cmd": "cat app.yml", "out": "db:\\n  password: [secret:password]\\n  host: x"}'),
    # An AWS secret access key named only by its access key id or `secret access key`.
    ("AWS Access Key ID [None]: AKIAJ7Q3EXAMPLEZ4KQA\nAWS Secret Access Key [None]: "
     "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\nDefault region name [None]: eu-west-1",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8LmPKeyB",
     "AWS Access Key ID [None]: [secret:aws-access-key]\nAWS Secret Access Key [None]: "
     "[secret:aws-secret-key]\nDefault region name [None]: eu-west-1"),
    ("User name,Password,Access key ID,Secret access key\nci,,AKIAJ7Q3EXAMPLEZ4KQA,"
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8LmPKeyB", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8LmPKeyB",
     "User name,Password,Access key ID,Secret access key\nci,,[secret:aws-access-key],[secret:aws-secret-key]"),
]


def _left(secret: str, out: str) -> list[str]:
    """The 8-character pieces of `secret` still in `out`."""
    secret, out = secret.replace("\\", ""), out.replace("\\", "")
    return [secret[i:i + 8] for i in range(max(1, len(secret) - 7)) if secret[i:i + 8] in out]


def test_each_repro_is_scrubbed_whole():
    for text, secret, want in REPROS:
        out = scrub(text)
        assert _left(secret, out) == [], (text, out)
        if want is not None:
            assert out == want, text
    # The value of an escaped pair ends at its own closing quote: what follows stays.
    assert '\\"db\\": \\"app\\"' in scrub(ESCAPED)
    assert scrub("Server=db;Password=p@ss;Database=app") == "Server=db;Password=[secret:password];Database=app"


def test_code_and_settings_next_to_credential_words_survive():
    for text in ["password: Optional[str] = None", "token=os.environ.get('TOKEN'), retries=3",
                 "docker login --password-stdin registry.example.com", "aws configure set region eu-west-1",
                 '!function(e,t){var n=e.token||t,r={password:t.password};return r}', "password=getpass()",
                 "GET /search?q=token&page=2&sort=desc", "git clone git@github.com:org/repo.git",
                 "FIXTURE = b'Zm9vYmFyYmF6+WHE=\"next\"'",
                 # YAML: prose, tags, templates and code after a credential key; a key that
                 # does not open its line; two words are no passphrase
                 "password: see the staging entry in the vault", "Token: none yet, ask platform",
                 "secret: the billing key the deploy job reads", "  password: !vault |",
                 "  db_pass: !secret db_password", "  api_key: {{ .Values.apiKey }}",
                 "  token: string | null;", "the password: correct horse battery staple",
                 "  passphrase: staging billing",
                 # a 40-character base64 value with no AWS name or key id beside it (a lone
                 # AWS secret has the same shape: docs/security.md says why it stays)
                 '"nonce": "tE6BoZPJGf19JpXUXhOL8DpuvY/UxIs/6mrAZwa3",',
                 "commit 0123456789abcdef0123456789abcdef01234567"]:
        assert scrub(text) == text, text


def test_a_megabyte_of_hostile_input_is_scanned():
    # Every pattern is bounded or possessive and a rejected value is not rescanned, so
    # these finish in about a second each (bench/scrub_corpus.py; no timing asserted here).
    mb = 1_000_000
    for text in ["password=$" * (mb // 10), 'password="' + "a" * mb, "eyJ" * (mb // 3),
                 "://a:" * (mb // 5), 'AB="' * (mb // 4), "Basic " + "A" * mb, "-u a:" * (mb // 5),
                 "\n  password: a b c d" * (mb // 20), "password: " + "word " * (mb // 5),
                 "AKIAJ7Q3EXAMPLEZ4KQA wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8LmPKeyB," * (mb // 62), "Secret access key: " + "a" * mb]:
        out = scrub(text)
        assert len(out) <= len(text)
    long_value = '{"token": "' + "aZ9" * (mb // 3) + '"}'
    assert scrub(long_value) == '{"token": "[secret:password]"}'


def test_repros_never_reach_an_object(tmp_path):
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    log = "\n".join(f"line {i} ok" for i in range(400)) + "\n" + "\n".join(t for t, _, _ in REPROS)
    with ObjectService(cfg.objects, scrub=cfg.scrub) as objects:
        res = objects.put(log, session="obj-repro", seq=1, tool="bash")
        assert res.offloaded
        stored = objects.original(res.id, "obj-repro", None)
    assert stored is not None and "line 399 ok" in stored
    for _, secret, _ in REPROS:
        assert _left(secret, stored) == [], secret


def test_repros_never_reach_history(tmp_path):
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    path = tmp_path / "proj" / "repro.jsonl"
    path.parent.mkdir()
    _transcript(path, "repro", [t for t, _, _ in REPROS])
    rep = svc.import_paths([str(path)], cfg=cfg)
    assert [f["status"] for f in rep["files"]] == ["imported"]
    shown = json.dumps(svc.show("repro", page_size=100))
    assert shown.count("[secret:") >= len(REPROS)
    for _, secret, _ in REPROS:
        assert _left(json.dumps(secret)[1:-1], shown) == [], secret


def _bench():
    return bench_module("scrub_corpus")


def test_a_seeded_corpus_slice_loses_every_secret_and_no_ordinary_string():
    bench = _bench()
    docs = bench.corpus(120, seed=39)
    planted, missed, ordinary, wrong = bench.measure(scrub, docs)
    assert set(planted) == set(bench.PLANTS) and len(planted) >= 15
    assert sum(missed.values()) == 0, +missed
    assert sum(ordinary.values()) == 600 and sum(wrong.values()) == 0, +wrong

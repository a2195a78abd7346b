"""Secrets never stored: each credential kind becomes a typed placeholder, ordinary
high-entropy text (hashes, UUIDs, base64 fixtures) survives, and a seeded corpus imported
through the real importer and put through ObjectService leaves no planted secret in any
file under the recall home."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import string
import uuid
from pathlib import Path

import pytest
import zstandard

from dsh_recall.core.config import load_config
from dsh_recall.core.paths import recall_home
from dsh_recall.policy.scrub import find, kinds, scrub
from dsh_recall.services import history as svc
from dsh_recall.services.objects import ObjectService

ALNUM = string.ascii_letters + string.digits


def _r(rng: random.Random, n: int, chars: str = ALNUM) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _pem(rng: random.Random) -> tuple[str, str]:
    body = "\n".join(_r(rng, 64, ALNUM + "+/") for _ in range(6))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----", body.split("\n")[2]


def planted(rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, the text the secret appears in, the secret itself) for 12+ kinds, fresh."""
    aws = "AKIA" + _r(rng, 16, string.ascii_uppercase + string.digits)
    ghp = "ghp_" + _r(rng, 36)
    glpat = "glpat-" + _r(rng, 20)
    slack = f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**11, 10**12)}-" + _r(rng, 24).lower()
    stripe = "sk_live_" + _r(rng, 24)
    openai = "sk-proj-" + _r(rng, 40) + "7a"
    anthropic = "sk-ant-api03-" + _r(rng, 80) + "Z9"
    google = "AIza" + _r(rng, 35, ALNUM + "_-")
    jwt = ("eyJhbGciOiJIUzI1NiJ9." + base64.urlsafe_b64encode(
        json.dumps({"sub": _r(rng, 12)}).encode()).decode().rstrip("=") + "." + _r(rng, 43, ALNUM + "_-"))
    pem, pem_line = _pem(rng)
    pw = _r(rng, 10) + "!3"
    basic = _r(rng, 12)
    env = _r(rng, 30) + "aZ9"
    return [
        ("aws-access-key", f"export AWS_ACCESS_KEY_ID={aws}", aws),
        ("github-token", f"git clone https://{ghp}@github.com/o/r", ghp),
        ("gitlab-token", f'curl -H "PRIVATE-TOKEN: {glpat}" https://gitlab.example/api', glpat),
        ("slack-token", f"SLACK={slack}", slack),
        ("stripe-key", f"stripe.api_key = '{stripe}'", stripe),
        ("api-key", f"client = OpenAI(api_key='{openai}')", openai),
        ("api-key", f"ANTHROPIC_API_KEY={anthropic} claude", anthropic),
        ("google-api-key", f"https://maps.googleapis.com/maps/api/js?key={google}", google),
        ("jwt", f"Cookie: session={jwt}; Path=/", jwt),
        ("private-key", f"cat id_rsa\n{pem}\n", pem_line),
        ("password", f"psql password={pw} host=db", pw),
        ("url-password", f"postgres://admin:{basic}@db.internal:5432/app", basic),
        ("env-secret", f"export MY_SERVICE_KEY={env}", env),
    ]


def ordinary(rng: random.Random) -> list[tuple[str, str]]:
    """(text, the high-entropy value in it) that is not a credential."""
    sha = f"{rng.getrandbits(160):040x}"
    digest = hashlib.sha256(_r(rng, 20).encode()).hexdigest()
    u = str(uuid.UUID(int=rng.getrandbits(128)))
    b64 = base64.b64encode(rng.randbytes(48)).decode()
    sri = "sha512-" + base64.b64encode(rng.randbytes(64)).decode()
    return [
        (f"commit {sha}\nAuthor: dev", sha),
        (f'EXPECTED = "{digest}"  # sha256 of the fixture', digest),
        (f"    request_id: {u}", u),
        (f'FIXTURE_PNG = b"{b64}"', b64),
        (f'"integrity": "{sri}",', sri),
        (f"GIT_COMMIT={sha}", sha),
        (f"BUILD_ID={u}", u),
        (f"docker pull app@sha256:{digest}", digest),
        (f"session_id={u} token_count=1200", u),
        (f"password=self.password, token=None  # {sha[:12]}", sha[:12]),
    ]


def test_each_kind_is_replaced_with_its_placeholder():
    rng = random.Random(7)
    for kind, text, secret in planted(rng):
        out = scrub(text)
        assert secret not in out, (kind, out)
        assert f"[secret:{kind}]" in out, (kind, out)
    assert {k for k, _, _ in planted(rng)} <= set(kinds())


def test_more_shapes():
    assert scrub('{"password": "hunter2 two"}') == '{"password": "[secret:password]"}'
    assert scrub("Authorization: Bearer abcDEF1234567890xyzXYZ") == "Authorization: Bearer [secret:bearer-token]"
    assert "AKIA" not in scrub('aws_secret_access_key = "' + "A" * 20 + 'AKIAIOSFODNN7EXAMPLE"')
    assert scrub("DB_PASSWORD: s3cr3t-value") == "DB_PASSWORD: [secret:password]"
    # A key block cut short (a truncated log) loses its lines all the same.
    cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAQAAADMAAAALc3NoLWVk\n"
    assert "b3BlbnNzaC1rZXkt" not in scrub(cut)
    # In a JSON string (a raw transcript line) the newlines are escapes.
    raw = json.dumps({"output": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"})
    assert "MIIEvQ" not in scrub(raw)
    # Scrubbing is idempotent and leaves placeholders alone.
    once = scrub("token=abc123def456ghi")
    assert scrub(once) == once == "token=[secret:password]"


def test_code_that_names_a_credential_survives():
    for text in ["password=self.password", "token=None", "if token == expected_token:",
                 "api_key=os.environ['OPENAI_API_KEY']", "secret: ${VAULT_SECRET}",
                 "the risk-assessment-framework-documentation", "pass the tokens=5 along",
                 "sk-learn is not a key", "TOKEN_LIMIT=4096"]:
        assert scrub(text) == text, text


def test_keep_leaves_a_kind_alone():
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    assert scrub(jwt) == "[secret:jwt]"
    assert scrub(jwt, keep=["jwt"]) == jwt


def test_false_positives_on_ordinary_hashes_and_uuids_are_under_one_percent():
    rng = random.Random(11)
    total = wrong = 0
    for _ in range(300):
        for text, value in ordinary(rng):
            total += 1
            wrong += value not in scrub(text)
    assert total == 3000
    assert wrong / total < 0.01, wrong


def test_a_repository_config_cannot_turn_scrubbing_off(tmp_path):
    (tmp_path / ".dsh-recall.toml").write_text("[scrub]\nenabled = false\nkeep = ['jwt']\n")
    cfg = load_config(workspace=tmp_path)
    assert cfg.scrub.enabled and cfg.scrub.keep == []
    (recall_home() / "config.toml").write_text("[scrub]\nkeep = ['jwt']\n")
    assert load_config().scrub.keep == ["jwt"]


def _transcript(path: Path, sid: str, texts: list[str]) -> None:
    rows = [{"type": "summary", "summary": f"session {sid}"}]
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        rows.append({"type": role, "uuid": f"{sid}-{i}", "sessionId": sid, "cwd": "/repo",
                     "timestamp": f"2025-01-02T03:{i // 60:02d}:{i % 60:02d}Z",
                     "message": {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]}})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _home_bytes() -> list[bytes]:
    """Every file under the recall home (databases with -wal and -shm), zstd frames
    inside them decompressed too, so a compressed object cannot hide a secret."""
    out = []
    for f in recall_home().rglob("*"):
        if not f.is_file():
            continue
        data = f.read_bytes()
        out.append(data)
        at = data.find(b"\x28\xb5\x2f\xfd")
        while at >= 0:
            try:
                out.append(zstandard.ZstdDecompressor().decompressobj().decompress(data[at:]))
            except zstandard.ZstdError:
                pass
            at = data.find(b"\x28\xb5\x2f\xfd", at + 4)
    return out


# 200 transcripts in the suite; the full corpus is 1,000:
# RECALL_TEST_SEEDED_TRANSCRIPTS=1000 pytest tests/test_scrub.py -k seeded
@pytest.mark.parametrize("n", [int(os.environ.get("RECALL_TEST_SEEDED_TRANSCRIPTS", "200"))])
def test_seeded_corpus_leaves_no_planted_secret_on_disk(tmp_path, n):
    rng = random.Random(2026)
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    secrets: list[str] = []
    survivors: list[str] = []
    paths = []
    for t in range(n):
        plants = planted(rng)
        secrets += [s for _, _, s in plants]
        normal = ordinary(rng)
        survivors += [v for _, v in normal]
        texts = [f"step {i}: {text}" for i, (_, text, _) in enumerate(plants)] + [x for x, _ in normal]
        rng.shuffle(texts)
        p = tmp_path / "proj" / f"{uuid.UUID(int=rng.getrandbits(128))}.jsonl"
        p.parent.mkdir(exist_ok=True)
        _transcript(p, f"s{t}", texts)
        paths.append(str(p))
    rep = svc.import_paths(paths, cfg=cfg)
    assert all(f["status"] == "imported" for f in rep["files"])
    with ObjectService(cfg.objects, scrub=cfg.scrub) as objects:
        ids = []
        for t in range(40):  # tool outputs over the offload threshold, as the dsh reaper puts them
            plants = planted(rng)
            secrets += [s for _, _, s in plants]
            log = "\n".join(f"line {i} ok" for i in range(400)) + "\n" + "\n".join(x for _, x, _ in plants)
            res = objects.put(log, session=f"obj{t}", seq=1, tool="bash")
            assert res.offloaded
            ids.append((res.id, f"obj{t}"))
        for obj_id, session in ids:
            stored = objects.original(obj_id, session, None)
            assert stored is not None and "[secret:" in stored
    blobs = _home_bytes()
    found = [s for s in secrets if any(s.encode() in b for b in blobs)]
    assert found == []
    assert sum(b.count(b"[secret:") for b in blobs) >= len(secrets)  # the placeholders are there
    kept = sum(any(v.encode() in b for b in blobs) for v in survivors)
    assert 1 - kept / len(survivors) < 0.01
    # What was scrubbed is still searchable by what surrounds it.
    hits = svc.search("psql password host", session="s3", detail=True, layers=["literal"], cfg=cfg)
    assert any("[secret:password]" in json.dumps(h) for h in hits["hits"])


def test_find_spans_do_not_overlap():
    text = "API_KEY=sk-proj-" + "a1" * 20 + " and password=" + "b2" * 8
    spans = find(text)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_the_committed_provider_rules_are_the_librarys():
    # policy/scrub_rules.py is derived from detect-secrets by scripts/scrub_rules.py (the
    # library's import costs every storing process ~200 ms); it must say what the library says.
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "scrub_rules.py"
    spec = importlib.util.spec_from_file_location("scrub_rules_script", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.OUT.read_text(encoding="utf-8") == mod.render()


def test_storing_does_not_import_the_library():
    import subprocess
    import sys

    code = ("import sys; from dsh_recall.policy import scrub; scrub.scrub('AKIAABCDEFGHIJKLMNOP'); "
            "print('detect_secrets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_paths_in_env_assignments_survive():
    # Real CI logs print `KEY=value` pairs of paths (ci-logs-dev's astor runs): they stay.
    text = ("GENERATION=334 FOLDER_SOLUTION_CODE=/builds/workspace/astor/./output_astor/AstorMain-math_70//src//variant-335 "
            "PATH=/builds/workspace/astor/examples/math_70/src/main/java/org/apache/commons/math/analysis/solvers/BisectionSolver.java "
            "OUT=src/main/java/org/Apache/Commons3/Math.java HOME_URL=https://Example.org/a1B2c3D4e5F6g7H8")
    assert scrub(text) == text

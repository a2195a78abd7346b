"""Code lineage on a real git repository built here: `why PATH:LINE` against git's own blame,
incremental indexing, renames, uncommitted lines, shallow clones, a repository whose config
asks for commands, the agent session behind a commit (through the real history importer and
channel rules), the CLI and the MCP tool. No network; git runs with no system or global
config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.readers import git as gitr
from dsh_recall.services.access.channel import Viewer
from dsh_recall.services.lineage import LineageService, parse_target
from dsh_recall.services.lineage.link import is_edit_call, is_edit_tool, names_commit
from dsh_recall.services.lineage.why import head_line_of, map_line, split_lines
from dsh_recall.stores.contracts import CommitRow, HunkRow
from pg_fixture import pg_namespace, pg_server, pg_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

T0 = 1_700_000_000  # the first commit's time; each next one an hour later


@pytest.fixture(autouse=True)
def _git_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")


def git(repo: Path, *args: str, when: int | None = None) -> str:
    env = dict(os.environ)
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{when} +0000"
    out = subprocess.run(["git", "-c", "user.name=Ada Tester", "-c", "user.email=ada@example.com",
                          *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return out.stdout.strip()


APP_V1 = "import os\n\nRETRIES = 3\nTIMEOUT = 10\n\n\ndef run():\n    return RETRIES\n"
APP_V2 = APP_V1.replace("RETRIES = 3", "RETRIES = int(os.environ.get(\"RETRIES\", \"3\"))")


def make_repo(root: Path) -> dict[str, Any]:
    """Three commits: app.py added; one line changed (and notes.txt added); app.py moved to
    pkg/app.py with its timeout changed. Then an uncommitted edit and a new line on top."""
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text(APP_V1)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Add the runner\n\nFirst cut.", when=T0)
    (repo / "app.py").write_text(APP_V2)
    (repo / "notes.txt").write_text("one\ntwo\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Retries come from the environment", when=T0 + 3600)
    (repo / "pkg").mkdir()
    git(repo, "mv", "app.py", "pkg/app.py")
    (repo / "pkg" / "app.py").write_text(APP_V2.replace("TIMEOUT = 10", "TIMEOUT = 30"))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Move the runner into pkg; a longer timeout", when=T0 + 7200)
    hashes = git(repo, "rev-list", "HEAD").split()[::-1]
    # Working copy: a new first line and an edited `return`.
    text = (repo / "pkg" / "app.py").read_text().replace("return RETRIES", "return RETRIES + 1")
    (repo / "pkg" / "app.py").write_text("# header\n" + text)
    return {"repo": repo, "c1": hashes[0], "c2": hashes[1], "c3": hashes[2]}


def git_blame(repo: Path, rel: str) -> list[str]:
    """Each line's commit as git's own `blame --porcelain` of the working tree says."""
    rows = gitr.parse_blame(subprocess.run(["git", "blame", "--porcelain", "--", rel], cwd=repo,
                                           check=True, capture_output=True).stdout)
    return [r.commit for r in sorted(rows, key=lambda r: r.line)]


@pytest.fixture
def world(tmp_path):
    return make_repo(tmp_path)


def test_every_line_gets_the_commit_git_blame_names(world):
    repo = world["repo"]
    every: set[str] = set()
    with LineageService(load_config(), repo) as svc:
        for rel in ("pkg/app.py", "notes.txt"):
            want = git_blame(repo, rel)
            every.update(want)
            for n, sha in enumerate(want, 1):
                got = svc.why(rel, n, cwd=repo, sessions=False)
                if set(sha) == {"0"}:
                    assert got["status"] == "uncommitted", (rel, n, got)
                    assert "commit" not in got
                else:
                    assert got["status"] == "committed" and got["commit"]["hash"] == sha, (rel, n, got)
    assert len(every) == 4, "the fixture has lines of its three commits and uncommitted ones"


def test_the_answer_carries_message_rename_and_hunk(world):
    repo = world["repo"]
    with LineageService(load_config(), repo) as svc:
        r = svc.why("pkg/app.py", 4, cwd=repo)  # RETRIES = int(...) (line 3 before the header)
        assert r["commit"]["hash"] == world["c2"]
        assert r["commit"]["summary"] == "Retries come from the environment"
        assert r["commit"]["author"] == "Ada Tester" and r["commit"]["date"] == "2023-11-14T23:13:20Z"
        assert r["commit"]["orig_path"] == "app.py" and r["commit"]["orig_line"] == 3
        assert r["head_line"] == 3  # the uncommitted header moved it
        assert r["hunk"]["new_start"] == 3 and "RETRIES = int" in r["hunk"]["excerpt"]
        r = svc.why("pkg/app.py", 5, cwd=repo)  # TIMEOUT = 30
        assert r["commit"]["hash"] == world["c3"] and r["commit"]["orig_path"] == "pkg/app.py"
        first = svc.why("pkg/app.py", 2, cwd=repo)  # import os: the first commit, before the move
        assert first["commit"]["hash"] == world["c1"] and "First cut." in first["commit"]["message"]
        assert svc.why("pkg/app.py", 1, cwd=repo)["status"] == "uncommitted"


def test_uncommitted_untracked_and_bad_inputs(world, tmp_path):
    repo = world["repo"]
    (repo / "new.py").write_text("x = 1\n")
    (repo / "blob.bin").write_bytes(b"\x00\x01\x02\n")
    git(repo, "add", "blob.bin")
    git(repo, "commit", "-q", "-m", "binary", when=T0 + 9000)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.py").write_text("a\n")
    with LineageService(load_config(), repo) as svc:
        r = svc.why("new.py", 1, cwd=repo)
        assert r["status"] == "uncommitted" and "not in HEAD" in r["notes"][0]
        cases = {("pkg/app.py", 99): "past its end", ("missing.py", 1): "does not exist",
                 ("pkg", 1): "is a directory", ("blob.bin", 1): "binary file",
                 (str(plain / "f.py"), 1): "not inside a git repository"}
        for (path, line), msg in cases.items():
            with pytest.raises(InputError, match=msg):
                svc.why(path, line, cwd=repo)
        with pytest.raises(InputError, match="outside the workspace"):
            svc.why("../plain/f.py", 1, cwd=repo, roots=[repo])
        (repo / "out").symlink_to(plain / "f.py")
        with pytest.raises(InputError, match="outside the workspace"):
            svc.why("out", 1, cwd=repo, roots=[repo])
    assert parse_target("a/b:c.py:12") == ("a/b:c.py", 12)
    for bad in ("a.py", "a.py:", "a.py:x", ":3", "a.py:0"):
        with pytest.raises(InputError):
            parse_target(bad)


def test_a_repository_with_no_commits_answers_not_committed(tmp_path):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("a\n")
    with LineageService(load_config(), repo) as svc:
        r = svc.why("a.py", 1, cwd=repo)
        assert r["status"] == "uncommitted" and "no commits" in r["notes"][0]


def test_the_repository_config_runs_nothing(world):
    """fsmonitor, a clean filter and a textconv driver named by the repository: plain `git
    blame` of the working tree runs them (the hazard is real); `why` runs none."""
    repo = world["repo"]
    marks = [repo.parent / f"ran-{i}" for i in range(4)]
    (repo / ".gitattributes").write_text("*.py filter=evil diff=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes", when=T0 + 8000)
    git(repo, "config", "core.fsmonitor", f"touch {marks[0]}; false")
    git(repo, "config", "filter.evil.clean", f"touch {marks[1]}; cat")
    git(repo, "config", "diff.evil.textconv", f"touch {marks[2]}; cat")
    git(repo, "config", "log.showSignature", "true")
    git(repo, "config", "gpg.program", str(marks[3]))
    with LineageService(load_config(), repo) as svc:
        assert svc.why("pkg/app.py", 5, cwd=repo)["commit"]["hash"] == world["c3"]
        assert svc.why("pkg/app.py", 9, cwd=repo)["status"] == "uncommitted"
        assert svc.index()["commits"] == 4
    assert not [m for m in marks if m.exists()]
    subprocess.run(["git", "blame", "--", "pkg/app.py"], cwd=repo, capture_output=True)
    assert any(m.exists() for m in marks[:3]), "plain git blame should have run one of them"


def test_git_runs_are_bounded_and_ignore_redirections(world, tmp_path, monkeypatch):
    repo = world["repo"]
    with pytest.raises(gitr.GitError, match="over 100 bytes"):
        gitr.run(gitr.find_repo(repo), ["log", "-p"], max_bytes=100)
    with pytest.raises(gitr.GitError, match="took over"):
        gitr.run(gitr.find_repo(repo), ["log", "-p"], timeout_s=1e-6)
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # a caller's environment: not the file's repo
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert gitr.find_repo(repo / "pkg" / "app.py") == gitr.Repo(repo, world["c3"], False)


def test_indexing_is_incremental_bounded_and_fetches_older_on_demand(world, monkeypatch):
    repo = world["repo"]
    monkeypatch.setenv("DSH_RECALL_LINEAGE__MAX_COMMITS", "1")
    with LineageService(load_config(), repo) as svc:
        first = svc.index()
        assert first["added"] == 1 and first["commits"] == 1
        assert svc.index()["added"] == 0  # HEAD unchanged: one meta read
        r = svc.why("pkg/app.py", 2, cwd=repo)  # the oldest commit: read on demand
        assert r["commit"]["hash"] == world["c1"] and svc.status()["commits"] == 2
        (repo / "notes.txt").write_text("one\ntwo\nthree\n")
        git(repo, "commit", "-q", "-am", "A third note", when=T0 + 9999)
        assert svc.index()["added"] == 1  # only the new one
        assert svc.index(commits=10)["added"] == 1  # older on demand: the one still missing
        assert svc.status()["commits"] == 4
        found = svc.search("environment retries")
        assert found["results"][0]["hash"] == world["c2"]
        assert found["results"][0]["summary"] == "Retries come from the environment"


def test_a_why_past_its_index_budget_answers_and_says_what_waits(world, monkeypatch):
    repo = world["repo"]
    monkeypatch.setenv("DSH_RECALL_LINEAGE__INDEX_BUDGET_S", "0.000001")
    with LineageService(load_config(), repo) as svc:
        r = svc.why("pkg/app.py", 5, cwd=repo)
        assert r["commit"]["hash"] == world["c3"]  # read on demand all the same
        assert any("3 recent commits are not indexed yet" in n for n in r["notes"])
        found = svc.search("timeout")  # the one `why` read is not owed any more
        assert found["backlog"][0]["what"] == "commits" and found["backlog"][0]["pending"] == 2
        assert svc.index()["pending"] == 0  # no budget: the rest
        assert not svc.why("pkg/app.py", 5, cwd=repo)["notes"]


def test_a_commit_too_big_for_its_patch_is_indexed_without_hunks(world, monkeypatch):
    from dsh_recall.services.lineage import indexing

    repo = world["repo"]
    real = gitr.log_commits

    def refusing(r, hashes, *, patch=True, **kw):  # c2's patch is "too big" for git's bounds
        if patch and world["c2"] in hashes:
            raise gitr.GitError("git log wrote over 67,108,864 bytes; stopped reading")
        return real(r, hashes, patch=patch, **kw)

    monkeypatch.setattr(indexing.git, "log_commits", refusing)
    with LineageService(load_config(), repo) as svc:
        rep = svc.index()
        assert rep["added"] == 3 and rep["pending"] == 0
        assert any("without its hunks" in n for n in rep["notes"])
        r = svc.why("pkg/app.py", 4, cwd=repo)  # a line of c2: the message, no hunk
        assert r["commit"]["summary"] == "Retries come from the environment" and "hunk" not in r
        assert svc.why("pkg/app.py", 5, cwd=repo)["hunk"]["new_start"] == 4  # c3 has its hunks


def test_a_shallow_clone_says_the_line_may_be_older(world, tmp_path):
    clone = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{world['repo']}", str(clone)],
                   check=True, capture_output=True)
    with LineageService(load_config(), clone) as svc:
        r = svc.why("pkg/app.py", 2, cwd=clone)  # from the first commit, which the clone lacks
        assert r["commit"]["hash"] == world["c3"] and r["commit"]["boundary"] is True
        assert any("shallow" in n for n in r["notes"])


# -- the agent session behind a change ---------------------------------------------------------

def _cc_event(sid: str, kind: str, when: int, content: Any, uid: str) -> dict[str, Any]:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(when, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "uuid": uid, "sessionId": sid, "cwd": "/work", "timestamp": stamp,
            "message": {"role": kind, "content": content}}


def write_sessions(folder: Path, repo: Path, c3: str) -> dict[str, Path]:
    """Claude Code transcripts: one edits app.py's RETRIES line shortly before commit 2;
    one runs commit 3 (its output names the hash) hours away from any edit; one edited
    app.py three days before (outside the window)."""
    folder.mkdir(parents=True)
    t2 = T0 + 3600
    edit = {"type": "tool_use", "id": "e1", "name": "Edit", "input": {
        "file_path": str(repo / "app.py"), "old_string": "RETRIES = 3",
        "new_string": "RETRIES = int(os.environ.get(\"RETRIES\", \"3\"))"}}
    files = {}
    files["edit"] = folder / "edit.jsonl"
    files["edit"].write_text("\n".join(json.dumps(e) for e in [
        _cc_event("s-edit", "user", t2 - 900, "please let the environment set the retry count", "u1"),
        _cc_event("s-edit", "assistant", t2 - 600, [{"type": "text", "text": "Reading env."}, edit], "a1"),
        _cc_event("s-edit", "user", t2 - 599, [{"type": "tool_result", "tool_use_id": "e1",
                                                "content": "edited"}], "u2"),
    ]) + "\n")
    run = {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "git commit -am move"}}
    files["commit"] = folder / "commit.jsonl"
    files["commit"].write_text("\n".join(json.dumps(e) for e in [
        _cc_event("s-commit", "user", T0 - 86400, "move the runner into a package", "u1"),
        _cc_event("s-commit", "assistant", T0 - 86300, [run], "a1"),
        _cc_event("s-commit", "user", T0 - 86299, [{"type": "tool_result", "tool_use_id": "b1",
                  "content": f"[main {c3[:7]}] Move the runner into pkg\n 1 file changed"}], "u2"),
    ]) + "\n")
    old = dict(edit, id="o1")
    files["old"] = folder / "old.jsonl"
    files["old"].write_text("\n".join(json.dumps(e) for e in [
        _cc_event("s-old", "user", T0 - 3 * 86400, "tidy the runner", "u1"),
        _cc_event("s-old", "assistant", T0 - 3 * 86400 + 60, [old], "a1"),
    ]) + "\n")
    return files


def _import(files: dict[str, Path], channel: str | None = None, only: tuple[str, ...] | None = None) -> None:
    from dsh_recall.services import history

    cfg = load_config()
    for name, path in files.items():
        if only is None or name in only:
            history.import_paths([str(path)], cfg=cfg, channel=channel)


def test_the_session_that_made_the_change_comes_with_its_turns(world, tmp_path):
    repo = world["repo"]
    _import(write_sessions(tmp_path / "cc", repo, world["c3"]))
    with LineageService(load_config(), repo) as svc:
        r = svc.why("pkg/app.py", 4, cwd=repo)  # the RETRIES line of commit 2
        assert [s["session"] for s in r["sessions"]] == ["s-edit"]
        s = r["sessions"][0]
        assert s["match"] == ["line", "edit"]
        shows = {t["shows"]: t for t in s["turns"]}
        assert "retry count" in shows["request"]["text"]
        assert "RETRIES" in shows["line"]["text"] and shows["line"]["role"] == "assistant"
        assert all(len(t["text"]) <= load_config().lineage.turn_chars for t in s["turns"])
        r = svc.why("pkg/app.py", 5, cwd=repo)  # TIMEOUT = 30: commit 3, named by s-commit
        assert [s["session"] for s in r["sessions"]] == ["s-commit"]
        assert r["sessions"][0]["match"] == ["commit"]
        assert any(c["shows"] == "commit" and world["c3"][:7] in c["text"]
                   for c in r["sessions"][0]["turns"])
        r = svc.why("pkg/app.py", 2, cwd=repo)  # import os: commit 1, no session near it
        assert r["sessions"] == []


def test_sessions_follow_the_callers_channel(world, tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    smap = tmp_path / "map.json"
    smap.write_text(json.dumps({"owner-key": "owner-id", "guest-key": "guest-id"}))
    (home / "config.toml").write_text(
        f'[notes]\nsession_map = "{smap}"\nowner_ids = ["owner-id"]\n')
    repo = world["repo"]
    _import(write_sessions(tmp_path / "cc", repo, world["c3"]), channel="owner-key")
    cfg = load_config()
    with LineageService(cfg, repo) as svc:
        def seen(key: str | None) -> list[str]:
            viewer = Viewer(cfg, key) if key else Viewer.user()
            return [s["session"] for s in svc.why("pkg/app.py", 4, cwd=repo, viewer=viewer)["sessions"]]

        assert seen("owner-key") == ["s-edit"]
        assert seen(None) == ["s-edit"]
        assert seen("guest-key") == []  # the owner's session: a guest never sees it
        assert seen("stranger") == []


# -- front ends ---------------------------------------------------------------------------------

def test_cli_why_json_and_errors(world, monkeypatch):
    from dsh_recall.frontends.cli import cli

    monkeypatch.chdir(world["repo"])
    r = CliRunner().invoke(cli, ["why", "pkg/app.py:5", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["commit"]["hash"] == world["c3"] and data["status"] == "committed"
    human = CliRunner().invoke(cli, ["why", "pkg/app.py:1"])
    assert human.exit_code == 0 and "not committed yet" in human.output
    bad = CliRunner().invoke(cli, ["why", "pkg/app.py"])
    assert bad.exit_code == 1 and "PATH:LINE" in bad.output
    idx = CliRunner().invoke(cli, ["lineage", "index", "--json"])
    assert idx.exit_code == 0 and json.loads(idx.output)["commits"] == 3
    found = CliRunner().invoke(cli, ["lineage", "search", "timeout", "--json"])
    assert json.loads(found.output)["results"][0]["hash"] == world["c3"]


def test_mcp_code_why_answers_within_its_schema(world, tmp_path):
    from dsh_recall.frontends.mcp.handlers import RecallApp
    from dsh_recall.frontends.mcp.lineage import CODE_WHY

    repo = world["repo"]
    _import(write_sessions(tmp_path / "cc", repo, world["c3"]))
    app = RecallApp(workspace=repo, cfg=load_config(workspace=repo))
    try:
        assert "code_why" in app.specs
        data, text = app.call("code_why", {"path": "pkg/app.py", "line": 4})
        jsonschema.validate(data, CODE_WHY.output_schema)
        assert data["commit"]["hash"] == world["c2"] and data["sessions"][0]["session"] == "s-edit"
        assert world["c2"][:10] in text and "s-edit" in text
        data, _ = app.call("code_why", {"path": "pkg/app.py:1"})
        jsonschema.validate(data, CODE_WHY.output_schema)
        assert data["status"] == "uncommitted"
        for args, msg in (({"path": str(tmp_path / "cc" / "edit.jsonl"), "line": 1}, "outside"),
                          ({"path": "pkg/app.py"}, "PATH:LINE"), ({"path": "pkg/app.py", "line": 0}, "minimum"),
                          ({"path": " ", "line": 1}, "empty")):
            with pytest.raises(InputError, match=msg):
                app.call("code_why", args)
        app.default.token_budget = 200
        small, _ = app.call("code_why", {"path": "pkg/app.py", "line": 4})
        jsonschema.validate(small, CODE_WHY.output_schema)
    finally:
        app.close()


# -- pure parts ---------------------------------------------------------------------------------

def test_working_lines_map_to_head_lines():
    head = ["a", "b", "c", "d"]
    assert [head_line_of(["a", "b", "c", "d"], head, n) for n in range(1, 5)] == [1, 2, 3, 4]
    work = ["new", "a", "b", "X", "d"]
    assert [head_line_of(work, head, n) for n in range(1, 6)] == [None, 1, 2, None, 4]
    assert split_lines(b"a\r\nb\nc") == ["a", "b", "c"] and split_lines(b"") == []
    # git's own diff: an insertion, a change, a deletion.
    old, new = b"a\nb\nc\nd\ne\n", b"new\na\nb\nX\nd\n"
    hunks = gitr.diff_hunks(old, new)
    assert [gitr.old_line(hunks, n) for n in range(1, 6)] == [None, 1, 2, None, 4]
    assert gitr.old_line(gitr.diff_hunks(b"a\nb\nc\n", b"a\nc\n"), 2) == 3
    assert map_line(b"a\nb\n", b"a\r\nb\r\n", 2, 10.0) == 2  # a CRLF checkout is no change


def test_edit_tools_and_hash_mentions():
    assert all(is_edit_tool(t) for t in ("Edit", "Write", "MultiEdit", "apply_patch", "edit_file"))
    assert not any(is_edit_tool(t) for t in ("Bash", "Read", "TodoWrite", "grep", None))
    assert is_edit_call("shell", '{"command": ["apply_patch", "*** Begin Patch\\n*** Update File: a.py"]}')
    assert not is_edit_call("shell", '{"command": ["rg", "apply"]}')
    sha = "a9bb076f2b70c2fb1a03997291639275116a3982"
    assert names_commit("[main a9bb076] msg", sha) and names_commit(f"commit {sha}", sha)
    assert not names_commit("a9bb0760 nope", sha) and not names_commit("xa9bb076f", sha[:7] + "0" * 33)


def test_log_parser_reads_renames_binaries_and_quoted_paths(world):
    repo = world["repo"]
    (repo / "ünï code.txt").write_text("x\n")
    (repo / "b.bin").write_bytes(b"\x00\x01")
    git(repo, "add", "ünï code.txt", "b.bin")
    git(repo, "commit", "-q", "-m", "odd paths", when=T0 + 9500)
    r = gitr.find_repo(repo)
    commits = {c.message.split("\n")[0]: c for c in gitr.log_commits(r, gitr.rev_list(r, 10))}
    moved = commits["Move the runner into pkg; a longer timeout"]
    assert [(h.old_path, h.path, h.old_start, h.new_start) for h in moved.hunks] == [
        ("app.py", "pkg/app.py", 4, 4)]
    odd = commits["odd paths"]
    assert set(odd.files) == {"ünï code.txt", "b.bin"}
    assert [h.path for h in odd.hunks] == ["ünï code.txt"]


# -- the store contract, on both backends -------------------------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        from dsh_recall.stores.sqlite.lineage import SqliteLineageStore

        s = SqliteLineageStore(tmp_path / "lineage.sqlite")
    else:
        from dsh_recall.stores.postgres.lineage import PgLineageStore

        s = PgLineageStore(request.getfixturevalue("pg_url"), request.getfixturevalue("pg_namespace"))
    yield s
    s.close()


def test_lineage_store_contract(store):
    c1 = CommitRow("a" * 40, (), "Ada", "ada@x", 10, 11, "Add the parser\n\nbody", ("p.py",))
    c2 = CommitRow("b" * 40, ("a" * 40,), "Bo", "bo@x", 20, 21, "Fix parser retries", ("p.py", "q.py"))
    hunks = [HunkRow("a" * 40, "p.py", "", 0, 0, 1, 3, "x\ny\nz", ""),
             HunkRow("b" * 40, "p.py", "p.py", 2, 1, 2, 1, "Y", "y"),
             HunkRow("b" * 40, "q.py", "", 0, 0, 1, 1, "q", "")]
    assert store.put_commits([c1, c2], hunks) == 2
    assert store.put_commits([c1], hunks[:1]) == 0  # kept as it is
    assert store.known(["a" * 40, "c" * 40]) == {"a" * 40}
    assert store.commit("b" * 40) == c2 and store.commit("c" * 40) is None
    assert [h.path for h in store.hunks("b" * 40)] == ["p.py", "q.py"]
    assert store.hunks("b" * 40, "q.py") == [hunks[2]]
    assert [c.hash for c in store.commits_touching("p.py", 5)] == ["b" * 40, "a" * 40]
    assert [h for h, _ in store.search(["retries"], 5)] == ["b" * 40]
    assert {h for h, _ in store.search(["parser", "\"odd\" OR"], 5)} == {"a" * 40, "b" * 40}
    assert store.search([], 5) == []
    store.set_meta("head", "b" * 40)
    assert store.get_meta("head") == "b" * 40 and store.get_meta("nope") is None
    assert store.stats() == {"commits": 2, "hunks": 3}


def test_why_and_search_with_the_postgresql_store(world, pg_url):
    repo = world["repo"]
    cfg = load_config(overrides={"store": pg_url})
    with LineageService(cfg, repo) as svc:
        r = svc.why("pkg/app.py", 4, cwd=repo)
        assert r["commit"]["hash"] == world["c2"] and "RETRIES = int" in r["hunk"]["excerpt"]
        st = svc.status()
        assert st["commits"] == 3 and "#lineage/repo-" in st["db"]  # a namespace, no local file
        assert not (Path(os.environ["DSH_RECALL_HOME"]) / "lineage").exists()
        assert svc.search("longer timeout")["results"][0]["hash"] == world["c3"]

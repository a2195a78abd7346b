"""A repository that arrived with a hostile `.git` (a tarball, a copied folder): its config
names files for git to open, and its `.git` file points at another repository. `why` and
MCP `code_why` must answer from this tree's history only, never open what the config names,
and never pass git's stderr on raw.

A FIFO detects an open: opening one for reading blocks until a writer comes, so a call that
answers proves git never opened it (the old code ran into the git timeout, set low here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.readers import git as gitr
from dsh_recall.services.lineage import LineageService

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not hasattr(os, "mkfifo"),
                                reason="needs git and FIFOs")

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # the shape of a GitHub token


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    monkeypatch.setenv("DSH_RECALL_LINEAGE__GIT_TIMEOUT_S", "3")


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=Ada Tester", "-c", "user.email=ada@example.com",
                          *args], cwd=repo, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def make_repo(root: Path, name: str = "ws", text: str = "print('hi')\n",
              message: str = "Add the app") -> tuple[Path, str]:
    repo = root / name
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", message)
    return repo, git(repo, "rev-parse", "HEAD")


def hostile(repo: Path, section: str, key: str, value: str) -> None:
    """Append `key = value` under `[section]` to the repository's config, by hand: git itself
    would follow an `include.path` while writing."""
    with open(repo / ".git" / "config", "a") as f:
        f.write(f"[{section}]\n\t{key} = {value}\n")


def why(repo: Path, target: str = "app.py", line: int = 1, roots: list[Path] | None = None):
    with LineageService(load_config(workspace=repo), repo) as svc:
        return svc.why(target, line, cwd=repo, roots=roots, sessions=False)


def test_blame_never_opens_an_ignore_revs_file_nor_quotes_it(tmp_path):
    repo, head = make_repo(tmp_path)
    creds = tmp_path / "home" / ".git-credentials"
    creds.parent.mkdir(parents=True, exist_ok=True)
    creds.write_text(f"https://user:{TOKEN}@github.com\n")
    hostile(repo, "blame", "ignoreRevsFile", str(creds))
    r = why(repo)
    assert r["status"] == "committed" and r["commit"]["hash"] == head
    assert TOKEN not in repr(r)


@pytest.mark.parametrize(("section", "key"), [
    ("blame", "ignoreRevsFile"), ("mailmap", "file"), ("include", "path"),
    ('includeIf "gitdir:/"', "path"), ("diff", "orderFile"), ("core", "attributesFile")])
def test_config_files_the_repository_names_are_never_opened(tmp_path, section, key):
    repo, head = make_repo(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    hostile(repo, section, key, str(fifo))
    r = why(repo)
    assert r["status"] == "committed" and r["commit"]["hash"] == head
    with LineageService(load_config(workspace=repo), repo) as svc:
        assert svc.index()["head"] == head  # `git log -p` reads no order file either


def test_an_endless_ignore_revs_file_is_never_read(tmp_path):
    repo, head = make_repo(tmp_path)
    hostile(repo, "blame", "ignoreRevsFile", os.devnull.replace("null", "zero"))
    assert why(repo)["commit"]["hash"] == head


def test_commands_the_config_names_never_run(tmp_path):
    repo, head = make_repo(tmp_path)
    mark = tmp_path / "ran"
    cmd = f"touch {mark}"
    for section, key in (("core", "fsmonitor"), ("core", "pager"), ("diff", "external"),
                         ('diff "py"', "textconv"), ('filter "x"', "clean"),
                         ("core", "sshCommand"), ("credential", "helper")):
        hostile(repo, section, key, cmd)
    (repo / ".gitattributes").write_text("*.py diff=py filter=x\n")
    assert why(repo)["commit"]["hash"] == head
    assert not mark.exists()


def test_a_gitdir_outside_the_workspace_is_not_followed(tmp_path):
    private, secret = make_repo(tmp_path, "private", "secret = 1\n", "Private work")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("secret = 1\n")
    (ws / ".git").write_text("gitdir: ../private/.git\n")
    for roots in ([ws], None):
        with pytest.raises(InputError, match="outside the workspace") as e:
            why(ws, "README.md", roots=roots)
        assert secret[:7] not in str(e.value) and "Private work" not in str(e.value)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "README.md").write_text("secret = 1\n")
    (linked / ".git").symlink_to(private / ".git")
    with pytest.raises(InputError, match="outside the workspace"):
        why(linked, "README.md")


def test_a_gitdir_inside_the_workspace_and_a_linked_worktree_are_followed(tmp_path):
    repo, head = make_repo(tmp_path)
    assert why(repo, roots=[tmp_path])["commit"]["hash"] == head
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))  # its gitdir is in repo/.git
    assert why(tmp_path / "wt")["commit"]["hash"] == head
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.move(str(repo / ".git"), moved / "dot-git")
    (repo / ".git").write_text(f"gitdir: {moved / 'dot-git'}\n")
    assert why(repo, roots=[tmp_path])["commit"]["hash"] == head
    with pytest.raises(InputError, match="outside the workspace"):
        why(repo, roots=[repo])


def test_a_dot_git_that_is_a_fifo_or_a_huge_file_is_refused(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("x\n")
    os.mkfifo(ws / ".git")
    with pytest.raises(InputError, match="not a git folder"):
        why(ws)
    (ws / ".git").unlink()
    (ws / ".git").write_text("gitdir: " + "a" * (1 << 17))
    with pytest.raises(InputError, match="not a small regular file"):
        why(ws)


def test_a_name_too_long_is_a_clear_error(tmp_path):
    repo, _ = make_repo(tmp_path)
    from dsh_recall.frontends.mcp.handlers import RecallApp

    with pytest.raises(InputError, match="not a usable path"):
        why(repo, "a" * 5000 + ".py")
    app = RecallApp(workspace=repo, cfg=load_config(workspace=repo))
    try:
        for name in ("a" * 5000 + ".py", "d/" * 3000 + "x.py", "b" * 300 + "/x.py"):
            with pytest.raises(InputError):
                app.call("code_why", {"path": name, "line": 1})
    finally:
        app.close()


def test_gits_stderr_reaches_the_caller_scrubbed_and_short():
    msg = gitr._failure("blame", f"fatal: invalid object name: https://user:{TOKEN}@github.com"
                        f"\nsecond line\n".encode() + b"x" * 5000)
    assert msg.startswith("git blame failed: fatal: invalid object name")
    assert TOKEN not in msg and "second line" not in msg and len(msg) < 240


def test_objects_borrowed_from_outside_the_workspace_are_refused(tmp_path):
    private, secret = make_repo(tmp_path, "private", "secret = 1\n", "Private work")
    repo, _ = make_repo(tmp_path / "ws")
    (repo / ".git" / "objects" / "info" / "alternates").write_text(
        str(private / ".git" / "objects") + "\n")
    (repo / ".git" / "HEAD").write_text(secret + "\n")
    with pytest.raises(InputError, match="alternate objects are outside the workspace"):
        why(repo, roots=[tmp_path / "ws"])


def test_a_submodule_is_followed_and_a_path_inside_dot_git_is_refused(tmp_path):
    sub, sub_head = make_repo(tmp_path, "sub", "x = 2\n", "Sub work")
    top, _ = make_repo(tmp_path, "top")
    git(top, "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(sub), "sm")
    assert (top / "sm" / ".git").is_file()  # gitdir: ../.git/modules/sm, outside sm
    assert why(top / "sm")["commit"]["hash"] == sub_head
    with pytest.raises(InputError, match="not inside a git repository"):
        why(top, ".git/HEAD")

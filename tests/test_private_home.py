"""Everything under the recall home is private (folders 0700, files 0600), an older home
included; repository ignore patterns cannot make a walk backtrack; `trust` hashes the whole
file.

Regressions from the adversarial pass: a 0600 note in a 0700 folder was readable by every
local user through notes/*.sqlite (0644 in a 0755 home); `*a*a*a*a*a*a*a*a*a*b` in a
.gitignore held the GIL for minutes against a long file name; a trusted config changed past
its first MiB stayed trusted.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_recall.core import paths, trust
from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError


def _loose_modes(home: Path) -> None:
    """What an older version left: a 0755 home, 0755 folders, 0644 databases and -wal."""
    (home / "notes").mkdir(parents=True, exist_ok=True)
    (home / "workspaces" / "old-123").mkdir(parents=True, exist_ok=True)
    db = home / "notes" / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES ('secret')")
    conn.commit()
    (home / "history.sqlite").write_bytes(b"")
    (home / "workspaces" / "old-123" / "vectors.bin").write_bytes(b"x")
    for p in [home, *home.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    conn.close()


def _open_everything(tmp_path: Path) -> None:
    from dsh_recall.services.code import CodeService
    from dsh_recall.services.notes import NotesService
    from dsh_recall.services.objects import ObjectService

    ws = tmp_path / "repo"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "auth.py").write_text("def hash_password(password, salt):\n    return salt\n")
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "fake"}})
    code = CodeService(ws, cfg)
    code.index()
    code.search("hash password")
    code.close()
    notes_root = tmp_path / "memory"
    notes_root.mkdir(mode=0o700)
    (notes_root / "secret.md").write_text("# Keys\n\nthe deploy key is hunter2\n")
    os.chmod(notes_root / "secret.md", 0o600)
    notes = NotesService(load_config(overrides={"embedder": {"name": "fake"}}), roots=[notes_root])
    notes.index()
    notes.search("deploy key")
    notes.close()
    objects = ObjectService()
    objects.put("BUILD FAILURE\ncannot find symbol\n")
    objects.close()
    trust_me = ws / ".dsh-recall.toml"
    trust_me.write_text("limit = 5\n")
    trust.trust(trust_me)


def _loose(home: Path) -> list[str]:
    out = []
    for p in [home, *home.rglob("*")]:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_IMODE(st.st_mode) & 0o077:
            out.append(f"{p.relative_to(home)} {oct(stat.S_IMODE(st.st_mode))}")
    return out


@pytest.fixture
def fresh_umask():
    """The test process's umask as a user's shell has it (022); restored after."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_an_older_home_and_everything_written_after_is_private(tmp_path, fresh_umask, _isolated_home):
    home = _isolated_home
    paths._swept.clear()  # a new process: the home was not swept yet
    _loose_modes(home)
    _open_everything(tmp_path)
    assert _loose(home) == []
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert any(p.name.endswith(".sqlite") for p in home.rglob("*"))  # the check saw databases


def test_a_new_home_is_private_from_its_first_folder(tmp_path, fresh_umask, monkeypatch):
    home = tmp_path / "deep" / "new-home"
    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    paths._swept.clear()
    _open_everything(tmp_path)
    assert _loose(home) == []


def test_a_symlink_in_the_home_is_not_followed_by_the_sweep(tmp_path, fresh_umask, _isolated_home):
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours to change")
    os.chmod(outside, 0o644)
    os.symlink(outside, _isolated_home / "link")
    paths._swept.clear()
    paths.ensure_dir(_isolated_home / "notes")
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644


SECOND_UID = "dshrecalltest"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to create a second user (useradd) and read as it")
def test_a_second_uid_cannot_read_an_index(tmp_path, fresh_umask, _isolated_home):
    if shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("useradd or runuser is not installed (apt-get install -y passwd util-linux)")
    subprocess.run(["useradd", "--no-create-home", SECOND_UID], capture_output=True)
    try:
        # The second user may reach the folders above the home (as under /home), so only
        # the recall home's own modes can stop it.
        for p in [_isolated_home, *_isolated_home.parents]:
            os.chmod(p, os.stat(p).st_mode | 0o011)
        paths._swept.clear()
        _loose_modes(_isolated_home)
        db = _isolated_home / "notes" / "old.sqlite"
        read = ["runuser", "-u", SECOND_UID, "--", "cat", str(db)]
        before = subprocess.run(read, capture_output=True)
        assert before.returncode == 0  # the old modes did let it read
        _open_everything(tmp_path)
        for target in [db, *sorted(_isolated_home.rglob("*.sqlite"))]:
            r = subprocess.run(["runuser", "-u", SECOND_UID, "--", "cat", str(target)],
                               capture_output=True)
            assert r.returncode != 0 and b"secret" not in r.stdout and b"hunter2" not in r.stdout
    finally:
        subprocess.run(["userdel", SECOND_UID], capture_output=True)


# -- ReDoS ------------------------------------------------------------------------------

EVIL = "*a*a*a*a*a*a*a*a*a*b"


def _walk_in_child(ws: Path, extra_ignore: list[str]) -> subprocess.CompletedProcess:
    """The walk runs in a child: a backtracking regex holds the GIL, so no signal or
    thread in this process could stop it. 120 s is a hang guard, not a timing."""
    code = textwrap.dedent(f"""
        from pathlib import Path
        from dsh_recall.readers.workspace import walk
        r = walk(Path({str(ws)!r}), [], max_file_bytes=1 << 20, extra_ignore={extra_ignore!r})
        print(sorted(f.path for f in r.files))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("where", ["gitignore", "config"])
def test_a_catastrophic_ignore_pattern_does_not_hang_the_walk(tmp_path, where):
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / ("a" * 200)).write_text("x\n")
    (ws / ("a" * 9 + "b")).write_text("x\n")  # this one the pattern ignores
    (ws / "main.py").write_text("print(1)\n")
    if where == "gitignore":
        (ws / ".gitignore").write_text(EVIL + "\n")
    r = _walk_in_child(ws, [EVIL] if where == "config" else [])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(sorted(["a" * 200, "main.py"] + ([".gitignore"] if where == "gitignore" else [])))


def test_a_gitignore_that_is_a_fifo_or_huge_is_read_bounded(tmp_path):
    from dsh_recall.readers.workspace import walk

    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "main.py").write_text("print(1)\n")
    os.mkfifo(ws / ".gitignore")
    r = walk(ws, [], max_file_bytes=1 << 20)  # returns (a FIFO .gitignore would hang the open)
    assert [f.path for f in r.files] == ["main.py"]


# -- trust --------------------------------------------------------------------------------

def test_a_change_past_the_first_mib_makes_a_trusted_file_untrusted(tmp_path):
    f = tmp_path / ".dsh-recall.toml"
    f.write_bytes(b"limit = 5\n" + b"#" * (2 << 20) + b"\n")
    trust.trust(f)
    assert trust.is_trusted(f)
    with open(f, "r+b") as h:
        h.seek((1 << 20) + 100)
        h.write(b"\n[embedder]\nurl = 'http://evil'\n#")
    assert not trust.is_trusted(f)


def test_trust_refuses_a_file_over_its_bound_with_a_clear_error(tmp_path):
    f = tmp_path / ".dsh-recall.toml"
    with open(f, "wb") as h:
        h.truncate(trust.TRUST_MAX_BYTES + 1)
    with pytest.raises(InputError, match="at most"):
        trust.trust(f)
    os.mkfifo(tmp_path / "fifo.toml")
    with pytest.raises(InputError):
        trust.trust(tmp_path / "fifo.toml")

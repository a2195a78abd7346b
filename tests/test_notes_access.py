"""Access levels: randomized layouts and sessions find zero leaks; doubt means nothing."""

import json
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.policy import access
from dsh_recall.services.access.channel import Viewer
from dsh_recall.services.notes import NotesService


def _oracle_level(path: str) -> str:
    # Written independently of access.level_of: only a file named public.md is public.
    return "public" if path.split("/")[-1] == "public.md" else "personal"


def _oracle_allowed(key, smap, owners):
    """None = everything (no map), else the set of levels the key may see."""
    if smap is None:
        return None
    if not isinstance(key, str) or not key.strip():
        return set()
    if key.strip().lower().startswith(("group:", "grp:")):
        return {"public"}
    sid = smap.get(key)
    if not isinstance(sid, str) or not sid.strip():
        return set()
    return {"public", "personal"} if sid in owners else {"public"}


NAMES = ["public.md", "personal.md", "secret.md", "journal.md", "todo.md", "PUBLIC.md",
         "public.md.bak.md", "notpublic.md", "public-notes.md"]
DIRS = ["", "team/", "a/b/", "public/", "group/"]
KEYS = ["group:dev", "grp:family", "GROUP:loud", "telegram:42", "telegram:7", "cli", "",
        "  ", "unknown-key", "grp", "group", "dm:owner", "dm:guest", None]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KEYS + ["x"]), st.dictionaries(st.sampled_from(KEYS[:-1] + ["x"]),
       st.one_of(st.sampled_from(["u1", "u2", "owner", ""]), st.integers(), st.none())),
       st.lists(st.sampled_from(["u1", "owner", "", "u3"]), max_size=3), st.booleans())
def test_channel_matches_the_oracle(key, raw_map, owners, configured):
    smap = access.parse_session_map(json.dumps(raw_map)) if configured else None
    ch = access.channel(key, smap, owners, map_configured=configured)
    want = _oracle_allowed(key, {k: v for k, v in raw_map.items()} if configured else None,
                           [o for o in owners if o.strip()])
    assert (ch.allowed is None) == (want is None)
    if want is not None:
        assert set(ch.allowed) == want


def _make_layout(rng: random.Random, root):
    files = {}
    for n in range(rng.randint(1, 8)):
        rel = rng.choice(DIRS) + rng.choice(NAMES)
        word = f"marker{n}"
        body = f"# Note {n}\n\n- shared fact about alpaca {word}\n- 数据库 迁移 {word}\n"
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body, encoding="utf-8")
        files[rel] = body
    return files


def test_randomized_layouts_and_sessions_never_leak(tmp_path):
    rng = random.Random(20240521)
    checked = 0
    for layout in range(12):
        root = tmp_path / f"layout{layout}"
        root.mkdir()
        files = _make_layout(rng, root)
        smap = {k: rng.choice(["u1", "u2", "owner", "guest"]) for k in KEYS[:-1]
                if k is not None and rng.random() < 0.6}
        owners = rng.sample(["u1", "u2", "owner"], rng.randint(0, 2))
        map_file = tmp_path / f"map{layout}.json"
        map_file.write_text(json.dumps(smap))
        cfg = load_config(overrides={"embedder": {"name": "fake"}, "notes": {
            "session_map": str(map_file), "owner_ids": owners}})
        svc = NotesService(cfg, roots=[root])
        svc.index()
        for key in KEYS + [f"random-{rng.random()}"]:
            allowed = _oracle_allowed(key, smap, owners)
            for query in ["alpaca", "数据库", "marker0 marker3", "note"]:
                res = svc.search(query, viewer=Viewer(cfg, key), limit=50)
                for r in res["results"]:
                    level = _oracle_level(r["path"])
                    assert r["level"] == level, r["path"]
                    assert level in allowed, (key, r["path"], smap, owners)
                    checked += 1
                if not allowed:
                    assert res["results"] == []
                    assert svc.auto_recall("alpaca marker0 数据库", viewer=Viewer(cfg, key)) == ""
                else:
                    visible = {p for p in files if _oracle_level(p) in allowed}
                    if query == "alpaca" and visible:
                        assert res["results"], "a visible note must still be found"
                block = svc.auto_recall("shared fact about alpaca", viewer=Viewer(cfg, key))
                for p in files:
                    if _oracle_level(p) not in (allowed if allowed is not None else {"public", "personal"}):
                        assert f"- {p}:" not in block
        svc.close()
    assert checked > 100  # the loop really looked at results


def _svc(tmp_path, **notes):
    root = tmp_path / "notes"
    root.mkdir(exist_ok=True)
    (root / "public.md").write_text("- the office wifi is called otter\n")
    (root / "secret.md").write_text("- the otter vault code is 1234\n")
    cfg = load_config(overrides={"embedder": {"name": "fake"}, "notes": notes})
    svc = NotesService(cfg, roots=[root])
    svc.index()
    return svc


def test_without_a_session_map_there_is_no_filtering(tmp_path):
    svc = _svc(tmp_path)
    res = svc.search("otter", viewer=Viewer(svc.cfg, None))
    assert {r["path"] for r in res["results"]} == {"public.md", "secret.md"}
    assert res["access"]["channel"] == "unfiltered"


@pytest.mark.parametrize("session", [None, "", "  ", "not-in-map"])
def test_an_undeterminable_channel_returns_nothing(tmp_path, session):
    m = tmp_path / "map.json"
    m.write_text(json.dumps({"dm:me": "owner"}))
    svc = _svc(tmp_path, session_map=str(m), owner_ids=["owner"])
    res = svc.search("otter", viewer=Viewer(svc.cfg, session))
    assert res["results"] == [] and res["access"]["channel"] == "unknown"
    assert svc.auto_recall("what is the otter vault code", viewer=Viewer(svc.cfg, session)) == ""
    # the owner still sees everything, a group only the public note
    assert len(svc.search("otter", viewer=Viewer(svc.cfg, "dm:me"))["results"]) == 2
    assert [r["path"] for r in svc.search("otter", viewer=Viewer(svc.cfg, "group:x"))["results"]] == ["public.md"]


def test_no_viewer_fails_closed_and_the_user_says_so(tmp_path):
    # The source contract: a caller without a viewer is resolved as a caller without a key
    # (with a session map: nothing), so a front end that forgets to pass one widens nothing;
    # the user at this machine (federated search, `notes eval`) says so with Viewer.user().
    m = tmp_path / "map.json"
    m.write_text(json.dumps({"dm:me": "owner"}))
    svc = _svc(tmp_path, session_map=str(m), owner_ids=["owner"])
    assert svc.search("otter")["results"] == []
    assert svc.search("otter", viewer=Viewer(svc.cfg, None))["results"] == []
    assert svc.auto_recall("what is the otter vault code") == ""
    res = svc.search("otter", viewer=Viewer.user())
    assert {r["path"] for r in res["results"]} == {"public.md", "secret.md"}
    assert res["access"]["channel"] == "unfiltered"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '"a string"', ""])
def test_a_malformed_session_map_fails_closed(tmp_path, content):
    m = tmp_path / "map.json"
    m.write_text(content)
    svc = _svc(tmp_path, session_map=str(m), owner_ids=["owner"])
    for session in ["dm:me", "group:x", None]:
        res = svc.search("otter", viewer=Viewer(svc.cfg, session))
        assert res["results"] == []
        assert any("session map unusable" in n for n in res["notes"])


def test_a_missing_session_map_file_fails_closed(tmp_path):
    svc = _svc(tmp_path, session_map=str(tmp_path / "nope.json"), owner_ids=["owner"])
    assert svc.search("otter", viewer=Viewer(svc.cfg, "dm:me"))["results"] == []


def test_hit_levels_are_the_full_computation_read_only_when_needed(tmp_path, monkeypatch):
    # An unfiltered or owner channel labels only its hits: a note personal by name needs no
    # look at the others, one public by name still gets every note's identity (a hard link
    # under a public name to a secret note is personal).
    root = tmp_path / "notes"
    (root / "shared").mkdir(parents=True)
    (root / "secret.md").write_text("- the otter vault code is 1234\n")
    (root / "public.md").write_text("- the office wifi is called otter\n")
    (root / "shared" / "team.md").write_text("- otter team lunch on fridays\n")
    (root / "diary.md").write_text("- a heron nests by the lake\n")
    os.link(root / "secret.md", root / "shared" / "public.md")
    cfg = load_config(overrides={"embedder": {"name": "fake"},
                                 "notes": {"levels": {"public.md": "public", "shared/*": "public"}}})
    svc = NotesService(cfg, roots=[root])
    svc.index()
    full = svc.levels()
    assert full == {"secret.md": "personal", "public.md": "public", "shared/team.md": "public",
                    "shared/public.md": "personal", "diary.md": "personal"}
    lexical = ("lexical",)  # the fake embedder's vectors would add every note
    got = {r["path"]: r["level"] for r in svc.search("otter", limit=20, layers=lexical)["results"]}
    assert set(got) == {"secret.md", "public.md", "shared/team.md", "shared/public.md"}
    assert got == {p: full[p] for p in got}
    reads: list[int] = []
    real = type(svc.store).files

    def files(store):
        reads.append(1)
        return real(store)

    monkeypatch.setattr(type(svc.store), "files", files)
    res = svc.search("heron", limit=5, layers=lexical)["results"]
    assert [(r["path"], r["level"]) for r in res] == [("diary.md", "personal")] and reads == []
    svc.search("otter wifi", limit=5, layers=lexical)
    assert reads  # a note public by name among the hits: every note's identity was read
    svc.close()


def test_levels_are_configurable_and_unknown_files_are_personal():
    levels = {"public.md": "public", "shared/*.md": "public", "faq-*.md": "public"}
    assert access.level_of("public.md", levels) == "public"
    assert access.level_of("x/public.md", levels) == "public"
    assert access.level_of("shared/team.md", levels) == "public"
    assert access.level_of("faq-tools.md", levels) == "public"
    assert access.level_of("personal.md", levels) == "personal"
    assert access.level_of("secret.md", levels) == "personal"
    assert access.level_of("journal/2024.md", levels) == "personal"
    assert access.level_of("public.md", {"public.md": "personal"}) == "personal"
    assert access.level_of("x.md", {}, default_level="public") == "public"

"""Randomized trust test: layouts, session maps, user and repository configs, channels, MCP
clients and all four sources; no answer may hold anything above the caller's level.

The oracle below is written from docs/security.md, independently of the code: a channel
from the user's own map (never the repository's), note levels by name then by file identity
(hard links), history sessions and objects by the channel that produced them, code only
inside the workspace. Every guard matters: the trials are chosen so that removing any one of
them (repository config limits, channel resolution, link-aware levels, the history or object
filter, workspace bounds, per-client state) makes some trial fail.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.services import history
from dsh_recall.services.objects import ObjectService

KEYS = [None, "owner-key", "guest-key", "group:team", "stranger", "grp:ops"]
MAP = {"owner-key": "owner-id", "guest-key": "guest-id", "other-owner": "boss-id"}
NAMES = ["public.md", "secret.md", "faq-deploy.md", "journal.md", "team/public.md", "x/faq-a.md"]
LEVELS = [{"public.md": "public"}, {"public.md": "public", "faq-*.md": "public"}, {}]
HOSTILE = [
    '[notes]\nsession_map = ""\n',
    '[notes]\ndefault_level = "public"\n',
    '[notes]\nowner_ids = ["guest-id"]\n',
    '[notes.levels]\n"secret.md" = "public"\n"journal.md" = "public"\n',
    '[mcp]\nallowed_workspaces = ["/"]\n',
    'source_roots = ["out={outside}"]\n',
]


# -- the oracle ----------------------------------------------------------------------------
def oracle_channel(key, map_state, owners):
    if map_state == "none":
        return "unfiltered"
    if map_state != "ok" or not key:
        return "unknown"
    if key.lower().startswith(("group:", "grp:")):
        return "group"
    sid = MAP.get(key)
    if sid is None:
        return "unknown"
    return "owner" if sid in owners else "guest"


def name_public(rel, levels, default):
    base = rel.rsplit("/", 1)[-1]
    if base in levels:
        return levels[base] == "public"
    for pat, lv in levels.items():
        if fnmatch.fnmatchcase(base, pat):
            return lv == "public"
    return default == "public"


def note_public(notes_dir, rel, levels, default):
    st = os.stat(notes_dir / rel)
    names = [p.relative_to(notes_dir).as_posix() for p in notes_dir.rglob("*.md")
             if os.stat(p).st_ino == st.st_ino]
    return len(names) == st.st_nlink and all(name_public(n, levels, default) for n in names)


def item_visible(kind, key, producer):
    if kind in ("unfiltered", "owner"):
        return True
    if kind in ("group", "guest"):
        return producer is not None and producer == key
    return False


# -- one trial -----------------------------------------------------------------------------
def build(tmp: Path, rnd: random.Random, trial: int) -> dict:
    home = Path(os.environ["DSH_RECALL_HOME"])
    notes, repo, outside = tmp / "notes", tmp / "repo", tmp / "outside"
    for d in (notes, repo / "pkg", outside):
        d.mkdir(parents=True)
    (outside / "loot.py").write_text(f"OUT = 'alpaca outmark{trial}'\n")
    (repo / "pkg" / "app.py").write_text(f"def alpaca_handler():\n    return 'alpaca code{trial}'\n")
    files: dict[str, str] = {}
    for i, rel in enumerate(rnd.sample(NAMES, rnd.randint(3, len(NAMES)))):
        (notes / rel).parent.mkdir(parents=True, exist_ok=True)
        marker = f"nm{trial}x{i}"
        (notes / rel).write_text(f"# Note {i}\n\n- alpaca fact {marker}\n")
        files[rel] = marker
    # Hard links: a public-looking name to a private file, or the other way round.
    for _ in range(rnd.randint(0, 2)):
        src = rnd.choice(sorted(files))
        dst = rnd.choice(["public.md", "team/public.md", "faq-link.md", "z/public.md"])
        if (notes / dst).exists():
            continue
        (notes / dst).parent.mkdir(parents=True, exist_ok=True)
        os.link(notes / src, notes / dst)
    levels = rnd.choice(LEVELS)
    default = rnd.choice(["personal", "personal", "public"])
    owners = rnd.choice([["owner-id"], ["owner-id", "boss-id"], []])
    map_state = rnd.choice(["ok", "ok", "ok", "none", "missing", "malformed"])
    smap = tmp / "map.json"
    if map_state == "ok":
        smap.write_text(json.dumps(MAP))
    elif map_state == "malformed":
        smap.write_text("{not json")
    lines = ['[embedder]\nname = "fake"\n', f'[notes]\nroots = ["{notes}"]\n',
             f'default_level = "{default}"\nowner_ids = {json.dumps(owners)}\n']
    if map_state != "none":
        lines.append(f'session_map = "{smap}"\n')
    lines.append("[notes.levels]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in levels.items()))
    (home / "config.toml").write_text("".join(lines))
    hostile = rnd.sample(HOSTILE, rnd.randint(1, 3))
    merged: dict[str, list[str]] = {}
    for h in hostile:  # one table per section, so the TOML stays valid
        text = h.format(outside=outside)
        head = text.split("\n", 1)[0] if text.startswith("[") else ""
        body = text.split("\n", 1)[1] if head else text
        merged.setdefault(head, []).append(body)
    toml = "".join(merged.pop("", []))
    toml += "".join(f"{head}\n{''.join(b)}" for head, b in merged.items())
    (repo / ".dsh-recall.toml").write_text(toml)
    cfg = load_config()
    # History sessions and objects produced by random channels.
    sessions: dict[str, str | None] = {}
    for j in range(3):
        sid, producer = f"s{trial}-{j}", rnd.choice(KEYS)
        src = tmp / f"{sid}.jsonl"
        src.write_text(json.dumps({"session": sid, "seq": 0, "role": "user",
                                   "text": f"alpaca talk hm{trial}x{j}"}) + "\n")
        history.import_paths([str(src)], cfg=cfg, channel=producer)
        sessions[sid] = producer
    objects: dict[str, tuple[str | None, str]] = {}
    with ObjectService(cfg.objects) as svc:
        for j in range(3):
            producer, marker = rnd.choice(KEYS), f"om{trial}x{j}"
            body = "\n".join(f"line {n} alpaca {marker}" for n in range(400))
            put = svc.put(body, session=f"o{trial}-{j}", channel=producer)
            assert put.id
            objects[put.id] = (producer, marker)
    return {"notes": notes, "repo": repo, "outside": outside, "files": files, "levels": levels,
            "default": default, "owners": owners, "map_state": map_state, "sessions": sessions,
            "objects": objects}


class _Connection:
    pass


def check(world: dict, key: str | None, hop: bool) -> None:
    kind = oracle_channel(key, world["map_state"], world["owners"])
    repo, notes = world["repo"], world["notes"]
    app = RecallApp(repo, channel=key)
    # A client may also move into the repository (and try to leave it).
    conn = _Connection()  # stands for one MCP session; the client lives as long as it
    client = app.client_for(conn)
    try:
        if hop:
            client.call("configure", {"workspace": str(repo / "pkg")})
        with pytest.raises(InputError):
            client.call("configure", {"workspace": str(world["outside"])})
        # configure cannot name a channel; a history session only narrows.
        with pytest.raises(InputError):
            client.call("configure", {"channel": "owner-key"})
        client.call("configure", {"session": "owner-key"})
        # notes
        all_notes = {rel: note_public(notes, rel, world["levels"], world["default"])
                     for rel in (p.relative_to(notes).as_posix() for p in notes.rglob("*.md"))}
        marker_of = {m: rel for rel, m in world["files"].items()}
        for query in ["alpaca fact", *marker_of]:
            got, _ = client.call("notes_search", {"query": query, "limit": 30})
            for r in got["results"]:
                m = r["text"].split()[-1]
                rels = [rel for rel in all_notes if (notes / rel).read_text().endswith(m + "\n")]
                ok = kind in ("unfiltered", "owner") or (
                    kind in ("group", "guest") and any(all_notes[x] for x in rels if x == r["path"]))
                assert ok, (kind, key, r["path"], r["level"], world["map_state"])
        if kind in ("unfiltered", "owner"):
            for m in marker_of:
                got, _ = client.call("notes_search", {"query": m})
                assert any(m in r["text"] for r in got["results"]), (m, kind)
        # history
        got, _ = client.call("history_search", {"query": "alpaca talk", "scope": "all",
                                                "detail": True, "limit": 50})
        seen = {h["session"] for h in got["hits"]}
        want = {s for s, p in world["sessions"].items() if item_visible(kind, key, p)}
        assert seen == want, (kind, key, seen, want)
        for sid, producer in world["sessions"].items():
            if item_visible(kind, key, producer):
                client.call("history_detail", {"session": sid, "around": 0})
            else:
                with pytest.raises(InputError):
                    client.call("history_detail", {"session": sid, "around": 0})
        # objects
        for oid, (producer, marker) in world["objects"].items():
            if item_visible(kind, key, producer):
                got, _ = client.call("object_recall", {"id": oid, "query": marker})
                assert got["matches"]
            else:
                for args in ({"id": oid}, {"id": oid, "query": marker}):
                    with pytest.raises(InputError):
                        client.call("object_recall", args)
        # code: never outside the workspace, whatever the repository config says
        got, _ = client.call("code_search", {"query": "alpaca outmark OUT loot"})
        assert all("outmark" not in r["excerpt"] for r in got["results"])
        for bad in ({"path": str(world["outside"])}, {"focus": "../outside"}):
            with pytest.raises(InputError):
                client.call("code_search", {"query": "alpaca", **bad})
    finally:
        app.close()
    # The default client of the same server was not changed by the other client.
    assert app.default.session is None and app.default.workspace == repo.resolve()


@pytest.mark.parametrize("trial", range(14))
def test_no_answer_exceeds_the_callers_level(tmp_path: Path, trial: int) -> None:
    rnd = random.Random(7919 * trial + 13)
    world = build(tmp_path, rnd, trial)
    for key in rnd.sample(KEYS, 3):
        check(world, key, hop=rnd.random() < 0.5)

"""Test worlds shared by several test files: plain builders, no fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_recall.core.config import load_config
from dsh_recall.services import history
from dsh_recall.services.objects import ObjectService

OWNER, GUEST = "owner:1", "guest:1"


def owner_guest_world(tmp_path: Path, code: dict[str, str], notes: dict[str, str],
                      sessions: dict[str, list[str]], logs: tuple[str, str]) -> dict[str, Any]:
    """A repo with `code` ({path: text}), a notes folder with `notes` ({file: text}), the
    history `sessions` ({"s-owner": [event texts], "s-guest": [...]}, imported as generic
    JSONL in that workspace) and two offloaded bash logs (`logs`: the owner's, the
    guest's). The owner channel (owner:1) may see everything; the guest channel (guest:1)
    sees s-guest, public.md and its own log. Returns {repo, cfg, owner_obj, guest_obj}."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for path, text in code.items():
        (repo / path).write_text(text)
    memory = tmp_path / "memory"
    memory.mkdir()
    for name, text in notes.items():
        (memory / name).write_text(text)
    smap = tmp_path / "sessions.json"
    smap.write_text(json.dumps({GUEST: "u-guest", OWNER: "u-owner"}))
    cfg = load_config(workspace=repo, overrides={
        "embedder": {"name": "fake"},
        "notes": {"roots": [str(memory)], "session_map": str(smap), "owner_ids": ["u-owner"]}})
    for sid, texts in sessions.items():
        src = tmp_path / f"{sid}.jsonl"
        src.write_text("".join(json.dumps({"session": sid, "seq": seq, "role": "user",
                                           "text": text, "workspace": str(repo)}) + "\n"
                               for seq, text in enumerate(texts)))
        history.import_paths([str(src)], fmt="generic", cfg=cfg,
                             channel=GUEST if sid == "s-guest" else None)
    with ObjectService(cfg.objects) as objs:
        mine = objs.put(logs[0], session="o", tool="bash")
        theirs = objs.put(logs[1], session="g", tool="bash", channel=GUEST)
    return {"repo": repo, "cfg": cfg, "owner_obj": mine.id, "guest_obj": theirs.id}

"""Writable memory over MCP: notes_save, notes_supersede, notes_forget (services/notes/write.py).

Offered in the full profile only when the user made a notes folder writable
(`notes.write_roots` in their own config): a server without one lists none of them (no
schema cost per request), and a call to one says how the user enables writes. The caller
is the server's channel, as for every tool: the model cannot pick a level wider than that
channel, nor a folder the user did not list (the tools take no folder at all), nor
change or learn of an entry another channel saved (services/notes/authors.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.config import Config
from . import render as render_mod
from .tools import BOOL, STRS, I, S, ToolSpec, obj

if TYPE_CHECKING:
    from ...services.access.channel import Viewer
    from ...services.notes.write import NotesWriter

SERVICE = "dsh_recall.services.notes.write"
LEVEL = S("public | personal (default: the narrowest your channel and the folder allow).",
          enum=["public", "personal"])
ENTRY_ID = S("The entry's id (12 hex), or the path a notes_search hit showed for it.")

WRITE_RESULT = obj({
    "action": S("saved | merged (the same as an entry you saved: no copy) | superseded | "
                "forgotten"),
    "id": S("The entry's id: pass it to notes_supersede or notes_forget."),
    "level": S(), "path": S("The note's path, as notes_search shows it."),
    "source_path": S(), "file": S("created | updated | kept | deleted"),
    "supersedes": S(), "indexed": BOOL, "pending": I("Passages still waiting for vectors."),
    "notes": STRS,
}, required=["action", "id", "level", "path", "file", "indexed", "notes"])

NOTES_SAVE = ToolSpec(
    name="notes_save",
    title="Save a note",
    description=(
        "Remember a lasting fact, preference or decision in the user's notes (a dated markdown "
        "entry, searchable by notes_search in later sessions). Save when the user asks you to "
        "remember something or states a standing preference; not for the current task's "
        "progress. One fact per call, in a sentence or a short list. Text the same as an "
        "entry you saved is merged into it. To correct an entry, use notes_supersede."),
    input_schema=obj({"text": S("What to remember (markdown)."), "level": LEVEL},
                     required=["text"]),
    output_schema=WRITE_RESULT,
    read_only=False,
    service=SERVICE,
)

NOTES_SUPERSEDE = ToolSpec(
    name="notes_supersede",
    title="Correct a note",
    description=(
        "Replace a saved entry that is wrong or out of date: saves `text` as its successor; "
        "the old entry is kept, marked superseded, and always ranks below the new one."),
    input_schema=obj({"id": ENTRY_ID, "text": S("The corrected text."), "level": LEVEL},
                     required=["id", "text"]),
    output_schema=WRITE_RESULT,
    read_only=False,
    service=SERVICE,
)

NOTES_FORGET = ToolSpec(
    name="notes_forget",
    title="Forget a note",
    description=(
        "Forget a saved entry the user wants gone: removed from the notes index, and no "
        "search shows history or tool output quoting it. Its file is deleted (keep_file: "
        "kept, marked forgotten); the user may restore it. Only when the user asks."),
    input_schema=obj({"id": ENTRY_ID, "keep_file": BOOL}, required=["id"]),
    output_schema=WRITE_RESULT,
    read_only=False,
    service=SERVICE,
    annotations={"destructive": True},
)

TOOLS = [NOTES_SAVE, NOTES_SUPERSEDE, NOTES_FORGET]

# The compact profile's one write tool (beside `recall`), answered by the three above.
REMEMBER = ToolSpec(
    name="remember",
    title="Remember",
    description=(
        "Save a lasting fact, preference or decision to the user's notes (recall finds it "
        "later); the same text merges. id + text: correct that entry (the old one ranks "
        "below). id + forget=true: forget it. Only what the user wants kept."),
    input_schema=obj({"text": S(), "id": S("Entry id (from a save or a notes hit)."),
                      "forget": BOOL, "level": S(enum=["public", "personal"])}, required=[]),
    output_schema={},
    read_only=False,
    service=SERVICE,
)
NAMES = frozenset([*(t.name for t in TOOLS), REMEMBER.name])


def offered(cfg: Config, profile: str = "full") -> list[ToolSpec]:
    """The write tools of a profile, when the user made a notes folder writable; else none."""
    if not cfg.notes.write_roots:
        return []
    return list(TOOLS) if profile == "full" else [REMEMBER]


def call(client: Any, args: Any) -> tuple[dict[str, Any], str]:
    """Answer one `remember` call through the full profile's write tool it names."""
    from ...core.errors import InputError
    from .tools import validate_args

    a = validate_args(REMEMBER, args)
    text, eid, level = a.get("text"), a.get("id"), a.get("level")
    if a.get("forget"):
        if not eid or text:
            raise InputError("forget=true takes id alone: the entry to forget")
        tool, sent = NOTES_FORGET, {"id": eid}
    elif not text:
        raise InputError("remember needs text (to save), id + text (to correct an entry) or "
                         "id + forget=true")
    else:
        tool = NOTES_SUPERSEDE if eid else NOTES_SAVE
        sent = {"text": text, **({"id": eid} if eid else {}), **({"level": level} if level else {})}
    return client.run(client.app.available[tool.name], sent)


def not_offered(name: str) -> str | None:
    """The error for a call to a write tool this server does not offer, else None."""
    if name not in NAMES:
        return None
    from ...services.notes.write import ENABLE

    return f"{name} is not offered: {ENABLE}, then restart the MCP server"


def render(d: dict[str, Any]) -> str:
    lines = [f"{d['action']} {d['id']} ({d['level']}): {d['path']}"]
    if d.get("supersedes"):
        lines.append(f"supersedes {d['supersedes']}")
    if not d.get("indexed"):
        lines.append("not indexed yet")
    lines += [f"-- note: {n}" for n in d.get("notes") or []]
    return "\n".join(lines)


# The answers' text: one renderer for the three tools (render.py's table, one place).
render_mod.RENDERERS.update({t.name: render for t in TOOLS})


class MemoryHandlers:
    """The three write tools (a mixin of handlers.Client, which provides what is declared
    here)."""

    cfg: Config
    workspace: Path

    def viewer(self) -> Viewer:
        raise NotImplementedError  # Client's

    def current_session(self) -> str | None:
        raise NotImplementedError  # SourceHandlers'

    def _writer(self) -> NotesWriter:
        from ...services.notes.write import NotesWriter

        return NotesWriter(self.cfg, self.viewer(), workspace=self.workspace)

    def tool_notes_save(self, a: dict[str, Any]) -> dict[str, Any]:
        with self._writer() as w:
            return w.save(str(a.get("text") or ""), level=a.get("level"),
                          source=self.current_session())

    def tool_notes_supersede(self, a: dict[str, Any]) -> dict[str, Any]:
        with self._writer() as w:
            return w.supersede(str(a["id"]), str(a.get("text") or ""), level=a.get("level"),
                               source=self.current_session())

    def tool_notes_forget(self, a: dict[str, Any]) -> dict[str, Any]:
        with self._writer() as w:
            return w.forget(str(a["id"]), keep_file=bool(a.get("keep_file")))

"""The `code_why` MCP tool (full profile): which commit last changed a line, and the agent
session that produced it. Its spec, its handler (a mixin of handlers.Client) and its text
rendering live here; handlers.py offers `TOOLS` and mixes `LineageHandlers` in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import InputError
from . import render as render_mod
from .tools import BOOL, PAGE_OUT, PAGE_REQ, STRS, I, S, ToolSpec, arr, obj

if TYPE_CHECKING:
    from ...core.config import Config
    from ...services.access.channel import Viewer
    from .app_view import AppView

COMMIT = obj({
    "hash": S(), "short": S(), "author": S(), "author_mail": S(),
    "date": S("Author date, UTC."), "committed": S("Commit date, UTC."),
    "summary": S("The message's first line."), "message": S("The message (bounded)."),
    "files": I("Files the commit touched."),
    "orig_path": S("The file's path in that commit (differs after a rename)."),
    "orig_line": I("The line's number in that commit."),
    "boundary": BOOL,
}, required=["hash", "short", "summary"])
HUNK = obj({
    "path": S(), "old_path": S(), "old_start": I(), "old_lines": I(), "new_start": I(),
    "new_lines": I(), "excerpt_start": I(), "excerpt": S("Added lines around the line."),
}, required=["path", "new_start", "new_lines"])
TURN = obj({"seq": I(), "role": S(), "time": S(),
            "shows": S("request | line (the edit holding the line) | edit | commit"),
            "text": S("The turn's text, bounded.")}, required=["seq", "role", "text"])
SESSION = obj({
    "session": S(), "title": S(), "source": S(), "workspace": S(),
    "match": {**STRS, "description": "commit: the session names the commit's hash; line: it "
              "edited the file with this line; edit: it edited the file near the commit's time"},
    "turns": arr(TURN),
}, required=["session", "match", "turns"])

CODE_WHY = ToolSpec(
    name="code_why",
    title="Why is this line here",
    description=(
        "Which commit last changed a line of a file in the workspace's git repository: the "
        "commit's hash, author, date and message, the hunk that brought the line in, and, "
        "when an imported agent session made that change (it edited the file near the "
        "commit's time, or ran the commit), that session's relevant turns (the request, "
        "the edit). Offline, from the local repository. A line changed since the last "
        "commit answers `uncommitted`. Use it to learn why code is the way it is before "
        "changing it; history_detail gives more of a session."),
    input_schema=obj({
        "path": S("File path relative to the workspace (or absolute inside it); 'path:line' "
                  "works too."),
        "line": I("1-based line number.", minimum=1),
        "sessions": {"type": "boolean",
                     "description": "Look for the agent session behind it (default true)."},
    }, required=["path"]),
    output_schema=obj({
        "path": S("Path inside the repository."), "line": I(), "repo": S(),
        "text": S("The line's text."),
        "status": S("committed | uncommitted", enum=["committed", "uncommitted"]),
        "head_line": I("The line's number at HEAD, when the working copy moved it."),
        "commit": COMMIT, "hunk": HUNK, "sessions": arr(SESSION), "notes": STRS,
        "truncated": PAGE_OUT["truncated"],
    }, required=["path", "line", "status", "notes", *PAGE_REQ]),
    service="dsh_recall.services.lineage",
)
TOOLS: list[ToolSpec] = [CODE_WHY]


def render_why(d: dict[str, Any]) -> str:
    from ..cli.lineage import human_why

    return human_why(d) + ("\n[cut to fit the token budget]" if d.get("truncated") else "")


render_mod.RENDERERS.setdefault(CODE_WHY.name, render_why)


class LineageHandlers:
    """What Client (handlers.py) provides, declared for the handler below."""

    app: AppView
    cfg: Config
    workspace: Path

    def viewer(self) -> Viewer:
        raise NotImplementedError  # Client's

    def tool_code_why(self, a: dict[str, Any]) -> dict[str, Any]:
        from ...services.lineage import LineageService, parse_target

        path = str(a.get("path") or "").strip()
        if not path:
            raise InputError("path is empty; give a file of the workspace and a line")
        line = a.get("line")
        if line is None:
            path, line = parse_target(path)
        # The path must lie inside the workspace or a root the user allowed (its real path:
        # a symlink out of them is refused too).
        with LineageService(self.cfg, self.workspace) as svc:
            return svc.why(path, int(line), cwd=self.workspace, roots=self.app.allowed_roots,
                           viewer=self.viewer(), sessions=a.get("sessions") is not False)

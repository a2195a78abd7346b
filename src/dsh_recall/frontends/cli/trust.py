"""`dsh-recall trust [FILE]`: let a repository's `.dsh-recall.toml` set every key.

Like `direnv allow`: the trust is recorded with the file's hash in the recall home, so an
edited file is untrusted again. Without trust, a repository config only tunes ranking and
walking inside its workspace (docs/security.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ...core import trust as trust_mod
from .common import emit, handle_errors, json_option


@click.command("trust")
@click.argument("file", required=False, type=click.Path(dir_okay=True))
@click.option("--revoke", is_flag=True, help="Forget the trust given to FILE.")
@click.option("--list", "list_", is_flag=True, help="List trusted files and whether they changed.")
@json_option
@handle_errors
def trust(file: str | None, revoke: bool, list_: bool, as_json: bool) -> None:
    """Trust a workspace's .dsh-recall.toml as it is now (default: the one in the cwd)."""
    if list_:
        data = {"trusted": [{"path": p, "unchanged": ok}
                            for p, ok in sorted(trust_mod.trusted_files().items())]}
        emit(data, as_json, lambda d: "\n".join(
            f"{t['path']}{'' if t['unchanged'] else '  (changed since trusted: not trusted)'}"
            for t in d["trusted"]) or "no trusted files")
        return
    path = Path(file or os.getcwd())
    if path.is_dir():
        path = path / ".dsh-recall.toml"
    path = path.resolve()
    if revoke:
        gone = trust_mod.revoke(path)
        emit({"path": str(path), "revoked": gone}, as_json,
             lambda d: f"{'no longer trusted' if d['revoked'] else 'was not trusted'}: {d['path']}")
        return
    sha = trust_mod.trust(path)
    emit({"path": str(path), "sha256": sha}, as_json,
         lambda d: f"trusted {d['path']} (sha256 {d['sha256'][:12]}); an edit untrusts it again")

"""`dsh-recall search QUERY --sources code,history,notes,objects`: one ranked answer over
several sources, each hit labelled with its source (services/federated.py)."""

from __future__ import annotations

from pathlib import Path

import click

from .common import emit, get_config


def search_all(ctx: click.Context, query: str, sources: str, workspace: Path,
               limit: int | None, as_json: bool) -> None:
    """Run the all-sources search as the user (or as $DSH_RECALL_CHANNEL when set, like
    `history search`) and print it."""
    from ...services import federated
    from ...services.access.channel import Viewer, channel_key_from_env

    cfg = get_config(ctx, workspace)
    key = channel_key_from_env()
    data = federated.search_all(query, cfg=cfg, workspace=workspace,
                                sources=federated.parse_sources(sources), limit=limit or 10,
                                viewer=Viewer(cfg, key) if key else None)
    emit(data, as_json, federated.render_text)

"""Who is asking: the access channel of a caller, shared by notes, history and objects.

The channel key (a session key the session map knows, e.g. `telegram:123` or `group:team`)
comes from how a front end was started: a CLI flag, `$DSH_RECALL_CHANNEL`, a harness hook's
environment. Never from a tool call: a model or an MCP client cannot choose it.

Notes filter by each note's level (policy/access.py). History sessions and offloaded objects
carry the channel key that produced them; a channel sees them by `may_see_item`:
unfiltered (no session map: one user) and owner channels see everything, a group or guest
channel only what that same channel produced, an unknown channel nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...core.config import Config
from ...policy import access

CHANNEL_ENV = "DSH_RECALL_CHANNEL"


def channel_key_from_env() -> str | None:
    return os.environ.get(CHANNEL_ENV) or None


def resolve(cfg: Config, key: str | None) -> access.Channel:
    """What `key` may see, per the user's session map and owner ids (fails closed)."""
    ncfg = cfg.notes
    path = ncfg.session_map
    if not path:
        return access.channel(key, None, ncfg.owner_ids, map_configured=False)
    try:
        smap = access.parse_session_map(Path(os.path.expanduser(path)).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, access.SessionMapError) as e:
        return access.channel(key, None, ncfg.owner_ids, map_error=str(e), map_configured=True)
    return access.channel(key, smap, ncfg.owner_ids, map_configured=True)


def may_see_item(ch: access.Channel, viewer_key: str | None, producer_key: str | None) -> bool:
    """Whether a channel may see a history session or an object another channel produced.

    Items carry no level of their own (a conversation may quote any note), so only channels
    that may see every level see items of other channels. Unrecorded producers count as the
    owner's.
    """
    if ch.allowed is None:
        return True
    if not ch.allowed:
        return False
    if ch.allowed >= access.ALL:
        return True
    return bool(producer_key) and bool(viewer_key) and producer_key == viewer_key


class Viewer:
    """A resolved caller: its key and channel, with the item predicate bound.

    A source given no viewer keeps its own default; `Viewer.user()` says explicitly "the
    user at their own machine, unfiltered" (the CLI without a channel, the loopback
    dashboard, an evaluation), whatever a session map would say of a missing key."""

    def __init__(self, cfg: Config, key: str | None):
        self.key = key
        self.channel = resolve(cfg, key)

    @classmethod
    def user(cls) -> Viewer:
        """The user, unfiltered: sees every level and every channel's items."""
        v = cls.__new__(cls)
        v.key = None
        v.channel = access.Channel("unfiltered", None, "the user, no channel")
        return v

    @property
    def unfiltered(self) -> bool:
        return self.channel.allowed is None

    @property
    def sees_everything(self) -> bool:
        """Unfiltered or an owner: may see every level and every channel's items, and so
        store-wide counts and where the stores live."""
        allowed = self.channel.allowed
        return allowed is None or allowed >= access.ALL

    def can_see(self, producer_key: str | None) -> bool:
        return may_see_item(self.channel, self.key, producer_key)

    def describe(self) -> dict[str, str]:
        return {"channel": self.channel.kind, "reason": self.channel.reason}

"""Writable memory: save, supersede and forget entries in the roots the user made writable.

Who may write where (docs/notes.md, docs/security.md):
- only into a folder of `notes.write_roots` (the user's own config: never a repository's
  file), inside one of the notes roots; with none configured every write is refused,
  saying how to enable it;
- at most at the caller's channel's level: a channel that is the user at their own machine
  (the CLI) may pick any level; the model behind an owner or unfiltered channel (a
  private conversation) saves personal entries only, one behind a group or guest channel
  (its conversation is public) public or personal; a channel that cannot be determined
  writes nothing. Without a level, the narrower of that and the root's default;
- a written entry's level comes from its file name as every note's does (entries.py), and
  a name the user's `notes.levels` would read otherwise is refused, never written;
- a caller merges into, supersedes and forgets only the entries its own channel wrote (the
  owner: any), never through a symbolic link, and a guest or group channel keeps at most
  `authors.QUOTA` entry files (authors.py).

Every body is cleaned (valid Unicode, no NUL, LF line ends), bounded (`max_write_chars`)
and scrubbed of credentials (`[scrub]`, as history import and object put are) before
anything reaches disk or an index. Files are written to a hidden temporary name beside
their place and renamed over it; writers of one index hold one lock across the duplicate
check, the write and the re-index, so two saves of the same text make one entry.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec

from ...core.clean import clean_text
from ...core.config import Config
from ...core.errors import InputError, RecallError
from ...core.paths import write_atomic
from ...policy import access
from ...policy.scrub import scrub_text
from ...readers.notes import resolve_roots, root_labels
from ...readers.workspace import read_regular
from ..access import forgotten
from ..base import Viewer
from ..vectors import file_lock
from . import authors, entries
from .entries import Entry
from .service import NotesService

ENABLE = ("writes to notes are off: name a folder inside your notes roots in your own config, "
          "e.g. `[notes] write_roots = {\"~/memory/saved\" = \"personal\"}` in "
          "<recall home>/config.toml (a repository's config cannot)")
LOCK_S = 10.0  # how long a write waits for another writer or the indexer
MAX_SCANNED = 20_000  # entry files a duplicate check reads at most


def narrower(a: str, b: str) -> str:
    return access.PERSONAL if access.PERSONAL in (a, b) else access.PUBLIC


def channel_cap(ch: access.Channel, user: bool) -> str | None:
    """The widest level a caller may save at, or None when it may not write at all."""
    if ch.allowed is not None and not ch.allowed:
        return None
    if user:
        return access.PUBLIC
    return access.PUBLIC if ch.kind in ("group", "guest") else access.PERSONAL


def _now() -> tuple[str, str]:
    t = time.gmtime()
    return time.strftime("%Y-%m-%d", t), time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


def clean_body(text: str, cfg: Config) -> str:
    """The body as it may be written: valid Unicode, no NUL, LF line ends, trailing blanks
    gone, within `max_write_chars`, credentials replaced (`[secret:KIND]`)."""
    body = clean_text(text).replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    body = "\n".join(line.rstrip() for line in body.strip("\n").split("\n")).strip()
    if not body:
        raise InputError("the note is empty; say what to remember")
    limit = cfg.notes.max_write_chars
    if len(body) > limit:
        raise InputError(f"the note is {len(body):,} characters, over notes.max_write_chars "
                         f"({limit:,}): save the fact, not the document")
    return scrub_text(body, cfg.scrub)


def parse_id(value: str) -> str:
    """An entry id: 12 hex characters, or a note path that names one."""
    value = str(value).strip()
    if re.fullmatch(r"[0-9a-f]{12}", value):
        return value
    eid = entries.entry_id(value)
    if eid is None:
        raise InputError(f"{value[:80]!r} is no entry id: pass the 12 hex characters of a saved "
                         "entry's id, or the path a notes search showed for it")
    return eid


@dataclass(frozen=True)
class Target:
    folder: Path  # where entries go
    default_level: str
    root: Path  # the notes root holding it
    label: str | None  # its label in display paths (several roots), else None


@dataclass
class Found:
    target: Target
    path: Path
    entry: Entry


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)  # the user's notes folder: its modes stay
    write_atomic(path, text.encode("utf-8"), durable=True)


class NotesWriter:
    """Writes for one caller (`viewer`; `user`: the person at their own machine, the CLI)
    into the write roots of the notes index `svc` covers."""

    def __init__(self, cfg: Config, viewer: Viewer, *, user: bool = False,
                 workspace: Path | None = None, roots: list[str] | None = None,
                 home: Path | None = None) -> None:
        self.cfg = cfg
        self.viewer = viewer
        self.user = user
        self.author = authors.of_viewer(viewer, user)
        self.svc = NotesService(cfg, roots=roots, workspace=workspace, home=home)
        self.targets = self._targets(workspace)

    def close(self) -> None:
        self.svc.close()

    def __enter__(self) -> NotesWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- where -------------------------------------------------------------------------------
    def _targets(self, workspace: Path | None) -> list[Target]:
        roots = self.svc.roots
        labels = root_labels(roots)
        out: list[Target] = []
        for raw, level in self.cfg.notes.write_roots.items():
            folder = resolve_roots([raw], workspace)[0]
            holder = next((r for r in roots if r.is_dir() and folder.is_relative_to(r)), None)
            if holder is None:
                raise InputError(f"notes.write_roots names {folder}, which is not inside the notes "
                                 f"roots ({', '.join(map(str, roots)) or 'none'}): add it to "
                                 "notes.roots or name a folder inside one")
            rel = folder.relative_to(holder).parts
            if any(p.startswith(".") for p in rel):
                raise InputError(f"notes.write_roots names {folder}, a hidden folder notes "
                                 "indexing skips; name a visible one")
            label = labels[roots.index(holder)] if len(roots) > 1 else None
            out.append(Target(folder, level, holder, label))
        return out

    def _target(self, root: str | None) -> Target:
        if not self.targets:
            raise InputError(ENABLE)
        if root is None:
            return self.targets[0]
        want = resolve_roots([root])[0]
        for t in self.targets:
            if t.folder == want:
                return t
        raise InputError(f"{want} is not a write root; write roots: "
                         + ", ".join(str(t.folder) for t in self.targets))

    def display(self, t: Target, path: Path) -> str:
        rel = path.relative_to(t.root).as_posix()
        return f"{t.label}/{rel}" if t.label else rel

    def _level(self, t: Target, level: str | None) -> str:
        cap = channel_cap(self.viewer.channel, self.user)
        if cap is None:
            raise InputError(f"this channel may not write notes: {self.viewer.channel.reason}")
        if level is None:
            return narrower(cap, t.default_level) if not self.user else t.default_level
        if level not in (access.PUBLIC, access.PERSONAL):
            raise InputError(f"level must be public or personal, not {level!r}")
        if narrower(level, cap) != level:
            raise InputError(f"a {self.viewer.channel.kind} channel may save {cap} notes only; "
                             f"{level} would show this conversation's words to more people "
                             "than it had")
        return level

    def _check_name(self, t: Target, path: Path, level: str) -> None:
        shown = self.display(t, path)
        ncfg = self.cfg.notes
        if access.level_matcher(ncfg.levels, ncfg.default_level)(shown) != level:
            raise InputError(f"{shown} would not be {level} under notes.levels and "
                             f"notes.default_level; refusing to write it (change those "
                             "settings so that file names like it are)")
        if pathspec.GitIgnoreSpec.from_lines(list(ncfg.exclude)).match_file(
                path.relative_to(t.root).as_posix()):
            raise InputError(f"{shown} is excluded by notes.exclude; choose another write root")

    # -- reading entries ---------------------------------------------------------------------
    def _files(self, t: Target) -> Iterator[Path]:
        """The entry files of a write root, none through a symbolic link."""
        try:
            names = sorted(os.listdir(t.folder))
        except OSError:
            return
        for n, name in enumerate(names):
            if n >= MAX_SCANNED:
                return
            p = t.folder / name
            if name.endswith(".md") and entries.is_entry(name):
                yield p
            elif entries.is_entry(f"{name}/public.md") and not p.is_symlink():
                yield p / "public.md"

    @staticmethod
    def _unlinked(t: Target, path: Path) -> bool:
        """No part of `path` below its write root is a symbolic link (a link to a folder
        elsewhere would carry a write, a rewrite or a delete out of the write root)."""
        try:
            rel = path.relative_to(t.folder)
        except ValueError:
            return False
        p = t.folder
        for part in rel.parts:
            p = p / part
            if p.is_symlink():
                return False
        return True

    def _read(self, path: Path) -> Entry | None:
        """The entry in a file, whole; None for a file that is not one (a symlink, no front
        matter with an id) or is larger than a note may be (rewriting a cut copy of it
        would lose what was cut)."""
        bound = self.cfg.notes.max_note_bytes
        try:
            data = read_regular(str(path), bound + 1)
        except OSError:
            return None
        return None if len(data) > bound else entries.parse(clean_text(data))

    def _by(self) -> str:
        """Who saved an entry, as a hash of the channel key (never the key itself)."""
        return authors.key_hash(self.viewer.key)

    def find(self, value: str) -> Found:
        """The entry with this id (or path) that this caller may change, else an InputError
        that reads the same whether it exists or is hidden. A channel other than the owner's
        (group, guest) may change only the entries it saved itself (authors.may_change),
        those at any level."""
        eid = parse_id(value)
        for t in self.targets:
            for p in [*t.folder.glob(f"*{eid}.md"), *t.folder.glob(f"*{eid}/public.md")]:
                e = self._read(p) if self._unlinked(t, p) else None
                if (e is None or e.id != eid or e.meta.get("forgotten")
                        or not authors.may_change(e.meta, self.author)):
                    continue
                shown = self.display(t, p)
                level = self.svc.levels_of([shown]).get(shown, access.PERSONAL)
                if self.svc.store.file(shown) is None:  # not indexed yet: by its name
                    level = self.svc.level(shown)
                # A guest's own entry, at any level: it wrote the text (a channel that now
                # may see nothing, a broken session map say, changes nothing).
                mine = not self.author.owner and bool(self.viewer.channel.allowed)
                if mine or access.may_see(level, self.viewer.channel.allowed):
                    return Found(t, p, e)
        raise InputError(f"no saved entry {eid} in the write roots (or not one this channel "
                         "may change)")

    # -- the index ---------------------------------------------------------------------------
    def _reindex(self, out: dict[str, Any], forgot: set[str] | None = None) -> dict[str, Any]:
        """Bring the notes index up to date with what was written: the file's passages in
        (or out), their vectors as far as the embed budget goes. `forgot`: the embed hashes
        of a forgotten entry's passages, whose text and vectors are then overwritten in the
        index's files and dropped from the embedding cache and the vector file."""
        svc = self.svc
        with svc._lock(LOCK_S) as got:
            if not got:
                out["indexed"] = False
                out["notes"].append("another process holds the notes index; the next search "
                                    "or `dsh-recall notes index` brings the change in")
                return out
            with svc.store.scrubbing() if forgot is not None else nullcontext():
                rep = svc.index_lexical()
                svc.store.prune_vectors()
            if forgot:
                out["notes"].extend(svc.forget_vectors(sorted(forgot)))
            try:
                svc.embed_pending(self.cfg.embed_budget_s)
            except RecallError as e:
                out["notes"].append(f"vectors wait: {e}")
        out["indexed"] = True
        out["pending"] = svc.store.pending_count()
        out["notes"].extend(n for n in rep.get("notes", []) if "chunk spec" in n)
        return out

    def _lock(self) -> Any:
        return file_lock(self.svc.dir / f"{self.svc.key}.write.lock", LOCK_S)

    def _answer(self, action: str, t: Target, path: Path, e: Entry, file: str) -> dict[str, Any]:
        out: dict[str, Any] = {"action": action, "id": e.id, "level": e.meta.get("level", ""),
                               "path": self.display(t, path), "source_path": str(path),
                               "file": file, "notes": []}
        for k in ("supersedes", "created", "updated"):
            if e.meta.get(k):
                out[k] = e.meta[k]
        return out

    # -- the three writes --------------------------------------------------------------------
    def save(self, text: str, *, level: str | None = None, source: str | None = None,
             root: str | None = None) -> dict[str, Any]:
        """Save `text` as an entry; one the same or near-same (entries.same) at the same
        level in that root, saved by the same channel, is merged into instead of a second
        copy."""
        t = self._target(root)
        lv = self._level(t, level)
        body = clean_body(text, self.cfg)
        with self._lock() as got:
            if not got:
                raise RecallError("another writer holds these notes; try again")
            out = self._merge(t, lv, body)
            if out is None:
                self._check_quota()
                out = self._create(t, lv, body, source, None)
            return self._reindex(out)

    def _merge(self, t: Target, lv: str, body: str) -> dict[str, Any] | None:
        """Merge `body` into the live entry of level `lv` in `t` it is the same as, if any,
        among those this caller's channel saved: another's is neither changed nor named
        (the caller holds the write lock)."""
        for p in self._files(t):
            old = self._read(p)
            if (old is None or old.meta.get("level") != lv or old.meta.get("forgotten")
                    or old.meta.get("superseded_by")
                    or not authors.may_merge(old.meta, self.author)
                    or not entries.same(old.body, body)):
                continue
            if not self.author.owner:
                old.meta.pop("shared", None)  # the owner promoted the text before this one
            merged = entries.merged_body(old.body, body)
            old.meta["updated"] = _now()[1]
            old.meta["merged"] = str(int(old.meta.get("merged", "0") or 0) + 1)
            old.body = merged if len(merged) <= self.cfg.notes.max_write_chars else old.body
            _atomic_write(p, old.render())
            out = self._answer("merged", t, p, old, "updated")
            out["notes"].append(f"the same as entry {old.id}: merged into it, no copy made")
            return out
        return None

    def _check_quota(self) -> None:
        """A guest or group channel keeps at most authors.QUOTA entry files in the write
        roots, forgotten ones kept on disk included (the caller holds the write lock)."""
        if self.author.owner:
            return
        n = sum(1 for t in self.targets for p in self._files(t)
                if authors.same(authors.of_entry(entries.read_front(str(p))), self.author))
        if n >= authors.QUOTA:
            raise InputError(f"this channel keeps {n} saved entries, the most a "
                             f"{self.author.kind} channel may ({authors.QUOTA}): forget one "
                             "it no longer needs (notes_forget with its id, without "
                             "keep_file: its file is deleted), then save again")

    def _create(self, t: Target, lv: str, body: str, source: str | None,
                supersedes: str | None) -> dict[str, Any]:
        """Write a new entry (the caller holds the write lock)."""
        day, stamp = _now()
        eid = secrets.token_hex(entries.ID_CHARS // 2)
        path = t.folder / entries.file_name(day, body, eid, lv)
        self._check_name(t, path, lv)
        if not self._unlinked(t, path):
            raise InputError(f"{self.display(t, path)} is behind a symbolic link; refusing to "
                             "write through it")
        e = Entry({"id": eid, "level": lv, "created": stamp, "updated": stamp,
                   "source": source or "", "channel": self.viewer.channel.kind,
                   "by": self._by(), "supersedes": supersedes or ""}, body)
        _atomic_write(path, e.render())
        return self._answer("saved", t, path, e, "created")

    def supersede(self, old_id: str, text: str, *, level: str | None = None,
                  source: str | None = None) -> dict[str, Any]:
        """Save `text` as the successor of entry `old_id`, which is kept, marked
        `superseded_by`, and ranked below its successor from then on."""
        found = self.find(old_id)
        t = found.target
        lv = self._level(t, level)
        body = clean_body(text, self.cfg)
        with self._lock() as got:
            if not got:
                raise RecallError("another writer holds these notes; try again")
            old = self._read(found.path)  # again, under the lock: one successor only
            if (old is None or old.id != found.entry.id or old.meta.get("forgotten")
                    or not self._unlinked(t, found.path)):
                raise InputError(f"entry {found.entry.id} changed or went away meanwhile; "
                                 "search again")
            if old.meta.get("superseded_by"):
                raise InputError(f"entry {old.id} is superseded already, by "
                                 f"{old.meta['superseded_by']}: supersede that one")
            self._check_quota()
            out = self._create(t, lv, body, source, old.id)
            old.meta["superseded_by"] = out["id"]
            old.meta["superseded"] = _now()[1]
            _atomic_write(found.path, old.render())
            out["action"] = "superseded"
            out["notes"].append(f"entry {old.id} is kept, marked superseded_by {out['id']}")
            return self._reindex(out)

    def forget(self, value: str, *, keep_file: bool = False) -> dict[str, Any]:
        """Take an entry out of every index: its passages and vectors from the notes index,
        and from history and object searches every hit quoting it (services/access/forgotten.py).
        The file is deleted, or kept marked `forgotten` (never indexed again)."""
        found = self.find(value)
        t, e = found.target, found.entry
        with self._lock() as got:
            if not got:
                raise RecallError("another writer holds these notes; try again")
            now = self._read(found.path)  # again, under the lock
            if (now is None or now.id != e.id or now.meta.get("forgotten")
                    or not self._unlinked(t, found.path)):
                raise InputError(f"entry {e.id} was forgotten or changed meanwhile")
            e = now
            hashes = self.svc.passage_hashes(found.path)
            forgotten.record(e.id, e.body, self.svc.home)
            if keep_file:
                e.meta["forgotten"] = _now()[1]
                _atomic_write(found.path, e.render())
                file = "kept"
            else:
                found.path.unlink(missing_ok=True)
                if found.path.name == "public.md":
                    try:
                        found.path.parent.rmdir()
                    except OSError:
                        pass  # something else is in the entry's folder: left as it is
                file = "deleted"
        out = self._answer("forgotten", t, found.path, e, file)
        what = "deleted" if file == "deleted" else "kept, marked forgotten,"
        out["notes"].append(f"{found.path} was {what}: that file change is yours to keep or "
                            "revert (your editor, backup or git); history and objects "
                            "searches no longer show text quoting it")
        return self._reindex(out, forgot=hashes)

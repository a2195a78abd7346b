"""`dsh-recall integrate`: wire the recall server and hooks into agent harnesses.

- `integrate claude-code install|remove [--project DIR]`: the MCP entry in `.mcp.json` and
  the hooks (UserPromptSubmit auto-recall, SessionStart anchor after a compaction,
  PostToolUse offload) in `.claude/settings.json`. Remove takes out exactly what install
  wrote and leaves everything else as it was.
- `integrate dsh patch [--write FILE | --profile NAME]`: the cordis patch mounting the server
  and the native plugin (reaper, auto-recall, anchors: frontends/dsh) in dsh. `--profile web`
  writes it into that profile's own patch with a `file://` name: the only place where the
  web UI's settings card can save (dsh refuses writes to an entry from the home patch).
  Written between marker lines; running it again replaces our entries and `integrate dsh
  remove` takes them out (with the rows dsh's settings editor appended for them), keeping
  every row dsh wrote for itself, inside the markers or not (dsh_patch_file.py).
- `integrate codex`: the `config.toml` entry for the OpenAI Codex CLI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from ...core.errors import InputError
from .common import handle_errors
from .dsh_patch_file import SERVER_NAME, mounted_by_hand, replace_private, strip_ours, with_block

HOOK_PREFIX = "dsh-recall hook claude-code "
# (event, matcher, subcommand): what `install` adds to .claude/settings.json.
CLAUDE_HOOKS = [
    ("UserPromptSubmit", None, "user-prompt-submit"),
    ("SessionStart", "compact", "session-start"),
    ("PostToolUse", "*", "post-tool-use"),
]


def _q(value: str) -> str:
    """A YAML scalar: JSON string syntax is valid YAML and needs no escaping rules of its own."""
    return json.dumps(value, ensure_ascii=False)


def default_command() -> str:
    """`dsh-recall` when the harness will find this same program on PATH; otherwise the full
    path of the running one (a virtualenv that is not on PATH still works)."""
    running = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    found = shutil.which("dsh-recall")
    if found and (running is None or Path(found).resolve() == running or not running.exists()):
        return "dsh-recall"
    if running is not None and running.exists() and running.name == "dsh-recall":
        return str(running)
    return "dsh-recall"


def dsh_patch(command: str = "dsh-recall", workspace: Path | None = None,
              env: dict[str, str] | None = None, server_name: str = SERVER_NAME,
              native: bool = True, plugin: Path | None = None, tools: str = "compact",
              file_url: bool = False) -> str:
    """The cordis patch (YAML) that mounts `dsh-recall mcp` in dsh as `server_name` and,
    with `native`, the plugin that runs `dsh-recall worker` (frontends/dsh/plugin.mjs).

    dsh drops every DSH_* variable from an MCP child's environment, so settings such as
    DSH_RECALL_HOME must be passed in `env` here; both entries get the same `env`, so the
    server and the worker share one recall home.

    `tools` is the server's tool profile: dsh sends every tool schema and the server's
    instructions with every model request, so the default is the compact one
    (`mcp__<server_name>__recall`, docs/mcp.md).

    `file_url`: name the plugin `file:///abs/plugin.mjs`, the form dsh normalises a path to;
    its config editor only saves to an entry named so, in the profile's own patch.
    """
    args = ["mcp", "--tools", tools] + (["--workspace", str(workspace)] if workspace else [])
    what = "one recall tool" if tools == "compact" else "recall tools"
    lines = [
        f"# dsh-recall: {what} (code, history, objects, notes) as mcp__{server_name}__*",
        "- insert:",
        f"    - id: mcp-{server_name}",
        "      name: '@deepseek-ai/dsh-mcp-client'",
        "      config:",
        f"        serverName: {server_name}",
        "        transport: stdio",
        f"        command: {_q(command)}",
        "        args: [" + ", ".join(_q(a) for a in args) + "]",
    ]
    lines += _env_lines(env)
    if native:
        from ..dsh import PLUGIN_ID, PLUGIN_PATH
        lines += [
            f"    - id: {PLUGIN_ID}",
            f"      name: {_q((plugin or PLUGIN_PATH).resolve().as_uri() if file_url else str(plugin or PLUGIN_PATH))}",
            "      config:",
            f"        command: {_q(command)}",
            "        args: [\"worker\"]",
            f"        serverName: {server_name}",
        ] + _env_lines(env)
    return "\n".join(lines) + "\n"


def _env_lines(env: dict[str, str] | None) -> list[str]:
    if not env:
        return ["        env: {}"]
    return ["        env:"] + [f"          {k if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', k) else _q(k)}: {_q(v)}"
                                  for k, v in sorted(env.items())]


def home_to_carry() -> str | None:
    """This shell's recall home when a program started without its DSH_* variables would
    use another (the default, ~/.dsh/dsh-recall): dsh drops every DSH_* variable from what
    it starts and Codex passes a short list of variables, so the mount must carry it."""
    from ...core.paths import recall_home

    home = recall_home().expanduser().resolve()
    return None if home == (Path.home() / ".dsh" / "dsh-recall").resolve() else str(home)


# DSH_RECALL_* variables that are no setting to carry into a mount (home is carried itself).
_NOT_CARRIED = {"DSH_RECALL_HOME", "DSH_RECALL_DEBUG", "DSH_RECALL_SESSION", "DSH_RECALL_USAGE"}


def profile_of(path: Path) -> str | None:
    """The dsh profile whose own patch `path` is ($DSH_HOME/profiles/NAME/cordis.patch.yml),
    else None."""
    p = path.expanduser().absolute()
    if p.name == "cordis.patch.yml" and p.parent.parent.name == "profiles" and p.parent.name:
        return p.parent.name
    return None


def dsh_home(explicit: str | None = None) -> Path:
    """$DSH_HOME (or `explicit`), else ~/.dsh: where dsh keeps its profiles."""
    return Path(explicit or os.environ.get("DSH_HOME") or Path.home() / ".dsh").expanduser()


def profile_patch(home: Path, profile: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", profile):
        raise InputError(f"--profile expects a dsh profile name such as web or sdk, got {profile!r}")
    return home / "profiles" / profile / "cordis.patch.yml"


def write_dsh_patch(path: Path, text: str) -> bool:
    """Put our block in `path` (in place of what of ours it held: dsh_patch_file.py);
    returns whether the file changed. A mount of dsh-recall written by hand (no markers)
    is left alone: an error says so."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if mounted_by_hand(old):
        raise InputError(f"{path} already mounts dsh-recall without our markers; edit it by hand "
                         "or remove that mount first")
    new = with_block(old, text)
    if new == old:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_private(path, new)
    return True


def remove_dsh_patch(path: Path) -> bool:
    """Take our entries, the editor's rows for them and our markers out of `path`; every
    row dsh wrote for itself stays, wherever it is."""
    if not path.exists():
        return False
    old = path.read_text(encoding="utf-8")
    new, _ = strip_ours(old)
    if new == old:
        return False
    replace_private(path, new)
    return True


def codex_entry(command: str = "dsh-recall", server_name: str = SERVER_NAME,
                required: bool = False, env: dict[str, str] | None = None) -> str:
    """The `[mcp_servers.<name>]` table for `~/.codex/config.toml`. `required`: Codex waits
    for the server at start (up to its startup_timeout_sec) instead of starting the first
    turn without it, which a scripted `codex exec` needs. `env`: variables for the server
    (Codex passes only a short list of its own on), as an inline table so that keys a user
    appends below stay in this table."""
    pairs = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sorted((env or {}).items()))
    return (f"[mcp_servers.{server_name}]\n"
            f"command = {json.dumps(command)}\n"
            f"args = [\"mcp\"]\n"
            + (f"env = {{ {pairs} }}\n" if pairs else "")
            + ("required = true\n" if required else ""))


def _load_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except ValueError as e:
        raise InputError(f"{path} is not valid JSON ({e}); fix it, then run this again") from e
    if not isinstance(data, dict):
        raise InputError(f"{path} does not hold a JSON object")
    return data


def _save_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _is_our_hook(command: object) -> bool:
    """Whether a hook command runs `... hook claude-code SUB`, whatever runs it: `dsh-recall`,
    a full path (quoted or not), `python -m dsh_recall`. Install and remove recognise their
    hooks by this one rule, so a re-install replaces instead of adding a copy."""
    text = str(command or "")
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: not ours to parse, compare plain words
        words = text.split()
    return len(words) >= 4 and words[-3:-1] == ["hook", "claude-code"]


def _ours(entry: dict[str, Any]) -> bool:
    return any(_is_our_hook(h.get("command"))
               for h in entry.get("hooks") or [] if isinstance(h, dict))


def claude_install(project: Path, command: str = "dsh-recall") -> list[tuple[str, bool]]:
    """Add our MCP server and hooks to a project's Claude Code settings; idempotent.

    Returns each file with whether it changed (a file already as wanted is not rewritten)."""
    done: list[tuple[str, bool]] = []
    mcp_path = project / ".mcp.json"
    mcp = _load_json(mcp_path)
    servers = mcp.setdefault("mcpServers", {})
    want = {"type": "stdio", "command": command, "args": ["mcp"]}
    changed = servers.get(SERVER_NAME) != want
    if changed:
        servers[SERVER_NAME] = want
        _save_json(mcp_path, mcp)
    done.append((str(mcp_path), changed))
    st_path = project / ".claude" / "settings.json"
    st = _load_json(st_path)
    before = json.dumps(st, sort_keys=True) if st_path.exists() else None
    hooks = st.setdefault("hooks", {})
    prefix = HOOK_PREFIX if command == "dsh-recall" else f"{shlex.quote(command)} hook claude-code "
    for event, matcher, sub in CLAUDE_HOOKS:
        entries = [e for e in hooks.get(event, []) if not _ours(e)]
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": HOOK_PREFIX + sub}]}
        if prefix != HOOK_PREFIX:
            entry["hooks"][0]["command"] = prefix + sub
        if matcher:
            entry = {"matcher": matcher, **entry}
        hooks[event] = entries + [entry]
    changed = json.dumps(st, sort_keys=True) != before
    if changed:
        _save_json(st_path, st)
    done.append((str(st_path), changed))
    return done


def claude_remove(project: Path) -> list[str]:
    """Take out exactly what `claude_install` added; other servers and hooks stay."""
    changed: list[str] = []
    mcp_path = project / ".mcp.json"
    if mcp_path.exists():
        mcp = _load_json(mcp_path)
        if SERVER_NAME in mcp.get("mcpServers", {}):
            del mcp["mcpServers"][SERVER_NAME]
            _save_json(mcp_path, mcp)
            changed.append(str(mcp_path))
    st_path = project / ".claude" / "settings.json"
    if st_path.exists():
        st = _load_json(st_path)
        hooks = st.get("hooks", {})
        touched = False
        for event in list(hooks):
            keep = [e for e in hooks[event] if not (isinstance(e, dict) and _ours(e))]
            if len(keep) != len(hooks[event]):
                touched = True
                if keep:
                    hooks[event] = keep
                else:
                    del hooks[event]
        if not hooks and "hooks" in st:
            del st["hooks"]
        if touched:
            _save_json(st_path, st)
            changed.append(str(st_path))
    return changed


@click.group()
def integrate() -> None:
    """Mount dsh-recall in agent harnesses (Claude Code, dsh, Codex)."""


@integrate.group("claude-code")
def claude_code() -> None:
    """Claude Code: MCP server entry plus recall hooks in a project."""


@claude_code.command("install")
@click.option("--project", type=click.Path(file_okay=False), default=".",
              help="Project root holding .mcp.json and .claude/ (default: cwd).")
@click.option("--command", "command", default=None,
              help="How to run dsh-recall (default: `dsh-recall` when it is on PATH, else this executable's full path).")
@handle_errors
def cc_install(project: str, command: str | None) -> None:
    """Add the `recall` MCP server and the hooks; running it twice changes nothing."""
    for p, changed in claude_install(Path(project).resolve(), command or default_command()):
        click.echo(f"{'updated' if changed else 'unchanged'} {p}")
    carried = home_to_carry()
    if carried:
        # The project's files are shared with the team: a personal path does not go there.
        click.echo(f"dsh-recall: this shell's recall home is {carried}; Claude Code starts the "
                   "server and the hooks with its own environment, so start claude with "
                   f"DSH_RECALL_HOME={shlex.quote(carried)} set too (it is not written into the "
                   "project's files, which the team shares)", err=True)


@claude_code.command("remove")
@click.option("--project", type=click.Path(file_okay=False), default=".")
@handle_errors
def cc_remove(project: str) -> None:
    """Remove what install added, nothing else."""
    changed = claude_remove(Path(project).resolve())
    click.echo("\n".join(f"updated {p}" for p in changed) or "nothing to remove")


@integrate.group("dsh")
def dsh() -> None:
    """DeepSeek Harness: a cordis patch mounting the server and the native plugin."""


@dsh.command("patch")
@click.option("--write", "write", type=click.Path(dir_okay=False), default=None,
              help="Write the patch into this file (e.g. $DSH_HOME/cordis.patch.yml) "
                   "instead of printing it.")
@click.option("--profile", "profile", default=None,
              help="Write it into this dsh profile's own patch, $DSH_HOME/profiles/NAME/"
                   "cordis.patch.yml, with a file:// plugin name: there the web UI's settings "
                   "card can save (e.g. --profile web).")
@click.option("--dsh-home", "home", type=click.Path(file_okay=False), default=None,
              help="dsh's home for --profile (default: $DSH_HOME, else ~/.dsh).")
@click.option("--command", "command", default=None,
              help="How to run dsh-recall (default: `dsh-recall` when it is on PATH, else this executable's full path).")
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="Pin a workspace (default: the session's cwd).")
@click.option("--env", "env", multiple=True,
              help="KEY=VALUE passed to the server and the worker (repeatable).")
@click.option("--no-native", "no_native", is_flag=True,
              help="Mount the MCP server only, without the native plugin (no automatic "
                   "offload, auto-recall or anchors).")
@click.option("--tools", "tools", type=click.Choice(["compact", "full"]), default="compact",
              show_default=True,
              help="The server's tool profile: `compact` (one `recall` tool, about 700 tokens "
                   "per request in dsh) or `full` (every tool, about 2,500).")
@handle_errors
def dsh_patch_cmd(write: str | None, profile: str | None, home: str | None, command: str | None,
                  workspace: str | None, env: tuple[str, ...], no_native: bool, tools: str) -> None:
    """Print (or write) the patch mounting the recall server and the native plugin; dsh
    drops DSH_* variables from the server's environment, so pass them with --env. Writing
    it again replaces what it wrote."""
    if write and profile:
        raise InputError("give --write FILE or --profile NAME, not both")
    pairs = {}
    for item in env:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise InputError(f"--env expects KEY=VALUE, got '{item}'")
        pairs[k] = v
    carried = home_to_carry() if "DSH_RECALL_HOME" not in pairs else None
    if carried:
        pairs["DSH_RECALL_HOME"] = carried
    path = profile_patch(dsh_home(home), profile) if profile else Path(write).expanduser() if write else None
    # --write into a profile's own patch is --profile: there dsh's card saves only to an
    # entry named file:///abs/plugin.mjs (a bare path made every save refused).
    profile = profile or (profile_of(path) if path is not None else None)
    text = dsh_patch(command or default_command(), Path(workspace).resolve() if workspace else None,
                     pairs, native=not no_native, tools=tools, file_url=profile is not None)
    if path is None:
        click.echo(text, nl=False)
        return
    changed = write_dsh_patch(path, text)
    click.echo(f"{'wrote' if changed else 'unchanged'} the recall mount in {path}")
    if write and profile:
        click.echo(f"{path} is the {profile} profile's own patch: the plugin is named by its "
                   f"file:// URL, as `--profile {profile}` writes it, so dsh's settings card can save")
    if carried:
        click.echo(f"the mount uses DSH_RECALL_HOME={carried}, this shell's recall home "
                   "(dsh passes no DSH_* variable to what it starts)")
    rest = sorted(k for k in os.environ if k.startswith("DSH_RECALL_") and k not in _NOT_CARRIED
                  and k not in pairs)
    if rest:
        click.echo(f"dsh-recall: {', '.join(rest)} set here but not carried into the mount "
                   "(dsh passes no DSH_* variable on): add each with --env KEY=VALUE to keep it",
                   err=True)
    if profile == "web" and not no_native:
        from ..dsh import WEB_FIX_PATH
        click.echo("dsh 0.2.1rc2's web profile fails to load its plugins as shipped (docs/integrations.md); "
                   f"until it is fixed, start it with NODE_OPTIONS=--require={WEB_FIX_PATH}")


@dsh.command("remove")
@click.option("--write", "write", type=click.Path(dir_okay=False), default=None,
              help="The patch file `patch --write` wrote.")
@click.option("--profile", "profile", default=None, help="The profile `patch --profile` wrote.")
@click.option("--dsh-home", "home", type=click.Path(file_okay=False), default=None,
              help="dsh's home for --profile (default: $DSH_HOME, else ~/.dsh).")
@handle_errors
def dsh_remove_cmd(write: str | None, profile: str | None, home: str | None) -> None:
    """Take out what `integrate dsh patch` wrote (and the settings rows dsh added for it)."""
    if bool(write) == bool(profile):
        raise InputError("give --write FILE or --profile NAME")
    path = profile_patch(dsh_home(home), profile) if profile else Path(str(write)).expanduser()
    click.echo(f"updated {path}" if remove_dsh_patch(path) else "nothing to remove")


@integrate.command("codex")
@click.option("--command", "command", default=None,
              help="How to run dsh-recall (default: `dsh-recall` when it is on PATH, else this executable's full path).")
@click.option("--required", is_flag=True,
              help="Add `required = true`: Codex waits for the server before its first turn "
                   "(scripted `codex exec` runs need it; the server takes about a second).")
def codex(command: str | None, required: bool) -> None:
    """Print the `[mcp_servers.recall]` entry for ~/.codex/config.toml (with this shell's
    DSH_RECALL_HOME in its env when it is not the default one)."""
    carried = home_to_carry()
    click.echo(codex_entry(command or default_command(), required=required,
                           env={"DSH_RECALL_HOME": carried} if carried else None), nl=False)

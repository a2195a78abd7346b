"""Write src/dsh_recall/policy/scrub_rules.py: the provider rules of detect-secrets'
plugins (the ones policy/scrub.py uses), as plain pattern strings.

The scrubber runs in every process that stores an object (a harness hook is one process per
tool call), and importing detect-secrets costs about 200 ms there (it pulls in requests and
multiprocessing), so the rules are derived once, here, and committed; tests/test_scrub.py
checks the committed file against the installed library.

    python scripts/scrub_rules.py            # rewrite the file
    python scripts/scrub_rules.py --check    # exit 1 when it differs from the library
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "dsh_recall" / "policy" / "scrub_rules.py"
sys.path.insert(0, str(OUT.parents[2]))

from dsh_recall.policy.scrub import LIBRARY  # noqa: E402  (after the path is set)


def render() -> str:
    lines = [
        '"""Provider rules derived from detect-secrets ' + version("detect-secrets") + ' by',
        "scripts/scrub_rules.py; do not edit by hand. (kind, secret group, pattern, flags)\"\"\"",
        "",
        "RULES: tuple[tuple[str, int, str, int], ...] = (",
    ]
    for (module, name), (kind, groups) in LIBRARY.items():
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        for i, pat in enumerate(plugin().denylist):
            lines.append(f"    ({kind!r}, {groups.get(i, 0)}, {pat.pattern!r}, {int(pat.flags)}),  # {name}")
    lines.append(")")
    return "\n".join(lines) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print("scrub rules match the library" if same else f"{OUT} differs from the library")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

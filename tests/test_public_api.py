"""The package's public names (dsh_recall.__all__) resolve at their current homes, and
importing the package itself stays cheap (nothing behind a name is imported until used)."""

from __future__ import annotations

import subprocess
import sys

import dsh_recall


def test_every_public_name_resolves():
    for name in dsh_recall.__all__:
        assert getattr(dsh_recall, name) is not None, name


def test_the_sources_and_their_answer_are_public():
    for name in ("load_config", "Config", "RecallError", "CodeService", "HistoryService",
                 "NotesService", "ObjectService", "search_all", "Answer", "Backlog", "Viewer"):
        assert name in dsh_recall.__all__, name


def test_an_unknown_name_is_an_attribute_error():
    try:
        dsh_recall.NoSuchThing  # noqa: B018 -- the attribute access is the test
    except AttributeError as e:
        assert "NoSuchThing" in str(e)
    else:
        raise AssertionError("an unknown name resolved")


def test_importing_the_package_imports_no_service():
    code = ("import sys, dsh_recall; "
            "print(sorted(m for m in sys.modules if m.startswith('dsh_recall.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"

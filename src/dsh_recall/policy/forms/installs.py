"""Package managers' install logs: npm, pip, cargo (fetch/compile lines).

Fetch, cache, download, progress and "already satisfied" lines leave with their count; every
error line is a failure line; warnings are kept while the budget lasts; the result line
(`added 312 packages`, `Successfully installed ...`, `Finished ...`) is the summary."""

from __future__ import annotations

import re

from .base import CONTEXT, ERROR, SUMMARY, Marks
from .rules import apply, rule

SIGN = re.compile(
    r"^npm (?:http|WARN|warn|ERR!|error|notice|timing|verb|info|sill) "
    r"|^(?:added|removed|changed) \d+ packages?|^up to date, audited \d+"
    r"|^(?:Collecting|Requirement already satisfied:|Downloading|Using cached|Installing "
    r"collected packages:|Successfully installed|Building wheels? for) "
    r"|^\s+(?:Downloaded|Downloading|Compiling|Updating|Locking|Adding|Fresh|Checking)"
    r" \S+ v?\d")

_RULES = [
    rule(r"^(?:added|removed|changed) \d+ packages?|^up to date\b|^found \d+ vulnerabilit"
         r"|^\d+ vulnerabilit|^Successfully (?:installed|built)|^\s*Finished `?\w+`? profile"
         r"|^\s+Finished \S|^\s+Installed package", SUMMARY, "summary"),
    rule(r"^npm (?:ERR!|error) ", ERROR, "error line", fail=True),
    rule(r"^(?:ERROR|error|fatal): |^\s*(?:×|╰─>) |^error(?:\[E\d{4}\])?: ", ERROR,
         "error line", fail=True),
    rule(r"^\s*(?:Traceback|\w+Error: |gyp ERR! )", ERROR, "error line", fail=True),
    rule(r"^npm (?:WARN|warn) |^WARNING: |^warning: ", CONTEXT, "warning"),
    rule(r"^npm (?:http|timing|verb|sill|info|notice) ", None, "fetch line"),
    rule(r"^\s*(?:Collecting|Downloading|Using cached|Obtaining|Requirement already satisfied:"
         r"|Looking in indexes|Preparing metadata|Getting requirements|Installing build"
         r"|Building wheels? for|Created wheel for|Stored in directory|Attempting uninstall"
         r"|Found existing installation|Uninstalling|Successfully uninstalled)", None,
         "download line"),
    rule(r"[━█▇▆▅▄▃▂▁#=>-]{10,}.*(?:\d+%|[\d.]+/[\d.]+ ?[kMG]?B|eta)", None, "progress line"),
    rule(r"^\s+(?:Downloaded|Downloading|Compiling|Updating|Locking|Adding|Fresh|Checking"
         r"|Unpacking|Blocking)\s", None, "compile line"),
]


def installs(lines: list[str]) -> Marks:
    return apply("install log", lines, _RULES)

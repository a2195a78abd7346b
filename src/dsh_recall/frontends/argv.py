"""The command an argv names, word by word: read by the entry point's daemon hand-off
(daemon.py) and the CLI (cli/__init__.py) before anything else is loaded. Standard library
only, and nothing of it."""

from __future__ import annotations


def command_words(args: list[str], most: int = 2) -> list[str]:
    """The command argv names, word by word (at most `most`): argv's first word after the
    group's own options, and a group's subcommand the word after it."""
    words: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == "--config":
            skip = True
        elif a == "--" or (words and a.startswith("-")):
            break
        elif not a.startswith("-"):
            words.append(a)
            if len(words) == most:
                break
    return words

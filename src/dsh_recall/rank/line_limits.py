"""How many lines a line search over one object returns at most (rank/line_search): apart
from the search, so that the object service can state its default without loading the
search, the log ranking and the line index, which an object read (a cold process) never
uses."""

from __future__ import annotations

SEARCH_LIMIT = 20

"""Offloaded tool results: big outputs kept out of the conversation, recalled by id, line
range or search.

service.py (`ObjectService`: offload, read, search, stats, retention), types.py (what it
answers: `PutResult`, `GetResult`, `SearchResult`, `ObjectsAnswer`, `ResultText`, and the
`lines=a-b` parse every front end shares), search.py (the ranking of a search across
objects). SQL lives in stores.sqlite.objects, the offload policy in policy.offload.
"""

from __future__ import annotations

from .service import ObjectService, default_path
from .types import GetResult, ObjectsAnswer, PutResult, ResultText, SearchResult, line_range

__all__ = ["GetResult", "ObjectService", "ObjectsAnswer", "PutResult", "ResultText", "SearchResult",
           "default_path", "line_range"]

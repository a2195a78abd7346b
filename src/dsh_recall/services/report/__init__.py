"""What recall kept out of the conversations, and what it costs to keep.

- `usage`: the local usage log, one line of sizes per search, recall, offload and dsh model
  request (written on every hot path: it imports nothing heavy);
- `ledger`: tokens kept out per model request and per session, against what plain dsh would
  have sent: the one source of the figures `status`, the dsh chip, strip and Recall tab,
  `report` and `object stats` show;
- `tokens`: chars per token for the report (a real tokenizer where available);
- `baseline`: dsh sessions with recall against those without, from dsh's own logs;
- `summary`: the whole report (`dsh-recall report`, the dashboard).

This package's `__init__` imports `usage` alone (it imports nothing heavy: every hot path
records through it).
"""

from . import usage as usage  # noqa: E402 - light by design; `report.usage` for callers

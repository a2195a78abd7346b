"""Ranking building blocks: pure functions over plain data (no SQL, no I/O)."""

"""Sources: see docs/ARCHITECTURE.md."""

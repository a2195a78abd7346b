"""Services: see docs/ARCHITECTURE.md."""

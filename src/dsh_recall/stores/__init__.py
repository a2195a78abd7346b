"""Stores: see docs/ARCHITECTURE.md."""

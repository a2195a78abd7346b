"""Core: config, errors, data types, paths and text utilities shared by every layer."""

"""dsh-recall: a local recall engine for AI coding agents."""

__version__ = "0.1.0"

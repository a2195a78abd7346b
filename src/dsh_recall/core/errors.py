"""The few error types dsh-recall raises. Messages say what happened and what to do next."""


class RecallError(Exception):
    """Base class: a real error the user should see as one line."""


class ConfigError(RecallError):
    """Invalid configuration (unknown key, bad value)."""


class StoreError(RecallError):
    """The database could not be opened or is not ours, or refused an operation. Stores
    raise it (or a subclass) instead of their driver's errors (sqlite3, psycopg)."""


class LexicalQueryError(StoreError):
    """A lexical query the index cannot run (FTS syntax it refuses): that layer degrades."""


class RowDataError(StoreError):
    """A row the database refused for its data (a value it cannot bind or store), not a
    failing database: the caller may write the other rows one by one."""


class EmbedderError(RecallError):
    """An embedder could not be loaded or did not answer."""


class InputError(RecallError):
    """Bad user input (missing path, unknown session, malformed file)."""


class UnknownSession(InputError):
    """A history session that is not imported, or that the caller's channel may not see."""


class MissingExtraError(RecallError):
    """An optional dependency is not installed."""

    def __init__(self, module: str, extra: str):
        super().__init__(
            f"{module} is not installed; install it with: pip install 'dsh-recall[{extra}]'"
        )

"""The few error types dsh-recall raises. Messages say what happened and what to do next."""


class RecallError(Exception):
    """Base class: a real error the user should see as one line."""


class ConfigError(RecallError):
    """Invalid configuration (unknown key, bad value)."""


class StoreError(RecallError):
    """The database could not be opened or is not ours."""


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

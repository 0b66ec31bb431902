"""The root of prism's exceptions and the configuration error, below every other module.

[`PrismError`][prism._error_root.PrismError] and [`PrismConfigError`][prism._error_root.PrismConfigError] live here, with no prism imports, so that the
lowest layers (value serialisation, the unknown-key check) can raise them; [`prism.errors`][prism.errors]
re-exports both and holds every other exception.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ERR_PRISM_CONFIG", "PrismConfigError", "PrismError"]

ERR_PRISM_CONFIG = "ERR_PRISM_CONFIG"


def _rebuild(cls: type[PrismError], args: tuple[Any, ...], state: dict[str, Any]) -> PrismError:
    """Unpickle helper: restore an error without calling its (data-first) ``__init__``."""
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class PrismError(Exception):
    """Root of every exception prism defines.

    Attributes:
        code: Stable identifier of the failure; ``ERR_PRISM_*`` except for the data codes of
            ``ProviderTransportError``, ``ArtifactFailedError`` and an artifact ``AgentRunError``.
        message: The human-readable message; ``str(err)`` returns it.
    """

    __module__ = "prism.errors"

    code: str = "ERR_PRISM"
    default_message: str = "Prism error"

    def __init__(self, message: str | None = None) -> None:
        text = self.default_message if message is None else str(message)
        super().__init__(text)
        self.message = text

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class PrismConfigError(PrismError, ValueError):
    """Invalid agent, run, loop, limit, retry, turn-policy or other option values.

    Raised at configuration time (``create_agent``, run preflight, option constructors); the
    message names the option and the value received.

    Also a ``ValueError``, so generic handlers keep working. Code ``ERR_PRISM_CONFIG``.
    """

    __module__ = "prism.errors"

    code = ERR_PRISM_CONFIG
    default_message = "Invalid configuration"

"""The base class of option records: mappings coerce, and every failure is ``PrismConfigError``.

Model, provider, ownership, limit, retry and store options subclass :class:`_Options`, so a host
may pass either the record or a snake_case mapping of its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from prism._serde import Serializable
from prism.errors import PrismConfigError

if TYPE_CHECKING:
    from typing import Self

__all__: list[str] = []


class _Options(Serializable):
    """Options objects: ``coerce`` accepts the record or a snake_case mapping of its fields."""

    __slots__ = ()

    @classmethod
    def coerce(cls, value: Self | Mapping[str, Any]) -> Self:
        """Return ``value`` itself, or the instance built from a snake_case mapping.

        Raises:
            PrismConfigError: ``value`` is neither, has unknown keys, or has invalid values.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise PrismConfigError(
                f"{cls.__name__} expects a {cls.__name__} or a mapping, got {type(value).__name__}"
            )
        try:
            return cls.from_dict(value)
        except PrismConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise PrismConfigError(f"{cls.__name__}: {exc}") from exc

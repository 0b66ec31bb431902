"""The base class of option records: mappings coerce, and every failure is ``PrismConfigError``.

Model, provider, ownership, limit, retry and store options subclass :class:`_Options`, so a host
may pass either the record or a snake_case mapping of its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from prism._serde import Serializable, from_fields
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
        try:
            return cls.from_dict(cls._mapping(value))
        except PrismConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise PrismConfigError(f"{cls.__name__}: {exc}") from exc

    @classmethod
    def _coerce_as_given(cls, value: Self | Mapping[str, Any]) -> Self:
        """``coerce`` for options that hold host objects (a callable, a policy), which are never
        serialised: the mapping becomes the instance through :func:`~prism._serde.from_fields`
        (values as they are, not decoded).

        Raises:
            PrismConfigError: ``ERR_PRISM_CONFIG`` — not a mapping, or an unknown key (a
                camelCase key is reported with its snake_case name).
        """
        if isinstance(value, cls):
            return value
        return from_fields(cls, cls._mapping(value))

    @classmethod
    def _mapping(cls, value: object) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise PrismConfigError(
                f"{cls.__name__} expects a {cls.__name__} or a mapping, got {type(value).__name__}"
            )
        return value

"""The base class of option records: unknown keys raise ``PrismConfigError`` and mappings coerce.

Model, provider, ownership, limit, retry and store options subclass :class:`_Options`, so a host
may pass either the record or a snake_case mapping of its fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from prism._serde import Serializable
from prism.errors import PrismConfigError

if TYPE_CHECKING:
    from typing import Self

__all__: list[str] = []


def _snake(name: str) -> str:
    out = []
    for ch in name:
        if ch.isupper():
            out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def _unknown_keys_message(cls: type, keys: Sequence[str]) -> str:
    names = {f.name for f in fields(cls)}
    parts = []
    for key in sorted(str(k) for k in keys):
        snake = _snake(key)
        parts.append(f"{key} (use {snake})" if snake != key and snake in names else key)
    return f"{cls.__name__}: unknown keys: {', '.join(parts)}"


class _Options(Serializable):
    """Options objects: unknown keys raise ``PrismConfigError`` and mappings coerce."""

    __slots__ = ()

    @classmethod
    def _unknown_keys_error(cls, keys: Sequence[str]) -> Exception:
        return PrismConfigError(_unknown_keys_message(cls, keys))

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

"""The base class of option records: mappings coerce, and every failure is ``PrismConfigError``.

Model, provider, ownership, limit, retry and store options subclass [`_Options`][prism.types._options._Options], so a host
may pass either the record or a snake_case mapping of its fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from prism._serde import Serializable, from_fields
from prism.errors import PrismConfigError

if TYPE_CHECKING:
    from typing import Self

__all__ = ["check_secrets_option", "resolve_option_layers"]

_O = TypeVar("_O", bound="_Options")


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
        serialised: the mapping becomes the instance through [`from_fields()`][prism._serde.from_fields]
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


def resolve_option_layers(
    cls: type[_O],
    agent: _O | Mapping[str, Any] | Literal[False] | None,
    run: _O | Mapping[str, Any] | Literal[False] | None,
    *,
    validate: Callable[[_O | Mapping[str, Any]], _O],
    label: str,
    unset: _O | None,
) -> _O | None:
    """The effective ``cls`` options of an agent layer and a run layer, each validated.

    The agent layer gives the base: ``unset`` for ``None``, nothing for ``False``. Run ``None``
    keeps the base, run ``False`` gives ``None``, a run record replaces the base, and a run
    mapping overrides only the keys it names on top of the base (``cls()`` when there is none);
    its unknown keys are reported before it is applied.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — a layer is invalid, or is not a record, a
            mapping, ``False`` or ``None`` (``"<label> must be a <class>, a mapping, …"``).
    """
    base: _O | None
    if agent is None:
        base = unset
    elif agent is False:
        base = None
    elif isinstance(agent, (cls, Mapping)):
        base = validate(agent)
    else:
        raise _not_a_layer(cls, label, agent)
    if run is None:
        return base
    if run is False:
        return None
    if isinstance(run, cls):
        return validate(run)
    if isinstance(run, Mapping):
        overlay = validate(run)  # reports unknown keys first
        start = base if base is not None else cls()
        changes = {k: getattr(overlay, k) for k in run}
        return validate(dataclasses.replace(start, **changes))  # type: ignore[type-var]
    raise _not_a_layer(cls, label, run)


def _not_a_layer(cls: type, label: str, value: object) -> PrismConfigError:
    return PrismConfigError(
        f"{label} must be a {cls.__name__}, a mapping, False or None, got {type(value).__name__}"
    )


def check_secrets_option(secrets: object, label: str) -> None:
    """Check the ``secrets`` field of an options record: a sequence of ``str``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``<label>.secrets must be a sequence of str``
            (also for a bare string).
    """
    if (
        isinstance(secrets, (str, bytes))
        or not isinstance(secrets, Iterable)
        or not all(isinstance(s, str) for s in secrets)
    ):
        raise PrismConfigError(f"{label}.secrets must be a sequence of str")

"""Secret redaction and errors as data.

[`redact_value()`][prism.redaction.redact_value] is the one walk used for events, provider requests, store entries, ledger
records and run-state envelopes. It is copy-on-write: a value in which no string changed is
returned as the *same object*, so the common case (no secret present) allocates nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from prism._serde import Serializable
from prism.errors import RedactedError
from prism.types import ErrorInfo

__all__ = [
    "REDACTED",
    "SecretRedactor",
    "create_secret_redactor",
    "error_to_error_info",
    "redact_agent_event",
    "redact_value",
    "redacted_cause",
]

_T = TypeVar("_T")
_E = TypeVar("_E", bound=Serializable)

REDACTED = "[REDACTED]"
"""Replacement text for a secret."""
_CIRCULAR = "[Circular]"
_MAX_DEPTH_MARK = "[MaxDepth]"
_MAX_DEPTH = 32
"""Containers nested deeper than this many levels are replaced by ``"[MaxDepth]"``."""


@runtime_checkable
class SecretRedactor(Protocol):
    """What the runtime uses of a redactor: ``secrets`` and ``redact``.

    ``redact`` must be a pure function of its input (the runtime caches its result per
    message).
    """

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets, in application order (joined with the retry secrets to
        redact failed attempts)."""
        ...

    def redact(self, value: _T) -> _T:
        """Return ``value`` with every secret in every string replaced."""
        ...


def _check_secrets(secrets: Iterable[str]) -> tuple[str, ...]:
    if isinstance(secrets, (str, bytes, bytearray)):
        raise TypeError(
            "secrets must be an iterable of strings, not a bare string "
            "(use create_secret_redactor([secret]))"
        )
    out: list[str] = []
    for secret in secrets:
        if not isinstance(secret, str):
            raise TypeError(f"secret must be a str, got {type(secret).__name__}")
        if secret:
            out.append(secret)
    return tuple(out)


class _SecretRedactor:
    """The built-in redactor: ``redact(v) == redact_value(v, secrets)``."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._secrets = secrets

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def redact(self, value: _T) -> _T:
        if not self._secrets:
            return value
        return cast(_T, _walk(value, self._secrets, 0, set()))

    def __repr__(self) -> str:  # never show the secrets themselves
        return f"<SecretRedactor secrets={len(self._secrets)}>"


def create_secret_redactor(secrets: Iterable[str]) -> SecretRedactor:
    """Build the built-in redactor.

    Args:
        secrets: One iterable of secrets (``["sk-1", "sk-2"]``); empty strings are dropped and the
            order is kept (secrets are applied in that order).

    Raises:
        TypeError: ``secrets`` is a bare ``str`` (it would register each character), or holds a
            non-``str`` item.
    """
    return _SecretRedactor(_check_secrets(secrets))


def redact_value(value: _T, secrets: Iterable[str]) -> _T:
    """Replace every non-empty secret in every string of ``value`` by ``"[REDACTED]"``.

    Walks dataclass fields, mappings (and their ``str`` keys), lists and tuples at any depth.
    Secrets are applied in the given order. A container already on the current path becomes
    ``"[Circular]"``; a container deeper than 32 levels becomes ``"[MaxDepth]"``; when two
    redacted mapping keys collide the later one gets the suffix ``__2``, ``__3``, ....
    Changed dataclasses are rebuilt as the same class (``dataclasses.replace``), changed mappings
    become ``dict``s, tuples stay tuples and lists stay lists. ``bytes``, numbers, ``None``,
    callables, signals and other objects are returned unchanged. Anything in which nothing
    changed is returned as the same object.

    Raises:
        TypeError: ``secrets`` is a bare ``str`` or holds a non-``str`` item.
    """
    secret_tuple = _check_secrets(secrets)
    if not secret_tuple:
        return value
    return cast(_T, _walk(value, secret_tuple, 0, set()))


# --------------------------------------------------------------------------- the walk

_ATOMS: frozenset[type] = frozenset((int, float, bool, type(None), bytes, bytearray, complex))


def _redact_str(text: str, secrets: tuple[str, ...]) -> str:
    out = text
    for secret in secrets:
        if secret in out:
            out = out.replace(secret, REDACTED)
    return text if out == text else out


def _walk(value: Any, secrets: tuple[str, ...], depth: int, active: set[int]) -> Any:
    kind = type(value)
    if kind is str:
        return _redact_str(value, secrets)
    if kind in _ATOMS:
        return value
    if isinstance(value, str):
        return _redact_str(value, secrets)
    if isinstance(value, (list, tuple)):
        return _enter(value, secrets, depth, active, _walk_sequence)
    if isinstance(value, Mapping):
        return _enter(value, secrets, depth, active, _walk_mapping)
    if hasattr(kind, "__dataclass_fields__") and not isinstance(value, type):
        return _enter(value, secrets, depth, active, _walk_dataclass)
    return value


def _enter(value: Any, secrets: tuple[str, ...], depth: int, active: set[int], walker: Any) -> Any:
    key = id(value)
    if key in active:
        return _CIRCULAR
    if depth >= _MAX_DEPTH:
        return _MAX_DEPTH_MARK
    active.add(key)
    try:
        return walker(value, secrets, depth + 1, active)
    finally:
        active.discard(key)


def _walk_sequence(
    value: list[Any] | tuple[Any, ...], secrets: tuple[str, ...], depth: int, active: set[int]
) -> Any:
    items: list[Any] | None = None
    for index, item in enumerate(value):
        new = _walk(item, secrets, depth, active)
        if items is None:
            if new is item:
                continue
            items = list(value[:index])
        items.append(new)
    if items is None:
        return value
    if isinstance(value, list):
        return items
    if type(value) is not tuple and hasattr(value, "_make"):
        return tuple.__new__(type(value), items)  # a named tuple, rebuilt as its ``_make`` does
    return tuple(items)


def _walk_mapping(
    value: Mapping[Any, Any], secrets: tuple[str, ...], depth: int, active: set[int]
) -> Any:
    out: dict[Any, Any] = {}
    changed = False
    for key, item in value.items():
        new_key = _redact_str(key, secrets) if isinstance(key, str) else key
        if new_key is not key:
            changed = True
        if new_key in out:
            changed = True
            n = 2
            while f"{new_key}__{n}" in out:
                n += 1
            new_key = f"{new_key}__{n}"
        new_item = _walk(item, secrets, depth, active)
        if new_item is not item:
            changed = True
        out[new_key] = new_item
    return out if changed else value


def _walk_dataclass(value: Any, secrets: tuple[str, ...], depth: int, active: set[int]) -> Any:
    changes: dict[str, Any] | None = None
    spec = [(f.name, f.init) for f in dataclasses.fields(value)]
    for name, _init in spec:
        try:
            current = getattr(value, name)
        except AttributeError:
            continue
        new = _walk(current, secrets, depth, active)
        if new is not current:
            if changes is None:
                changes = {}
            changes[name] = new
    if changes is None:
        return value
    init_changes = {name: changes[name] for name, init in spec if init and name in changes}
    try:
        rebuilt = dataclasses.replace(value, **init_changes)
    except Exception:  # a class whose __init__/__post_init__ rejects the redacted values
        rebuilt = copy.copy(value)
        for name, new in init_changes.items():
            object.__setattr__(rebuilt, name, new)
    for name, init in spec:
        if not init and name in changes:
            object.__setattr__(rebuilt, name, changes[name])
    return rebuilt


# --------------------------------------------------------------------------- events


def redact_agent_event(event: _E, redactor: SecretRedactor | None) -> _E:
    """Return ``event`` with every string redacted by ``redactor``.

    Without a redactor the event is returned unchanged.

    Raises:
        TypeError: a host redactor returned an object of another class.
    """
    if redactor is None:
        return event
    out = redactor.redact(event)
    if type(out) is not type(event):
        raise TypeError(
            f"redactor returned {type(out).__name__} for {type(event).__name__}; "
            "redact() must return a value of the same class"
        )
    return out


# --------------------------------------------------------------------------- errors


def _redactor_of(secrets: Iterable[str] | SecretRedactor | None) -> SecretRedactor | None:
    if secrets is None:
        return None
    if isinstance(secrets, (str, bytes, bytearray)):
        _check_secrets(secrets)  # raises TypeError
    if hasattr(secrets, "redact") and hasattr(secrets, "secrets"):
        return cast(SecretRedactor, secrets)
    redactor = create_secret_redactor(secrets)
    return redactor if redactor.secrets else None


def _safe_str(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def error_to_error_info(exc: object, secrets: Iterable[str] | SecretRedactor = ()) -> ErrorInfo:
    """Describe a failure as data, redacting every secret.

    Args:
        exc: An exception (or any value: ``message = str(value)``, no ``name``).
        secrets: Secrets to replace, or a ``SecretRedactor`` (whose ``redact`` is then used).

    Returns:
        ``ErrorInfo`` with ``name = type(exc).__name__`` (exceptions only), ``message =
        str(exc)``, ``code`` when ``exc.code`` is a ``str``/``int``, ``retry_after_ms`` when
        ``exc.retry_after_ms`` is a finite number >= 0, and ``cause = str(exc.__cause__)``.

    Raises:
        TypeError: ``secrets`` is a bare ``str``.
    """
    redactor = _redactor_of(secrets)

    def clean(text: str) -> str:
        return text if redactor is None else redactor.redact(text)

    if not isinstance(exc, BaseException):
        return ErrorInfo(message=clean(_safe_str(exc)))
    code: Any = getattr(exc, "code", None)
    if isinstance(code, bool) or not isinstance(code, (str, int)):
        code = None
    elif isinstance(code, str):
        code = clean(code)
    retry: Any = getattr(exc, "retry_after_ms", None)
    if (
        isinstance(retry, bool)
        or not isinstance(retry, (int, float))
        or not math.isfinite(retry)
        or retry < 0
    ):
        retry = None
    cause = exc.__cause__
    return ErrorInfo(
        message=clean(_safe_str(exc)),
        name=type(exc).__name__,
        code=code,
        retry_after_ms=None if retry is None else float(retry),
        cause=None if cause is None else clean(_safe_str(cause)),
    )


def _links(exc: BaseException) -> list[BaseException]:
    links: list[BaseException] = []
    if exc.__cause__ is not None:
        links.append(exc.__cause__)
    elif exc.__context__ is not None and not exc.__suppress_context__:
        links.append(exc.__context__)
    if isinstance(exc, BaseExceptionGroup):
        links.extend(exc.exceptions)
    return links


_Clean = Callable[[Any], Any]


def _cleaner(redactor: SecretRedactor | None, extra: tuple[str, ...]) -> _Clean | None:
    """One function applying ``redactor`` then the ``extra`` secrets; ``None`` when neither."""
    if redactor is None:
        if not extra:
            return None
        return lambda value: _walk(value, extra, 0, set())
    if not extra:
        return redactor.redact
    return lambda value: _walk(redactor.redact(value), extra, 0, set())


def _differs(value: Any, clean: _Clean) -> bool:
    out = clean(value)
    if out is value:
        return False
    try:
        return bool(out != value)
    except Exception:  # an attribute whose comparison fails: assume it held a secret
        return True


def _has_secret(exc: BaseException, clean: _Clean, seen: set[int]) -> bool:
    """Whether the text, ``args`` or an attribute of ``exc`` or of a link below it holds a
    secret."""
    if id(exc) in seen:
        return False
    seen.add(id(exc))
    if _differs(_safe_str(exc), clean) or _differs(exc.args, clean):
        return True
    attributes = getattr(exc, "__dict__", None)
    if attributes and _differs(dict(attributes), clean):
        return True
    return any(_has_secret(link, clean, seen) for link in _links(exc))


def redacted_cause(
    exc: BaseException, redactor: SecretRedactor | None, extra_secrets: Iterable[str] = ()
) -> BaseException:
    """Return what to chain as ``__cause__`` for a host exception.

    ``exc`` itself when no text, ``args`` item or attribute (``vars()``) of it or of its
    cause/context chain holds a secret of ``redactor`` or ``extra_secrets``; otherwise a
    [`RedactedError`][prism.errors.RedactedError] with ``original_type = type(exc).__name__``, the
    redacted message and the redacted text of ``exc``'s traceback (``traceback_text``; the
    traceback object is not kept: its frames hold the raw values), whose own cause is derived
    the same way from ``exc``'s cause (or context). The host exception object is never modified.

    Raises:
        TypeError: ``extra_secrets`` is a bare ``str``.
    """
    clean = _cleaner(redactor, _check_secrets(extra_secrets))
    if clean is None or not _has_secret(exc, clean, set()):
        return exc
    return _to_redacted(exc, clean, set())


def _to_redacted(exc: BaseException, clean: _Clean, seen: set[int]) -> BaseException:
    seen.add(id(exc))
    standin = RedactedError(
        clean(_safe_str(exc)),
        original_type=type(exc).__name__,
        traceback_text=clean("".join(traceback.format_tb(exc.__traceback__))),
    )
    nxt = exc.__cause__
    if nxt is None and not exc.__suppress_context__:
        nxt = exc.__context__
    if nxt is not None and id(nxt) not in seen:
        standin.__cause__ = (
            _to_redacted(nxt, clean, seen) if _has_secret(nxt, clean, set()) else nxt
        )
    else:
        standin.__suppress_context__ = True
    return standin

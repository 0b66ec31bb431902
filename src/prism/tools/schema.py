"""JSON Schema validation with jsonschema: compile a schema once, list an instance's errors.

Tool arguments and structured outputs are both checked here. ``jsonschema`` is imported the first
time a schema is compiled, never by ``import prism``. A compiled validator is cached per schema
object (``prism.tools._identity_cache``), and an instance that the schema's fast checker
(``prism.tools._fast_schema``) proves valid skips jsonschema entirely; every other instance,
every invalid one included, is checked by jsonschema, so the errors are always jsonschema's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prism.tools._fast_schema import fast_checker
from prism.tools._identity_cache import IdentityCache

__all__ = ["compile_schema", "format_errors", "schema_error_detail", "schema_errors"]

_jsonschema_validators: Any = None
# schema object -> compiled validator, or the ``str`` detail of why the schema is invalid
_COMPILED: IdentityCache[Mapping[str, Any], Any] = IdentityCache(1024)


def _jsonschema() -> Any:
    """The ``jsonschema.validators`` module, imported on first use."""
    global _jsonschema_validators
    if _jsonschema_validators is None:
        import jsonschema.validators

        _jsonschema_validators = jsonschema.validators
    return _jsonschema_validators


def compile_schema(schema: Mapping[str, Any]) -> Any:
    """Return a checked jsonschema validator for ``schema``, or a ``str`` error detail.

    The validator class is the one ``jsonschema.validators.validator_for(schema)`` picks, and the
    schema is checked against its metaschema first. The result is cached per schema object, so it
    is built once per tool and schema, not per call; a schema mutated in place after its first use
    keeps its first compilation.
    """
    return _COMPILED.get_or_build(schema, _compile)


def _compile(schema: Mapping[str, Any]) -> Any:
    validators = _jsonschema()
    try:
        cls = validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)
    except Exception as exc:
        return schema_error_detail(exc)


def schema_error_detail(exc: BaseException) -> str:
    """The message of a jsonschema error (its ``message``), else ``str(exc)``."""
    message = getattr(exc, "message", None)
    return str(message) if isinstance(message, str) else str(exc)


def _pointer(path: Iterable[Any]) -> str:
    """RFC 6901 pointer of a jsonschema ``absolute_path`` (``""`` at the root)."""
    out = ""
    for part in path:
        out += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return out


def schema_errors(compiled: Any, instance: object) -> list[tuple[str, str]]:
    """Return ``(pointer, message)`` for every error of ``instance``, sorted.

    ``pointer`` is the RFC 6901 pointer of the failing value (``""`` at the root) and ``message``
    jsonschema's message. An instance the fast checker proves valid returns ``[]`` without
    running jsonschema.

    Args:
        compiled: A validator from [`compile_schema()`][prism.tools.schema.compile_schema].
        instance: The value to check.

    Raises:
        Exception: whatever jsonschema raises while resolving the schema (e.g. an unresolvable
            ``$ref``); callers report it as an invalid schema.
    """
    fast = fast_checker(compiled)
    if fast is not None and fast(instance):
        return []
    errors = [(_pointer(e.absolute_path), str(e.message)) for e in compiled.iter_errors(instance)]
    errors.sort()
    return errors


def format_errors(errors: Iterable[tuple[str, str]]) -> str:
    """``"; "``-joined ``"<pointer>: <message>"`` items (just ``"<message>"`` at the root)."""
    return "; ".join(f"{p}: {m}" if p else m for p, m in errors)

"""The one check of mappings for unknown keys.

Every value that accepts a mapping in place of its dataclass — options (run options, limits,
retry, compaction, loop, durable-run, turn-policy and model options) and the ``from_dict`` form of
every serializable value — rejects keys that are not field names through
[`reject_unknown_keys()`][prism._keys.reject_unknown_keys], so the error type and message are the same everywhere.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from prism._error_root import PrismConfigError

__all__ = ["reject_unknown_keys"]


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def reject_unknown_keys(label: str, value: Mapping[Any, Any], names: Collection[str]) -> None:
    """Raise when ``value`` has a key that is not in ``names``.

    Args:
        label: What the mapping configures, used in the message (``"options"``, ``"run_state"``,
            a class name).
        value: The mapping given by the host.
        names: The accepted keys (the dataclass field names).

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` (also a ``ValueError``) —
            ``unknown <label> key(s): a, b``, keys sorted; a camelCase key whose snake_case form
            is accepted is reported as ``key (use snake)``.
    """
    unknown = sorted(str(k) for k in value if k not in names)
    if not unknown:
        return
    parts = []
    for key in unknown:
        snake = _snake(key)
        parts.append(f"{key} (use {snake})" if snake != key and snake in names else key)
    raise PrismConfigError(f"unknown {label} key(s): {', '.join(parts)}")

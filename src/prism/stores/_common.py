"""What every concept of both database stores stands on: the JSON codec, typed decoding, and
the database access a store's connection layer gives its concept mixins.

Each store is one class composed of per-concept mixins (sessions, checkpoints, ledger) over its
connection layer. The shared mixins (``_sessions``, ``_checkpoints``, ``_ledger``) hold the
semantics of the memory stores — argument checks, errors worded as the memory stores word them,
row conversion — and reach the database only through [`DatabaseAccess`][prism.stores._common.DatabaseAccess], which
``_sqlite_connection`` and ``_postgres_connection`` implement; the dialect modules
(``_sqlite_sessions``, ``_postgres_checkpoints``, …) add each concept's statements and the writes
whose transaction handling differs between the two databases.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from prism._fast_json import compact_text
from prism.errors import ERR_PRISM_STORE_UNDECODABLE, StoreError
from prism.store import SessionEntry

__all__ = ["DatabaseAccess", "decoded", "dumps"]

_TEXT: Final = compact_text()


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (UTF-8 characters kept, NaN/inf refused).

    Raises:
        TypeError: a value that is not JSON-compatible.
        ValueError: ``NaN`` or an infinity; a circular structure.
    """
    return _TEXT(value)


_T = TypeVar("_T")


def decoded(decode: Callable[[Any], _T], raw: Any, what: str) -> _T:
    """``decode(raw)`` for a stored value; a value that does not decode is a typed error.

    Args:
        decode: Turns the stored column into the value (``json.loads``, ``from_dict``, …).
        raw: The stored column.
        what: The row, for the message (e.g. ``"checkpoint prism.agent-run/run_1"``).

    Raises:
        StoreError: ``ERR_PRISM_STORE_UNDECODABLE`` — not valid JSON, or not the record the row
            should hold (the decoding error is its ``__cause__``).
    """
    try:
        return decode(raw)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise StoreError(
            ERR_PRISM_STORE_UNDECODABLE,
            f"{what}: the stored value cannot be decoded ({type(exc).__name__}: {exc})",
        ) from exc


class DatabaseAccess(ABC):
    """The database access a store's connection layer gives the concept mixins, and the
    store's lifecycle (``open``, ``aclose``, ``async with``).

    A store class derives from it through its connection layer and its mixins; every abstract
    method is the dialect's.
    """

    __slots__ = ()

    @abstractmethod
    async def open(self) -> Self:
        """Open (and migrate) the database now; the store itself."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release what the store holds. Idempotent."""

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @abstractmethod
    async def _query(self, sql: str, params: Any, finish: Callable[[list[Any]], _T]) -> _T:
        """Run one statement and return ``finish(rows)``.

        ``finish`` runs where the rows are read: on SQLite's worker thread (so decoding stays
        off the event loop), after the fetch for PostgreSQL.
        """

    @abstractmethod
    async def _execute(self, sql: str, params: Any) -> None:
        """Run one write statement in its own transaction."""

    @staticmethod
    @abstractmethod
    def _encode(value: Any, /) -> str:
        """The stored JSON text of ``value`` (a ``jsonb`` parameter for PostgreSQL)."""

    @staticmethod
    def _stored_text(value: Any, text: str, /) -> str:
        """What [`_encode()`][prism.stores._common.DatabaseAccess._encode] returns for ``value``, given ``text`` = ``dumps(value)``
        (without encoding ``value`` again)."""
        return text

    @staticmethod
    @abstractmethod
    def _decode(raw: Any, /) -> Any:
        """The JSON value of a stored JSON column (undoing [`_encode()`][prism.stores._common.DatabaseAccess._encode])."""

    @staticmethod
    @abstractmethod
    def _append_params(
        entry: SessionEntry,
        expected_parent_id: str | None,
        idempotency_key: str | None,
        fork: bool,
    ) -> tuple[Any, ...]:
        """The parameters of one session append (the entry encoded once); ``append`` and
        ``save_checkpoint_with_entries`` both use them."""

"""Durable stores: SQLite (embedded default) and PostgreSQL (many machines).

Each store implements [`SessionStore`][prism.store.SessionStore],
[`CheckpointStore`][prism.checkpoints.CheckpointStore] and ``RunLedger`` over one
database, with the semantics of the memory stores:

* [`SqliteStore`][prism.stores.sqlite.SqliteStore] — ``sqlite3`` with WAL, off the event loop;
* [`PostgresStore`][prism.stores.postgres.PostgresStore] — ``psycopg`` 3 async with ``psycopg_pool``
  (extra ``prism-runtime[postgres]``, imported only when used);
* [`open_store()`][prism.stores.open_store] — pick one from a URL (a CLI flag or an environment variable).
"""

from __future__ import annotations

import typing as _typing

from prism.errors import PrismConfigError as _PrismConfigError
from prism.stores._sessions import SessionInfo
from prism.stores.sqlite import SqliteStore

if _typing.TYPE_CHECKING:
    from prism.stores.postgres import PostgresStore

__all__ = ["DatabaseStore", "PostgresStore", "SessionInfo", "SqliteStore", "open_store"]

DatabaseStore: _typing.TypeAlias = "SqliteStore | PostgresStore"
"""Either database store."""


def __getattr__(name: str) -> _typing.Any:
    if name == "PostgresStore":  # importing it never needs psycopg; using it does
        from prism.stores.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``PostgresStore`` included, though loaded lazily) and the dunders."""
    return sorted({*__all__, *(n for n in globals() if n[:2] == "__" == n[-2:])})


async def open_store(url: str, **options: _typing.Any) -> SqliteStore | PostgresStore:
    """Open (and migrate) the store a URL names.

    ========================================  =================================================
    URL                                       Store
    ========================================  =================================================
    ``sqlite:///relative.db``                 ``SqliteStore("relative.db")`` (relative to the
                                              working directory)
    ``sqlite:////abs/path.db``                ``SqliteStore("/abs/path.db")``
    ``sqlite://:memory:``                     a private in-memory SQLite database
    ``postgresql://…`` / ``postgres://…``     ``await PostgresStore.connect(url)``
    ========================================  =================================================

    Args:
        url: The store URL. For PostgreSQL the whole URL is the libpq connection string.
        **options: Keyword options of the store: ``busy_timeout_s`` for SQLite; ``min_size``,
            ``max_size``, ``schema`` for PostgreSQL.

    Returns:
        The opened store; close it with ``await store.aclose()`` or use ``async with store:``.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — an unsupported scheme or an empty path.
        StoreSchemaError: ``ERR_PRISM_STORE_SCHEMA`` — the database's schema is refused.
        ImportError: a PostgreSQL URL without the ``postgres`` extra installed.
    """
    if not isinstance(url, str):
        raise _PrismConfigError(f"store URL must be a str, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme == "sqlite":
        if rest == ":memory:":
            path = ":memory:"
        elif rest.startswith("/") and len(rest) > 1:
            path = rest[1:]  # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db
        else:
            raise _PrismConfigError(
                "SQLite store URL must be sqlite:///relative.db, sqlite:////abs/path.db or "
                f"sqlite://:memory:, got {url!r}"
            )
        sqlite_store = SqliteStore(path, **options)
        try:
            return await sqlite_store.open()
        except BaseException:
            await sqlite_store.aclose()
            raise
    if sep and scheme in ("postgresql", "postgres"):
        from prism.stores.postgres import PostgresStore

        return await PostgresStore.connect(url, **options)
    raise _PrismConfigError(
        "unsupported store URL (expected sqlite:///…, sqlite://:memory: or postgresql://…): "
        + (f"{scheme}://…" if sep else repr(url))
    )

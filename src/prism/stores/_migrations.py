"""Versioned, checksummed schema migrations shipped in the package.

Migrations live in ``prism/stores/migrations/<dialect>/NNNN_<name>.sql``. Opening a store reads
the ``prism_schema_migrations`` table inside one transaction, refuses a database it does not fully
recognise, and applies the missing migrations in order:

* a recorded version the package does not ship (newer, or unknown) → [`StoreSchemaError`][prism.stores._migrations.StoreSchemaError];
* a recorded checksum that differs from the shipped file's SHA-256 (the file or the record was
  altered) → [`StoreSchemaError`][prism.stores._migrations.StoreSchemaError];
* recorded versions that are not a prefix of the shipped ones (a gap) → [`StoreSchemaError`][prism.stores._migrations.StoreSchemaError].

A refused database is never altered.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final, Literal, TypeAlias

from prism.errors import StoreSchemaError

__all__ = ["MIGRATIONS_TABLE", "Dialect", "Migration", "load_migrations", "plan_migrations"]

Dialect: TypeAlias = Literal["sqlite", "postgres"]

MIGRATIONS_TABLE: Final = "prism_schema_migrations"
"""Table recording ``(version, name, checksum, applied_at)`` of every applied migration."""

_FILE_RE: Final = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One shipped migration file."""

    version: int
    """Schema version it creates (1, 2, ...)."""
    name: str
    """The file's name part after the number, e.g. ``initial``."""
    sql: str
    """The file's text (for PostgreSQL still holding the ``{schema}`` placeholder)."""
    checksum: str
    """Lowercase hex SHA-256 of the file's bytes."""

    def statements(self) -> list[str]:
        """The SQLite statements of the file, split with ``sqlite3.complete_statement()``."""
        out: list[str] = []
        buf: list[str] = []
        for line in self.sql.splitlines(keepends=True):
            buf.append(line)
            text = "".join(buf)
            if sqlite3.complete_statement(text):
                stripped = _strip_comments(text)
                if stripped:
                    out.append(stripped)
                buf = []
        rest = _strip_comments("".join(buf))
        if rest:
            out.append(rest)
        return out


def _strip_comments(text: str) -> str:
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return "\n".join(lines).strip()


@functools.cache
def load_migrations(dialect: Dialect) -> tuple[Migration, ...]:
    """The migrations shipped for ``dialect``, by version (read once per process).

    Raises:
        StoreSchemaError: ``ERR_PRISM_STORE_SCHEMA`` — the shipped files are not numbered
            1, 2, 3, ... without gaps (a packaging error).
    """
    folder = resources.files("prism.stores").joinpath("migrations", dialect)
    found: list[Migration] = []
    for item in folder.iterdir():
        match = _FILE_RE.match(item.name)
        if match is None:
            continue
        data = item.read_bytes()
        found.append(
            Migration(
                version=int(match.group(1)),
                name=match.group(2),
                sql=data.decode("utf-8"),
                checksum=hashlib.sha256(data).hexdigest(),
            )
        )
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise StoreSchemaError(
            f"Shipped {dialect} migrations are not numbered 1..{len(found)}: "
            f"{[m.version for m in found]}"
        )
    return tuple(found)


def plan_migrations(
    shipped: Sequence[Migration], recorded: Sequence[tuple[int, str]], *, where: str
) -> list[Migration]:
    """Check the recorded migrations against the shipped ones and return those to apply.

    Args:
        shipped: [`load_migrations()`][prism.stores._migrations.load_migrations] of the store's dialect.
        recorded: ``(version, checksum)`` rows of ``prism_schema_migrations``.
        where: The database, for messages (never holds credentials).

    Returns:
        The shipped migrations newer than every recorded one, in order.

    Raises:
        StoreSchemaError: ``ERR_PRISM_STORE_SCHEMA`` — a recorded version newer than or unknown
            to the package, a recorded checksum differing from the shipped file, or a gap.
    """
    by_version = {m.version: m for m in shipped}
    latest = shipped[-1].version if shipped else 0
    versions = sorted(v for v, _ in recorded)
    for version, checksum in sorted(recorded):
        known = by_version.get(version)
        if known is None:
            if version > latest:
                raise StoreSchemaError(
                    f"Store schema of {where} is at version {version}, newer than this package "
                    f"knows ({latest}); upgrade prism-runtime"
                )
            raise StoreSchemaError(f"Store schema of {where} has unknown migration {version}")
        if checksum != known.checksum:
            raise StoreSchemaError(
                f"Store schema of {where}: migration {version} ({known.name}) was altered "
                f"(recorded checksum {checksum[:12]}…, package {known.checksum[:12]}…)"
            )
    if versions != list(range(1, len(versions) + 1)):
        raise StoreSchemaError(f"Store schema of {where} has a gap in its migrations: {versions}")
    return [m for m in shipped if m.version > len(versions)]

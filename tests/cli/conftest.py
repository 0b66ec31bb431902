"""Every ``prism`` command in these tests keeps its sessions under the test's tmp path."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``PRISM_STORE`` and ``XDG_DATA_HOME`` point into ``tmp_path`` (never the user's data dir);
    returns the SQLite file."""
    path = tmp_path / "store" / "sessions.db"
    # an explicit store's folder must exist (only the default location's folder is created)
    path.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("PRISM_STORE", f"sqlite:///{path}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return path

"""What a worker refuses before it starts: a store that is not PostgreSQL, a registry it cannot
import, agents it cannot serve, run options a submitter cannot send; and the version pin."""

from __future__ import annotations

import io
from typing import Any

import pytest

import prism
from prism.cli import main
from prism.errors import PrismConfigError
from prism.runtime.checkpoints import MemoryCheckpointStore
from prism.testing import create_mock_provider

pytest.importorskip("dbos", reason="the DBOS engine needs the `dbos` extra")

from prism.engines.dbos import application_version
from prism.engines.dbos._registry import (
    build_agents,
    check_run_options,
    load_registry,
)


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, err.getvalue()


def test_prism_worker_needs_a_postgresql_store() -> None:
    code, err = _run("worker", "--agents", "dbos_agents:REGISTRY", "--store", "sqlite:///x.db")
    assert code == 2 and "must be a postgresql:// URL" in err


def test_a_registry_that_cannot_be_imported_is_named() -> None:
    with pytest.raises(PrismConfigError, match="no_such_module"):
        load_registry("no_such_module:REGISTRY")
    with pytest.raises(PrismConfigError, match="expected MODULE:ATTR"):
        load_registry("not a spec")


class _Store(MemoryCheckpointStore):
    """A checkpoint store that is also the sessions' store (as PostgresStore is)."""

    async def append(self, *a: Any, **k: Any) -> None: ...

    async def list(self, session_id: str) -> list[Any]:
        return []


def _agent(store: Any, **run_state: Any) -> prism.Agent:
    return prism.create_agent(
        id="a",
        model={"provider": "mock", "model": "m"},
        provider=create_mock_provider(turns=[]),
        store=store,
        run_state=prism.RunStateOptions(store, "r1", **run_state),
    )


def test_agents_a_worker_cannot_serve_are_refused_with_the_reason() -> None:
    store = _Store()
    with pytest.raises(PrismConfigError, match='checkpoint_policy="every-turn"'):
        build_agents({"a": lambda s: _agent(s)}, store)
    with pytest.raises(PrismConfigError, match="has no run_state"):
        build_agents(
            {"a": lambda s: prism.create_agent(id="a", model={"provider": "mock", "model": "m"}, provider=create_mock_provider(turns=[]))},
            store,
        )
    with pytest.raises(PrismConfigError, match="worker's store"):
        build_agents({"a": lambda s: _agent(_Store(), checkpoint_policy="every-turn")}, store)
    with pytest.raises(PrismConfigError, match="factory raised"):
        build_agents({"a": lambda s: 1 / 0}, store)
    served = build_agents({"a": lambda s: _agent(s, checkpoint_policy="every-turn")}, store)
    assert served["a"].definition_revision == "r1"


def test_submitted_options_are_json_and_listed() -> None:
    assert check_run_options({"metadata": {"k": 1}, "limits": {"max_turns": 3}})["metadata"] == {"k": 1}
    with pytest.raises(PrismConfigError, match="allowed: active_skills"):
        check_run_options({"loop": {"strategy": "single-shot"}})
    with pytest.raises(PrismConfigError, match="must be a JSON value"):
        check_run_options({"metadata": {"k": object()}})


def test_the_version_pins_prism_and_every_revision() -> None:
    base = application_version("0.1.0", {"a": "r1", "b": "r1"})
    assert base == application_version("0.1.0", {"b": "r1", "a": "r1"})
    assert base.startswith("prism-0.1.0-")
    assert base != application_version("0.1.0", {"a": "r2", "b": "r1"})
    assert base != application_version("0.2.0", {"a": "r1", "b": "r1"})
    assert base != application_version("0.1.0", {"a": "r1"})

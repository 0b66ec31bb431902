"""``prism.registry``: the ``MODULE:REGISTRY`` loader the worker, ``prism serve`` and evaluations
share — no engine imported — and ``build_registry_agents``, which calls every factory with the
store and says which agent failed and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import prism
from prism.errors import PrismConfigError
from prism.registry import build_registry_agents, check_registry, load_registry
from prism.testing import MemoryCheckpointStore, create_mock_provider


def _agent(store: Any) -> prism.Agent:
    return prism.create_agent(
        id="desk", model={"provider": "mock", "model": "m"}, provider=create_mock_provider(),
        run_state=prism.RunStateOptions(store, "v1"),
    )


def test_a_registry_module_is_loaded_and_its_agents_built_over_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shop_agents.py").write_text(
        "import prism\n"
        "from prism.testing import create_mock_provider\n"
        "def desk(store):\n"
        "    return prism.create_agent(id='desk', model={'provider': 'mock', 'model': 'm'},\n"
        "        provider=create_mock_provider(), run_state=prism.RunStateOptions(store, 'v1'))\n"
        "class Holder:\n"
        "    REGISTRY = {'desk': desk}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "shop_agents", raising=False)
    registry = load_registry("shop_agents:Holder.REGISTRY")
    store = MemoryCheckpointStore()
    agents = build_registry_agents(registry, store)
    assert list(agents) == ["desk"] and isinstance(agents["desk"], prism.Agent)
    assert agents["desk"].config.run_state.checkpoints is store  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("not a spec", "expected MODULE:ATTR"),
        ("no_such_module_here:REGISTRY", "importing no_such_module_here failed"),
        ("prism:NO_SUCH_REGISTRY", "has no attribute 'NO_SUCH_REGISTRY'"),
        ("prism:__version__", "expected a non-empty mapping"),
    ],
)
def test_a_bad_registry_spec_is_a_config_error(spec: str, message: str) -> None:
    with pytest.raises(PrismConfigError, match=message):
        load_registry(spec)


def test_a_factory_that_fails_or_returns_no_agent_is_named() -> None:
    def broken(store: Any) -> prism.Agent:
        raise RuntimeError("no key")

    with pytest.raises(PrismConfigError, match=r"agent 'b': its factory raised RuntimeError: no key"):
        build_registry_agents({"a": _agent, "b": broken}, MemoryCheckpointStore())
    with pytest.raises(PrismConfigError, match=r"agent 'x': the factory returned int, not an Agent"):
        build_registry_agents({"x": lambda store: 3}, MemoryCheckpointStore())  # type: ignore[dict-item,return-value]
    with pytest.raises(PrismConfigError, match="'y' maps to int, not a factory function"):
        check_registry({"y": 3})
    with pytest.raises(PrismConfigError, match="agent names must be non-empty strings"):
        check_registry({"": _agent})


def test_the_engine_offers_the_same_loader_and_the_registry_imports_no_engine() -> None:
    dbos = pytest.importorskip("prism.engines.dbos._registry", reason="needs the dbos extra")
    assert dbos.load_registry is load_registry and dbos.check_registry is check_registry
    code = "import sys, prism.registry; print(any(m.startswith('prism.engines') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

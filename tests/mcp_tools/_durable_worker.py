"""A process that starts or resumes a durable run whose tool is on an MCP server; run as a
script, not collected.

Usage: ``python _durable_worker.py STORE_URL start|resume [RUN_ID VERSION]``; ``MCP_TEST_SCHEMA``
is passed on to the server (``v2`` changes the ``add`` schema). Prints one JSON line: the run's
``status``, ``run_id``, ``version`` and the values of the tool results, or the error's ``code``
and ``message``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from prism.errors import PrismError
from prism.mcp import MCPServerStdio
from prism.providers.base import provider_done, provider_text_delta, provider_tool_call
from prism.providers.mock import create_mock_provider
from prism.runtime.agent import Agent, create_agent
from prism.runtime.durable import RunStateOptions, resume_agent_run
from prism.stores import open_store
from prism.types import ModelConfig

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))
TURNS = [
    [provider_tool_call("call_add", "calc_add", {"a": 20, "b": 22}), provider_done()],
    [provider_text_delta("42"), provider_done()],
]


def build_agent(store: Any, turns: list[Any]) -> Agent:
    server = MCPServerStdio(
        sys.executable,
        [SERVER],
        env={"MCP_TEST_SCHEMA": os.environ.get("MCP_TEST_SCHEMA", "v1")},
        prefix="calc",
        allow=["add"],
    )
    return create_agent(
        id="mcp-desk",
        model=ModelConfig(provider="mock", model="durable"),
        provider=create_mock_provider(turns=turns),
        tools=[server],
        store=store,
        run_state=RunStateOptions(store, "mcp-v1", interrupt_before_tool=True),
    )


async def main(url: str, mode: str, rest: list[str]) -> dict[str, Any]:
    store = await open_store(url)
    try:
        if mode == "start":
            agent = build_agent(store, TURNS[:1])
            result = await agent.create_session().run("add 20 and 22")
        else:
            agent = build_agent(store, TURNS[1:])
            result = await resume_agent_run(
                agent, rest[0], decision="approve", expected_version=int(rest[1])
            )
    except PrismError as exc:
        return {"code": exc.code, "message": str(exc)}
    finally:
        await store.aclose()
    values = [
        part.result
        for message in result.messages
        for part in message.content
        if part.type == "tool_result"
    ]
    return {
        "status": result.status,
        "run_id": result.run_id,
        "version": None if result.run_state is None else result.run_state.version,
        "results": values,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))), flush=True)

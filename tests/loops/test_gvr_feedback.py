"""The revise loop's default feedback says where each error is (issue 21, item 18): a field path
before each message (``items[2].price: Input should be less than 100``), built from pydantic's
``loc`` and JSON Schema's error path, so a small model can fix the right field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

import prism
from prism.artifacts import json_schema_artifact, pydantic_artifact
from prism.loops.gvr import generate_validate_revise_loop
from prism.providers.base import provider_done, provider_text_delta
from prism.providers.mock import create_mock_provider
from prism.types import ModelConfig, message_text


class Item(BaseModel):
    name: str
    price: int = Field(lt=100)


class Order(BaseModel):
    items: list[Item]


BAD = {"items": [{"name": "a", "price": 1}, {"name": "b", "price": 2}, {"price": 150}]}
GOOD = {"items": [{"name": "a", "price": 1}]}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "price": {"type": "integer", "maximum": 99}},
                "required": ["name", "price"],
            },
        }
    },
    "required": ["items"],
}


async def _feedback(callbacks: Any) -> str:
    provider = create_mock_provider(
        turns=[
            [provider_text_delta(json.dumps(BAD)), provider_done()],
            [provider_text_delta(json.dumps(GOOD)), provider_done()],
        ]
    )
    agent = prism.create_agent(
        model=ModelConfig(provider="mock", model="m"),
        provider=provider,
        loop=generate_validate_revise_loop(**callbacks),
    )
    result = await agent.create_session().run("An order, please.")
    assert result.status == "succeeded"
    repair = provider.requests[1].messages[-1]
    assert repair.role == "user"
    return message_text(repair)


async def test_pydantic_feedback_names_the_field_path_i21_18() -> None:
    text = await _feedback(pydantic_artifact(Order))
    assert text.splitlines() == [
        "items[2].name: Field required",
        "items[2].price: Input should be less than 100",
    ]


async def test_json_schema_feedback_names_the_field_path_i21_18() -> None:
    text = await _feedback(json_schema_artifact(SCHEMA))
    assert text.splitlines() == [
        "items[2]: 'name' is a required property",
        "items[2].price: 150 is greater than the maximum of 99",
    ]


@pytest.mark.parametrize(
    ("pointer", "path"),
    [
        (None, None),
        ("", None),
        ("/items/2/price", "items[2].price"),
        ("/0/name", "[0].name"),
        ("/a~1b/c~0d", '["a/b"]["c~d"]'),
        ("/odd key/x", '["odd key"].x'),
        ("/", '[""]'),
        ("free text", "free text"),
    ],
)
def test_field_path_reads_json_pointers_i21_18(pointer: str | None, path: str | None) -> None:
    from prism.loops.gvr import field_path

    assert field_path(pointer) == path
    assert field_path(pointer) == path  # again, as remembered


def test_field_path_remembers_a_bounded_number_of_pointers() -> None:
    from prism.loops import gvr

    for i in range(gvr._FIELD_PATHS_KEPT + 10):
        assert gvr.field_path(f"/k{i}/{i}") == f"k{i}[{i}]"
    assert len(gvr._FIELD_PATHS) <= gvr._FIELD_PATHS_KEPT

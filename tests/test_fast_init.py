"""Frozen slotted dataclasses built slot by slot (a speed trick) behave as their dataclasses do."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any

import pytest

from prism._fast_init import MARKED, _compile, fast_init


def _pair() -> tuple[type, type]:
    def make(decorate: bool) -> type:
        @dataclass(frozen=True, slots=True)
        class Base:
            a: int
            b: str = "b"
            items: list[int] = field(default_factory=list)
            kind: str = field(default="base", init=False)
            seen: list[str] = field(default_factory=list, init=False)
            late: int = field(default=0, kw_only=True)

            def __post_init__(self) -> None:
                if self.a < 0:
                    raise ValueError("a must be positive")
                object.__setattr__(self, "b", self.b.upper())

        return fast_init(Base) if decorate else Base

    return make(False), make(True)


def test_objects_built_either_way_are_equal() -> None:
    plain, fast = _pair()
    for args, kwargs in [((1,), {}), ((2, "x"), {}), ((3,), {"items": [1], "late": 4})]:
        a, b = plain(*args, **kwargs), fast(*args, **kwargs)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
    assert fast(1).items is not fast(1).items  # a fresh default per object


def test_errors_are_those_of_the_dataclass() -> None:
    plain, fast = _pair()
    for cls in (plain, fast):
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
            cls()
        with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
            cls(1, nope=2)
        with pytest.raises(TypeError, match="positional argument"):
            cls(1, "b", [], 5)  # ``late`` is keyword-only
        with pytest.raises(ValueError, match="positive"):
            cls(-1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls(1).a = 2


def test_a_class_it_cannot_build_exactly_is_left_alone() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    for cls in (Mutable, NoSlots):
        init = cls.__init__
        assert fast_init(cls) is cls and cls.__init__ is init


_MODULES = [
    "prism.types._content",
    "prism.types._messages",
    "prism.types._requests",
    "prism.types._tools",
    "prism.types._usage",
    "prism.types._provider_stream",
    "prism.session_entry",
    "prism.events._run",
    "prism.events._provider",
    "prism.events._tools",
    "prism.events._artifacts",
    "prism.artifact_contracts",
]


def _expected_parameters(cls: type) -> list[tuple[str, Any, bool]]:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    ordered = [f for f in fields if not f.kw_only] + [f for f in fields if f.kw_only]
    return [
        (f.name, f.default if f.default is not dataclasses.MISSING else None, f.kw_only)
        for f in ordered
    ]


def test_every_marked_record_takes_its_dataclass_parameters() -> None:
    for name in _MODULES:
        importlib.import_module(name)
    marked = [cls for cls in MARKED if cls.__module__ in _MODULES]
    assert len(marked) >= 50
    for cls in marked:
        params = list(inspect.signature(_compile(cls)).parameters.values())[1:]
        actual = [
            (
                p.name,
                None
                if p.default is inspect.Parameter.empty or repr(p.default) == "<factory>"
                else p.default,
                p.kind is inspect.Parameter.KEYWORD_ONLY,
            )
            for p in params
        ]
        assert actual == _expected_parameters(cls), cls

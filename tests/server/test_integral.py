"""Integral floats bound to int parameters (src/mcpkit/server/_integral.py via signature.bind).

JSON Schema 2020-12 (Validation 6.1.1) makes 1.0 an "integer", so arguments valid against a
tool's inputSchema must bind; found by fuzz/arguments.py (corpus regress-integral-float*)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, TypedDict

import jsonschema
import msgspec
import pytest

from mcpkit.server.signature import ArgumentError, inspect_function


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


class Opts(TypedDict):
    depth: int


class Cat(msgspec.Struct, tag=True):
    lives: int


class Dog(msgspec.Struct, tag=True):
    weight: float


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def _bind(fn: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    sig = inspect_function(fn)
    # the fix must only ever accept what the published schema accepts
    jsonschema.Draft202012Validator(sig.input_schema).validate(arguments)
    return sig.bind(arguments)


def test_plain_int_parameters_take_integral_floats_as_ints() -> None:
    def fn(a: int, b: float = 1.0, s: str = "x") -> None: ...

    bound = _bind(fn, {"a": 0.0, "s": ""})
    assert bound == {"a": 0, "b": 1.0, "s": ""} and type(bound["a"]) is int
    bound = _bind(fn, {"a": -3.0, "b": 2.0})
    assert type(bound["a"]) is int and bound["a"] == -3 and type(bound["b"]) is float
    assert _bind(fn, {"a": 1e20})["a"] == 10**20


def test_nested_ints_take_integral_floats() -> None:
    def fn(
        items: list[int],
        mapping: dict[str, int],
        pair: tuple[int, float],
        point: Point,
        opts: Opts,
        pet: Cat | Dog,
        maybe: int | str | None = None,
        nested: list[list[int]] | None = None,
        bounded: Annotated[int, msgspec.Meta(ge=1, le=3)] = 1,
        level: Level = Level.LOW,
        mode: Literal[1, 2] = 1,
    ) -> None: ...

    bound = _bind(
        fn,
        {
            "items": [0.0, 2.0, 3],
            "mapping": {"k": 4.0},
            "pair": [5.0, 6.0],
            "point": {"x": 7.0, "y": 8.0},
            "opts": {"depth": 9.0},
            "pet": {"type": "Cat", "lives": 9.0},
            "maybe": 10.0,
            "nested": [[11.0]],
            "bounded": 3.0,
            "level": 2.0,
            "mode": 2.0,
        },
    )
    assert bound == {
        "items": [0, 2, 3],
        "mapping": {"k": 4},
        "pair": (5, 6.0),
        "point": Point(x=7, y=8.0),
        "opts": {"depth": 9},
        "pet": Cat(lives=9),
        "maybe": 10,
        "nested": [[11]],
        "bounded": 3,
        "level": Level.HIGH,
        "mode": 2,
    }
    ints = [*bound["items"], bound["mapping"]["k"], bound["pair"][0], bound["point"].x]
    ints += [bound["opts"]["depth"], bound["pet"].lives, bound["maybe"], bound["nested"][0][0]]
    assert all(type(i) is int for i in [*ints, bound["bounded"], bound["mode"]])
    assert type(bound["point"].y) is float and type(bound["pair"][1]) is float
    assert _bind(fn, {**_minimal(), "pet": {"type": "Dog", "weight": 1.0}})["pet"] == Dog(weight=1.0)


def _minimal() -> dict[str, Any]:
    return {"items": [], "mapping": {}, "pair": [1, 1], "point": {"x": 1}, "opts": {"depth": 1}}


def test_floats_stay_floats_where_no_int_is_wanted() -> None:
    def fn(n: int, x: float | int, anything: Any, data: dict[str, Any]) -> None: ...

    # n fails the strict conversion, so the arguments are walked: only n changes
    bound = _bind(fn, {"n": 1.0, "x": 2.0, "anything": 3.0, "data": {"v": 4.0}})
    assert bound == {"n": 1, "x": 2.0, "anything": 3.0, "data": {"v": 4.0}}
    assert [type(bound[k]) for k in ("n", "x", "anything")] == [int, float, float]
    assert type(bound["data"]["v"]) is float


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"a": 1.5}, "Invalid argument 'a': Expected `int`, got `float`"),
        ({"a": True}, "Invalid argument 'a': Expected `int`, got `bool`"),
        ({"a": "1.0"}, "Invalid argument 'a': Expected `int`, got `str`"),
        (
            {"a": 1.0, "items": [1.0, 0.5]},
            "Invalid argument 'items': Expected `int`, got `float` at `items[1]`",
        ),
        ({"a": 4.0, "bounded": 9.0}, "Invalid argument 'bounded': Expected `int` <= 3"),
    ],
)
def test_non_integers_are_still_refused(arguments: dict[str, Any], message: str) -> None:
    def fn(
        a: int, items: list[int] | None = None, bounded: Annotated[int, msgspec.Meta(le=3)] = 1
    ) -> None: ...

    sig = inspect_function(fn)
    assert not jsonschema.Draft202012Validator(sig.input_schema).is_valid(arguments)
    with pytest.raises(ArgumentError) as exc_info:
        sig.bind(arguments)
    assert str(exc_info.value) == message

"""Tests for mcpkit.server.signature: schema generation, argument binding and structured output."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import os
import subprocess
import sys
import timeit
import types
import uuid
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import jsonschema
import msgspec
import pydantic
import pytest

from mcpkit.server.signature import (
    ArgumentError,
    FunctionSignature,
    inspect_function,
    split_docstring,
)

# --------------------------------------------------------------------------------------- fixtures


class Ctx:
    pass


class SubCtx(Ctx):
    pass


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


#: The schema of :class:`Point`, as it appears wherever a Point is (written out, not a $ref).
POINT_SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "number", "default": 0.0}},
    "required": ["x"],
}


@dataclasses.dataclass
class Path:
    name: str
    points: list[Point]


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


class Movie(TypedDict):
    title: str
    year: int
    rating: NotRequired[float]


class Options(TypedDict, total=False):
    verbose: bool
    depth: int


class Address(msgspec.Struct):
    """A postal address."""

    street: str
    zip: str | None = None


class Person(msgspec.Struct):
    name: str
    address: Address


class User(pydantic.BaseModel):
    name: str
    age: int = 0


class Team(pydantic.BaseModel):
    lead: User
    members: list[User] = []


class FakeContent:
    """Stands in for an MCP content class (detected through its module name)."""


FakeContent.__module__ = "mcpkit.protocol.types.fake"


inspect_empty: Any = object()


def make_fn(
    annotation: Any = inspect_empty, *, ret: Any = inspect_empty, default: Any = inspect_empty
) -> Callable[..., Any]:
    """A function ``fn(x)`` with the given annotation/default and return annotation."""
    if default is inspect_empty:

        def fn(x):
            return x

    else:

        def fn(x=default):
            return x

    if annotation is not inspect_empty:
        fn.__annotations__["x"] = annotation
    if ret is not inspect_empty:
        fn.__annotations__["return"] = ret
    return fn


def param_schema(sig: FunctionSignature, name: str = "x") -> Any:
    return sig.input_schema["properties"][name]


def walk_keys(obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key, value
            yield from walk_keys(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from walk_keys(item)


# ----------------------------------------------------------------------------- simple schemas


def test_echo_signature_exact() -> None:
    def echo(text: str) -> str:
        return text

    sig = inspect_function(echo)
    assert sig.input_schema == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    assert sig.output_schema is None
    assert sig.wraps_output is False
    assert sig.context_param is None
    assert sig.is_async is False
    assert sig.bind({"text": "hi"}) == {"text": "hi"}


def test_no_parameters() -> None:
    def ping() -> None:
        return None

    sig = inspect_function(ping)
    assert sig.input_schema == {"type": "object", "properties": {}}
    assert sig.bind(None) == {}
    assert sig.bind({"extra": 1}) == {}


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "minItems": 2,
                "maxItems": 2,
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
            },
        ),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | str | None, {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (bytes, {"type": "string", "contentEncoding": "base64"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (datetime.datetime, {"type": "string"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (Annotated[str, "The city"], {"type": "string", "description": "The city"}),
        (
            Annotated[int, msgspec.Meta(description="Days", ge=1, le=7)],
            {"description": "Days", "type": "integer", "minimum": 1, "maximum": 7},
        ),
        (
            Annotated[str, msgspec.Meta(min_length=2, pattern="^[a-z]+$")],
            {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
        ),
        (
            Annotated[int, pydantic.Field(description="Count", ge=0, lt=10)],
            {"type": "integer", "minimum": 0, "exclusiveMaximum": 10, "description": "Count"},
        ),
        (
            Annotated[list[str], pydantic.Field(min_length=1, max_length=3)],
            {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        ),
    ],
)
def test_parameter_schema(annotation: Any, expected: dict[str, Any]) -> None:
    sig = inspect_function(make_fn(annotation))
    assert param_schema(sig) == expected
    assert sig.input_schema["required"] == ["x"]
    assert "$defs" not in sig.input_schema
    jsonschema.Draft202012Validator.check_schema(sig.input_schema)


@pytest.mark.parametrize("annotation", [inspect_empty, object, Any])
def test_untyped_parameter_accepts_anything(annotation: Any) -> None:
    sig = inspect_function(make_fn(annotation))
    assert param_schema(sig) == {}
    assert sig.bind({"x": [1, {"a": None}]}) == {"x": [1, {"a": None}]}


def test_enum_schema_and_binding() -> None:
    def paint(color: Color, level: Level = Level.LOW) -> None: ...

    sig = inspect_function(paint)
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "color": {"enum": ["green", "red"]},
            "level": {"enum": [1, 2], "default": 1},
        },
        "required": ["color"],
    }
    assert sig.bind({"color": "red", "level": 2}) == {"color": Color.RED, "level": Level.HIGH}
    assert sig.bind({"color": "green"}) == {"color": Color.GREEN, "level": Level.LOW}
    with pytest.raises(ArgumentError, match="Invalid argument 'color': Invalid enum value 'blue'"):
        sig.bind({"color": "blue"})


def test_literal_binding() -> None:
    def sort(order: Literal["asc", "desc"] = "asc") -> None: ...

    sig = inspect_function(sort)
    assert param_schema(sig, "order") == {"enum": ["asc", "desc"], "default": "asc"}
    assert sig.bind({"order": "desc"}) == {"order": "desc"}
    with pytest.raises(ArgumentError, match="Invalid argument 'order'"):
        sig.bind({"order": "up"})


def test_optional_with_default_none() -> None:
    def search(query: str, limit: int | None = None) -> None: ...

    sig = inspect_function(search)
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["query"],
    }
    assert sig.bind({"query": "q"}) == {"query": "q", "limit": None}
    assert sig.bind({"query": "q", "limit": None}) == {"query": "q", "limit": None}
    assert sig.bind({"query": "q", "limit": 3}) == {"query": "q", "limit": 3}


def test_defaults_are_filled_and_shared_like_python() -> None:
    shared: list[str] = ["a"]

    def fn(
        n: int = 5, ratio: float = 0.5, flag: bool = True, name: str = "x", tags: list[str] = shared
    ) -> None: ...

    sig = inspect_function(fn)
    props = sig.input_schema["properties"]
    assert [props[k]["default"] for k in ("n", "ratio", "flag", "name", "tags")] == [5, 0.5, True, "x", ["a"]]
    assert "required" not in sig.input_schema
    bound = sig.bind({})
    assert bound == {"n": 5, "ratio": 0.5, "flag": True, "name": "x", "tags": ["a"]}
    assert bound["tags"] is shared  # exactly what a plain Python call would receive
    assert sig.bind({"n": 1, "tags": ["b"]})["tags"] == ["b"]


def test_unserializable_default_is_left_out_of_schema() -> None:
    sentinel = object()

    def fn(x: Any = sentinel) -> None: ...

    sig = inspect_function(fn)
    assert param_schema(sig) == {}
    assert sig.bind({})["x"] is sentinel


# ---------------------------------------------------------------------------- composite types


def test_typeddict_total_and_partial() -> None:
    def add(movie: Movie, options: Options) -> None: ...

    sig = inspect_function(add)
    assert "$defs" not in sig.input_schema  # inlined: hosts that drop $defs still see the fields
    defs = sig.input_schema["properties"]
    assert defs["movie"] == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "year": {"type": "integer"},
            "rating": {"type": "number"},
        },
        "required": ["title", "year"],
    }
    assert defs["options"] == {
        "type": "object",
        "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
    }
    bound = sig.bind({"movie": {"title": "Heat", "year": 1995}, "options": {}})
    assert bound == {"movie": {"title": "Heat", "year": 1995}, "options": {}}
    with pytest.raises(ArgumentError) as exc_info:
        sig.bind({"movie": {"title": "Heat"}, "options": {}})
    assert str(exc_info.value) == "Invalid argument 'movie': Object missing required field `year`"


def test_nested_dataclasses() -> None:
    def draw(path: Path) -> None: ...

    sig = inspect_function(draw)
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "path": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "points": {
                        "type": "array",
                        "items": POINT_SCHEMA,
                    },
                },
                "required": ["name", "points"],
            }
        },
        "required": ["path"],
    }
    bound = sig.bind({"path": {"name": "p", "points": [{"x": 1}, {"x": 2, "y": 3}]}})
    assert bound == {"path": Path("p", [Point(1, 0.0), Point(2, 3.0)])}
    assert isinstance(bound["path"].points[1].y, float)
    with pytest.raises(ArgumentError) as exc_info:
        sig.bind({"path": {"name": "p", "points": [{"x": "1"}]}})
    assert str(exc_info.value) == ("Invalid argument 'path': Expected `int`, got `str` at `path.points[0].x`")


def test_nested_structs_keep_docstring_description() -> None:
    def mail(person: Person) -> None: ...

    sig = inspect_function(mail)
    assert sig.input_schema["properties"]["person"]["properties"]["address"] == {
        "description": "A postal address.",
        "type": "object",
        "properties": {
            "street": {"type": "string"},
            "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["street"],
    }
    bound = sig.bind({"person": {"name": "Ann", "address": {"street": "Main"}}})
    assert bound == {"person": Person("Ann", Address("Main"))}


def test_same_class_name_in_two_scopes() -> None:
    def make() -> type:
        @dataclasses.dataclass
        class Point:
            label: str

        return Point

    other = make()

    def fn(a, b):
        return None

    fn.__annotations__.update(a=Point, b=other)  # `other` is local, a string annotation can't see it
    sig = inspect_function(fn)
    jsonschema.Draft202012Validator.check_schema(sig.input_schema)
    properties = sig.input_schema["properties"]
    assert properties["a"] == POINT_SCHEMA and list(properties["b"]["properties"]) == ["label"]
    sample = {"a": {"x": 1}, "b": {"label": "l"}}
    jsonschema.validate(sample, sig.input_schema, cls=jsonschema.Draft202012Validator)
    assert sig.bind(sample) == {"a": Point(1), "b": other("l")}


def test_special_scalars_conversion() -> None:
    def fn(when: datetime.datetime, day: datetime.date, id: uuid.UUID, blob: bytes) -> None: ...

    sig = inspect_function(fn)
    bound = sig.bind(
        {
            "when": "2024-05-01T12:30:00Z",
            "day": "2024-05-01",
            "id": "12345678-1234-5678-1234-567812345678",
            "blob": "aGVsbG8=",
        }
    )
    assert bound == {
        "when": datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC),
        "day": datetime.date(2024, 5, 1),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "blob": b"hello",
    }
    with pytest.raises(ArgumentError, match="Invalid argument 'when'"):
        sig.bind({"when": "yesterday", "day": "2024-05-01", "id": str(uuid.uuid4()), "blob": ""})


def test_containers_conversion() -> None:
    def fn(pair: tuple[int, str], tags: set[str], scores: dict[str, float]) -> None: ...

    sig = inspect_function(fn)
    bound = sig.bind({"pair": [1, "a"], "tags": ["x", "x", "y"], "scores": {"a": 1}})
    assert bound == {"pair": (1, "a"), "tags": {"x", "y"}, "scores": {"a": 1.0}}
    with pytest.raises(ArgumentError, match="Invalid argument 'pair'"):
        sig.bind({"pair": [1], "tags": [], "scores": {}})


# ------------------------------------------------------------------------------------ pydantic


def test_pydantic_model_parameter() -> None:
    def create(user: User, note: str = "") -> None: ...

    sig = inspect_function(create)
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer", "default": 0}},
                "required": ["name"],
            },
            "note": {"type": "string", "default": ""},
        },
        "required": ["user"],
    }
    bound = sig.bind({"user": {"name": "Ann", "age": 30}})
    assert bound == {"user": User(name="Ann", age=30), "note": ""}
    with pytest.raises(ArgumentError) as exc_info:
        sig.bind({"user": {"age": 3}})
    assert str(exc_info.value) == "Invalid argument 'user': Field required at `user.name`"


def test_nested_pydantic_models_and_containers() -> None:
    def plan(team: Team, extra: list[User] | None = None) -> None: ...

    sig = inspect_function(plan)
    schema = sig.input_schema
    user = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "default": 0}},
        "required": ["name"],
    }
    assert "$defs" not in schema
    assert schema["properties"]["team"]["properties"]["lead"] == user
    assert schema["properties"]["extra"] == {
        "anyOf": [{"type": "array", "items": user}, {"type": "null"}],
        "default": None,
    }
    assert not any(key == "title" and isinstance(v, str) for key, v in walk_keys(schema))
    bound = sig.bind({"team": {"lead": {"name": "A"}, "members": [{"name": "B"}]}, "extra": [{"name": "C"}]})
    assert bound["team"] == Team(lead=User(name="A"), members=[User(name="B")])
    assert bound["extra"] == [User(name="C")]
    assert sig.bind({"team": {"lead": {"name": "A"}}})["extra"] is None
    with pytest.raises(ArgumentError, match=r"Invalid argument 'extra': .* at `extra\[0\]\.name`"):
        sig.bind({"team": {"lead": {"name": "A"}}, "extra": [{}]})


class Stay(pydantic.BaseModel):
    nights: int
    rate: float = 1.0
    day: datetime.date | None = None
    room: uuid.UUID | None = None


def test_pydantic_arguments_are_checked_as_the_schema_says() -> None:
    """pydantic's lax mode took "2" and true for the integer `age` (found by fuzzing): the
    arguments are now checked in its strict JSON mode, as the published schema reads them."""

    def book(stay: Stay, guests: Annotated[list[int], pydantic.AfterValidator(sorted)]) -> None: ...

    sig = inspect_function(book)
    for nights in ("2", True):
        with pytest.raises(ArgumentError, match=r"Input should be a valid integer at `stay\.nights`"):
            sig.bind({"stay": {"nights": nights}, "guests": []})
    with pytest.raises(ArgumentError, match=r"Invalid argument 'guests': Input should be a valid integer"):
        sig.bind({"stay": {"nights": 1}, "guests": ["3"]})
    with pytest.raises(ArgumentError, match="Input should be a valid integer"):
        sig.bind({"stay": {"nights": 1.5}, "guests": []})
    # JSON's own spellings still work: an integral float is an integer to JSON Schema, an int
    # a float, dates and UUIDs strings.
    room = "12345678-1234-5678-1234-567812345678"
    bound = sig.bind(
        {"stay": {"nights": 2.0, "rate": 3, "day": "2026-12-02", "room": room}, "guests": [3.0, 1]}
    )
    assert bound["stay"] == Stay(nights=2, rate=3.0, day=datetime.date(2026, 12, 2), room=uuid.UUID(room))
    assert type(bound["stay"].nights) is int and bound["guests"] == [1, 3]
    # A Python caller's objects (not decoded JSON) are still read by pydantic itself.
    assert sig.bind({"stay": Stay(nights=1), "guests": []})["stay"] == Stay(nights=1)


def test_pydantic_field_as_default() -> None:
    def fn(
        n: int = pydantic.Field(3, description="How many", ge=1),
        items: list[int] = pydantic.Field(default_factory=list),
        name: str = pydantic.Field(description="Required name"),
    ) -> None: ...

    sig = inspect_function(fn)
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "description": "How many", "default": 3},
            "items": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string", "description": "Required name"},
        },
        "required": ["name"],
    }
    first, second = sig.bind({"name": "a"}), sig.bind({"name": "b"})
    assert first == {"n": 3, "items": [], "name": "a"}
    assert first["items"] is not second["items"]
    with pytest.raises(ArgumentError, match=r"Invalid argument 'n': Expected `int` >= 1"):
        sig.bind({"name": "a", "n": 0})


def test_pydantic_specific_annotations_use_pydantic() -> None:
    def shout(text: Annotated[str, pydantic.AfterValidator(str.upper), "Text to shout"]) -> str:
        return text

    sig = inspect_function(shout)
    assert sig.input_schema == {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to shout"}},
        "required": ["text"],
    }
    assert sig.bind({"text": "hi"}) == {"text": "HI"}
    with pytest.raises(ArgumentError, match="Invalid argument 'text': Input should be a valid string"):
        sig.bind({"text": 1})


def test_pydantic_is_not_imported_by_the_module() -> None:
    code = (
        "import sys, dataclasses\n"
        "from mcpkit.server.signature import inspect_function\n"
        "@dataclasses.dataclass\n"
        "class P:\n"
        "    x: int\n"
        "def f(p: P, n: int = 1) -> P: ...\n"
        "sig = inspect_function(f)\n"
        "assert sig.bind({'p': {'x': 1}}) == {'p': P(1), 'n': 1}\n"
        "assert sig.structured(P(2)) == {'x': 2}\n"
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------------- strictness


def test_strict_numbers_but_ints_for_floats() -> None:
    def fn(count: int, ratio: float) -> None: ...

    sig = inspect_function(fn)
    bound = sig.bind({"count": 2, "ratio": 3})
    assert bound == {"count": 2, "ratio": 3.0}
    assert type(bound["ratio"]) is float
    for bad, message in [
        ({"count": "5", "ratio": 1.0}, "Invalid argument 'count': Expected `int`, got `str`"),
        ({"count": True, "ratio": 1.0}, "Invalid argument 'count': Expected `int`, got `bool`"),
        ({"count": 1.5, "ratio": 1.0}, "Invalid argument 'count': Expected `int`, got `float`"),
        ({"count": 1, "ratio": "1.0"}, "Invalid argument 'ratio': Expected `float`, got `str`"),
        ({"count": 1, "ratio": None}, "Invalid argument 'ratio': Expected `float`, got `null`"),
    ]:
        with pytest.raises(ArgumentError) as exc_info:
            sig.bind(bad)
        assert str(exc_info.value) == message


def test_constraints_are_enforced() -> None:
    def fn(
        days: Annotated[int, msgspec.Meta(ge=1, le=7)],
        code: Annotated[str, pydantic.Field(pattern="^[A-Z]{3}$")] = "ABC",
    ) -> None: ...

    sig = inspect_function(fn)
    assert sig.bind({"days": 7}) == {"days": 7, "code": "ABC"}
    with pytest.raises(ArgumentError) as exc_info:
        sig.bind({"days": 8})
    assert str(exc_info.value) == "Invalid argument 'days': Expected `int` <= 7"
    with pytest.raises(ArgumentError, match="Invalid argument 'code'"):
        sig.bind({"days": 1, "code": "abc"})


def test_fast_path_edge_cases() -> None:
    class Text(str):
        pass

    def fn(text: str, n: int = 1, flag: bool = False, ratio: float = 1.0) -> None: ...

    sig = inspect_function(fn)
    assert sig.bind({"text": "a"}) == {"text": "a", "n": 1, "flag": False, "ratio": 1.0}
    # str subclasses and non-dict mappings are handled by the general path
    assert sig.bind({"text": Text("a")}) == {"text": "a", "n": 1, "flag": False, "ratio": 1.0}
    assert sig.bind(types.MappingProxyType({"text": "b", "ratio": 2})) == {
        "text": "b",
        "n": 1,
        "flag": False,
        "ratio": 2.0,
    }
    with pytest.raises(ArgumentError, match="Invalid argument 'flag': Expected `bool`, got `int`"):
        sig.bind({"text": "a", "flag": 1})
    with pytest.raises(ArgumentError, match="Invalid argument 'ratio': Number out of range"):
        sig.bind({"text": "a", "ratio": 10**400})


# ------------------------------------------------------------------------------------- errors


def test_error_messages() -> None:
    def forecast(city: str, days: int, units: str = "metric") -> None: ...

    sig = inspect_function(forecast)
    cases: list[tuple[Any, str]] = [
        ({"days": 3}, "Missing required argument 'city'"),
        ({}, "Missing required arguments 'city', 'days'"),
        (None, "Missing required arguments 'city', 'days'"),
        ({"city": "Paris", "days": "3"}, "Invalid argument 'days': Expected `int`, got `str`"),
        ([1, 2], "Invalid arguments: Expected `object`, got `array`"),
    ]
    for arguments, message in cases:
        with pytest.raises(ArgumentError) as exc_info:
            sig.bind(arguments)
        assert str(exc_info.value) == message


def test_unknown_arguments_are_ignored() -> None:
    def fn(a: int, p: Point | None = None) -> None: ...

    sig = inspect_function(fn)
    assert sig.bind({"a": 1, "zzz": 2}) == {"a": 1, "p": None}
    assert sig.bind({"a": 1, "p": {"x": 1, "zzz": 2}}) == {"a": 1, "p": Point(1)}


# ----------------------------------------------------------------------------- context / kinds


def test_context_parameter_detection() -> None:
    def tool(city: str, ctx: Ctx) -> str:
        return city

    def tool_optional(ctx: Ctx | None = None, *, city: str) -> str:
        return city

    def tool_sub(city: str, context: Optional[SubCtx]) -> str:  # noqa: UP045
        return city

    for fn, name in [(tool, "ctx"), (tool_optional, "ctx"), (tool_sub, "context")]:
        sig = inspect_function(fn, context_types=(Ctx,))
        assert sig.context_param == name
        assert sig.input_schema == {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }
        # a client can't smuggle a value for the context parameter in
        assert sig.bind({"city": "Oslo", name: "evil"}) == {"city": "Oslo"}


def test_context_parameter_errors() -> None:
    def two(a: Ctx, b: Ctx) -> None: ...

    with pytest.raises(TypeError, match="two context parameters"):
        inspect_function(two, context_types=(Ctx,))

    def plain(ctx: Ctx) -> None: ...

    with pytest.raises(TypeError, match="Unsupported type for parameter 'ctx'"):
        inspect_function(plain)


def test_rejected_parameter_kinds() -> None:
    def star(*args: int) -> None: ...

    def kwargs(**kw: int) -> None: ...

    def underscore(_secret: str) -> None: ...

    def positional(a: int, /) -> None: ...

    with pytest.raises(TypeError, match=r"\*args is not supported"):
        inspect_function(star)
    with pytest.raises(TypeError, match=r"\*\*kw is not supported"):
        inspect_function(kwargs)
    with pytest.raises(TypeError, match="underscore"):
        inspect_function(underscore)
    with pytest.raises(TypeError, match="positional-only"):
        inspect_function(positional)


def test_string_annotations_are_resolved() -> None:
    # this module uses `from __future__ import annotations`, so every annotation is a string
    def fn(p: Point, n: int | None = None) -> None: ...

    assert isinstance(fn.__annotations__["p"], str)
    assert inspect_function(fn).bind({"p": {"x": 1}}) == {"p": Point(1), "n": None}


def test_unresolvable_annotation() -> None:
    def fn(x: DoesNotExist) -> None: ...  # noqa: F821

    with pytest.raises(TypeError, match="Cannot resolve the type annotations of 'fn'"):
        inspect_function(fn)


async def test_async_detection() -> None:
    async def fetch(url: str, timeout: float = 1.0) -> str:
        return url

    def sync(url: str) -> str:
        return url

    class AsyncCallable:
        async def __call__(self, url: str) -> str:
            return url

    class SyncCallable:
        def __call__(self, url: str) -> str:
            return url

    assert inspect_function(fetch).is_async
    assert not inspect_function(sync).is_async
    assert inspect_function(functools.partial(fetch, timeout=2.0)).is_async
    assert not inspect_function(functools.partial(sync)).is_async
    assert inspect_function(AsyncCallable()).is_async
    assert not inspect_function(SyncCallable()).is_async
    assert await AsyncCallable()(**inspect_function(AsyncCallable()).bind({"url": "u"})) == "u"


def test_partial_and_callable_objects() -> None:
    def fetch(url: str, retries: int, verbose: bool = False) -> None:
        """Fetch.

        Args:
            url: The URL.
        """

    sig = inspect_function(functools.partial(fetch, retries=3))
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The URL."},
            "verbose": {"type": "boolean", "default": False},
        },
        "required": ["url"],
    }

    class Greeter:
        def __call__(self, name: str) -> str:
            return name

    assert inspect_function(Greeter()).input_schema["properties"] == {"name": {"type": "string"}}


# ---------------------------------------------------------------------------- structured output


@pytest.mark.parametrize(
    "ret",
    [
        str,
        bytes,
        None,
        Any,
        str | None,
        FakeContent,
        list[FakeContent],
        FakeContent | None,
        list[FakeContent | str],
        Annotated[str, "text"],
        object,
        list[object],  # msgspec can't describe it; must not depend on pydantic being imported
    ],
)
def test_unstructured_return_types(ret: Any) -> None:
    sig = inspect_function(make_fn(int, ret=ret))
    assert sig.output_schema is None
    assert sig.wraps_output is False


def test_unannotated_and_unsupported_returns_are_unstructured() -> None:
    assert inspect_function(make_fn(int)).output_schema is None

    class Opaque:
        pass

    assert inspect_function(make_fn(int, ret=Opaque)).output_schema is None
    with pytest.raises(TypeError):
        inspect_function(make_fn(int, ret=Opaque), structured_output=True)


@pytest.mark.parametrize(
    ("ret", "result_schema"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ],
)
def test_wrapped_output(ret: Any, result_schema: dict[str, Any]) -> None:
    sig = inspect_function(make_fn(int, ret=ret))
    assert sig.wraps_output is True
    assert sig.output_schema == {
        "type": "object",
        "properties": {"result": result_schema},
        "required": ["result"],
    }


def test_object_output_is_not_wrapped() -> None:
    def point() -> Point:
        return Point(1, 2.0)

    sig = inspect_function(point)
    assert sig.wraps_output is False
    assert sig.output_schema == POINT_SCHEMA
    assert sig.structured(Point(1, 2.0)) == {"x": 1, "y": 2.0}

    def mapping() -> dict[str, int]:
        return {}

    sig = inspect_function(mapping)
    assert sig.output_schema == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert sig.structured({"a": 1}) == {"a": 1}

    def movie() -> Movie:
        return {"title": "t", "year": 1}

    sig = inspect_function(movie)
    assert sig.wraps_output is False
    assert sig.output_schema is not None and sig.output_schema["required"] == ["title", "year"]
    assert sig.structured({"title": "t", "year": 1}) == {"title": "t", "year": 1}


def test_nested_output_is_inlined_and_recursive_output_keeps_defs() -> None:
    def path() -> Path:
        return Path("p", [])

    sig = inspect_function(path)
    assert sig.output_schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "points": {
                "type": "array",
                "items": POINT_SCHEMA,
            },
        },
        "required": ["name", "points"],
    }

    def tree() -> Node:
        return Node(1)

    sig = inspect_function(tree)
    assert sig.output_schema is not None
    assert sig.output_schema["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
        "default": [],
    }
    assert "Node" in sig.output_schema["$defs"]
    value = sig.structured(Node(1, [Node(2)]))
    assert value == {"value": 1, "children": [{"value": 2, "children": []}]}
    jsonschema.validate(value, sig.output_schema, cls=jsonschema.Draft202012Validator)


def test_optional_object_output_is_wrapped() -> None:
    def maybe() -> Point | None:
        return None

    sig = inspect_function(maybe)
    assert sig.wraps_output is True
    assert sig.output_schema == {
        "type": "object",
        "properties": {
            "result": {
                "anyOf": [
                    POINT_SCHEMA,
                    {"type": "null"},
                ]
            }
        },
        "required": ["result"],
    }
    assert sig.structured(None) == {"result": None}
    assert sig.structured(Point(1)) == {"result": {"x": 1, "y": 0.0}}


def test_struct_enum_and_pydantic_outputs() -> None:
    def person() -> Person:
        return Person("a", Address("s"))

    sig = inspect_function(person)
    assert sig.wraps_output is False
    assert sig.structured(Person("a", Address("s"))) == {
        "name": "a",
        "address": {"street": "s", "zip": None},
    }

    def color() -> Color:
        return Color.RED

    sig = inspect_function(color)
    assert sig.wraps_output is True
    assert sig.output_schema == {
        "type": "object",
        "properties": {"result": {"enum": ["green", "red"]}},
        "required": ["result"],
    }
    assert sig.structured(Color.RED) == {"result": "red"}

    def team() -> Team:
        return Team(lead=User(name="a"))

    sig = inspect_function(team)
    assert sig.wraps_output is False
    user = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "default": 0}},
        "required": ["name"],
    }
    assert sig.output_schema == {
        "type": "object",
        "properties": {"lead": user, "members": {"type": "array", "items": user, "default": []}},
        "required": ["lead"],
    }
    assert sig.structured(Team(lead=User(name="a"))) == {
        "lead": {"name": "a", "age": 0},
        "members": [],
    }

    def users() -> list[User]:
        return []

    sig = inspect_function(users)
    assert sig.wraps_output is True
    assert sig.structured([User(name="b", age=2)]) == {"result": [{"name": "b", "age": 2}]}


def test_structured_values_are_json_builtins() -> None:
    def stamp() -> dict[str, Any]:
        return {}

    sig = inspect_function(stamp)
    value = {
        "when": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "id": uuid.UUID(int=1),
        "tags": {"a"},
        "blob": b"hi",
        1: "int key",
    }
    assert sig.structured(value) == {
        "when": "2024-01-02T03:04:05Z",
        "id": "00000000-0000-0000-0000-000000000001",
        "tags": ["a"],
        "blob": "aGk=",
        "1": "int key",
    }
    assert sig.structured({"pair": (1, 2)}) in ({"pair": [1, 2]}, {"pair": (1, 2)})  # both JSON-able


def test_structured_output_flag() -> None:
    def text() -> str:
        return "hi"

    forced = inspect_function(text, structured_output=True)
    assert forced.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
    }
    assert forced.structured("hi") == {"result": "hi"}

    def number() -> int:
        return 1

    assert inspect_function(number, structured_output=False).output_schema is None

    def untyped():
        return 1

    forced = inspect_function(untyped, structured_output=True)
    assert forced.output_schema == {"type": "object", "properties": {"result": {}}, "required": ["result"]}

    def content() -> FakeContent:
        return FakeContent()

    # content is never structure, even when forced
    assert inspect_function(content, structured_output=True).output_schema is None


# ---------------------------------------------------------------------------------- docstrings


def test_google_docstring() -> None:
    def forecast(city: str, days: int = 3, units: Annotated[str, "Unit system"] = "metric") -> str:
        """Get the weather forecast.

        Uses the national weather service.

        Args:
            city (str): The city name,
                e.g. "Paris".
            days: Number of days.
            units: Ignored because Annotated wins.
            **kwargs: Not a parameter.

        Returns:
            The forecast text.

        Raises:
            ValueError: never.
        """
        return city

    description, params = split_docstring(forecast)
    assert description == (
        "Get the weather forecast.\n\nUses the national weather service.\n\n"
        "Returns:\n    The forecast text.\n\nRaises:\n    ValueError: never."
    )
    assert params == {
        "city": 'The city name, e.g. "Paris".',
        "days": "Number of days.",
        "units": "Ignored because Annotated wins.",
        "kwargs": "Not a parameter.",
    }
    props = inspect_function(forecast).input_schema["properties"]
    assert props["city"] == {"type": "string", "description": 'The city name, e.g. "Paris".'}
    assert props["days"] == {"type": "integer", "description": "Number of days.", "default": 3}
    assert props["units"]["description"] == "Unit system"


def test_rest_docstring() -> None:
    def convert(amount: float, currency: str) -> float:
        """Convert money.

        :param amount: The amount
            to convert.
        :type amount: float
        :param str currency: ISO currency code.
        :returns: the converted amount
        """
        return amount

    description, params = split_docstring(convert)
    assert description == "Convert money.\n\n:returns: the converted amount"
    assert params == {"amount": "The amount to convert.", "currency": "ISO currency code."}
    props = inspect_function(convert).input_schema["properties"]
    assert props["currency"]["description"] == "ISO currency code."


def test_docstring_edge_cases() -> None:
    def bare(x: int) -> None: ...

    def only_args(x: int) -> None:
        """
        Args:
            x: the x.
        """

    def summary_only(x: int) -> None:
        """Just a summary."""

    assert split_docstring(bare) == (None, {})
    assert split_docstring(only_args) == (None, {"x": "the x."})
    assert split_docstring(summary_only) == ("Just a summary.", {})
    assert split_docstring(functools.partial(summary_only, x=1)) == ("Just a summary.", {})


# ----------------------------------------------------------------------- JSON Schema validity


def _sample_functions() -> list[tuple[Callable[..., Any], dict[str, Any]]]:
    def scalars(s: str, i: int, f: float, b: bool, n: None = None) -> int:
        return 0

    def containers(
        xs: list[int],
        t: tuple[int, str],
        u: set[str],
        d: dict[str, float],
        o: Optional[int] = None,  # noqa: UP045
    ) -> list[str]:
        return []

    def choices(c: Color, lv: Level, lit: Literal["a", 1], un: int | str = 1) -> Color:
        return c

    def structured(p: Path, m: Movie, opts: Options, person: Person) -> Path:
        return p

    def pyd(team: Team, user: User | None = None) -> Team:
        return team

    def special(when: datetime.datetime, id: uuid.UUID, blob: bytes, day: datetime.date) -> dict[str, Any]:
        return {}

    def constrained(
        a: Annotated[int, msgspec.Meta(ge=0, le=10, description="a")],
        b: Annotated[str, pydantic.Field(min_length=1, max_length=5, description="b")],
        c: Annotated[float, "plain"] = 1.5,
    ) -> Point | None:
        return None

    def recursive(node: Node) -> Node:
        return node

    def title_property(title: str, item: Movie) -> Movie:
        return item

    return [
        (scalars, {"s": "x", "i": 1, "f": 2, "b": True}),
        (containers, {"xs": [1], "t": [1, "a"], "u": ["a"], "d": {"k": 1.5}, "o": None}),
        (choices, {"c": "red", "lv": 2, "lit": 1, "un": "s"}),
        (
            structured,
            {
                "p": {"name": "n", "points": [{"x": 1, "y": 2.5}]},
                "m": {"title": "t", "year": 2000, "rating": 4.5},
                "opts": {"verbose": True},
                "person": {"name": "a", "address": {"street": "s", "zip": "123"}},
            },
        ),
        (pyd, {"team": {"lead": {"name": "a"}, "members": [{"name": "b", "age": 3}]}, "user": None}),
        (
            special,
            {
                "when": "2024-01-01T00:00:00+00:00",
                "id": "12345678-1234-5678-1234-567812345678",
                "blob": "aGk=",
                "day": "2024-01-01",
            },
        ),
        (constrained, {"a": 3, "b": "abc", "c": 2}),
        (recursive, {"node": {"value": 1, "children": [{"value": 2}]}}),
        (title_property, {"title": "t", "item": {"title": "t", "year": 1}}),
    ]


@pytest.mark.parametrize(("fn", "sample"), _sample_functions(), ids=lambda v: getattr(v, "__name__", ""))
def test_schemas_are_valid_2020_12(fn: Callable[..., Any], sample: dict[str, Any]) -> None:
    sig = inspect_function(fn)
    validator = jsonschema.Draft202012Validator
    validator.check_schema(sig.input_schema)
    validator(sig.input_schema, format_checker=validator.FORMAT_CHECKER).validate(sample)
    assert sig.input_schema["type"] == "object"
    # a "title" keyword has a string value; a property called "title" maps to a schema
    assert not any(key == "title" and isinstance(v, str) for key, v in walk_keys(sig.input_schema))
    sig.bind(sample)  # the sample is accepted by the binder as well
    assert sig.output_schema is not None
    validator.check_schema(sig.output_schema)
    assert sig.output_schema["type"] == "object"


def test_title_property_is_kept_but_title_keywords_dropped() -> None:
    def fn(title: str, item: Movie) -> None: ...

    schema = inspect_function(fn).input_schema
    assert "title" in schema["properties"]
    assert "title" in schema["properties"]["item"]["properties"]
    assert "title" not in schema["properties"]["item"]


def test_invalid_samples_are_rejected_by_both() -> None:
    def fn(days: Annotated[int, msgspec.Meta(ge=1)], color: Color) -> None: ...

    sig = inspect_function(fn)
    validator = jsonschema.Draft202012Validator(sig.input_schema)
    for bad in [{"days": 0, "color": "red"}, {"days": 1, "color": "blue"}, {"days": "1", "color": "red"}]:
        assert not validator.is_valid(bad)
        with pytest.raises(ArgumentError):
            sig.bind(bad)


# -------------------------------------------------------------------------------- performance


def test_bind_is_fast() -> None:
    def echo(text: str) -> str:
        return text

    bind = inspect_function(echo).bind
    arguments = {"text": "hello"}
    number = 20_000
    per_call = min(timeit.repeat(lambda: bind(arguments), number=number, repeat=5)) / number
    assert per_call < 5e-6, f"bind() took {per_call * 1e6:.2f} µs"

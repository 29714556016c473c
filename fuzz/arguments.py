"""Tool argument binding against the schemas generated from Python signatures.

A tool's ``inputSchema`` is generated from its signature, and ``tools/call`` arguments are
bound to the same signature. The two must agree. For each of a set of tools covering the
supported annotations (scalars, containers, ``Literal``, enums, dataclasses, ``TypedDict``,
pydantic models and ``Field`` constraints, unions, defaults):

* :meth:`FunctionSignature.bind` returns keyword arguments or raises :class:`ArgumentError`
  with a message; no other exception, whatever JSON the client sends;
* arguments the binder accepts are valid against the generated schema (JSON Schema 2020-12),
  and arguments valid against the schema are accepted by the binder: a client that follows the
  schema is never refused, one that breaks it is never let through.

Input layout: byte 0 picks the tool; the rest is the JSON ``arguments``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict

import jsonschema
import msgspec
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from mcpkit.server.signature import ArgumentError, FunctionSignature, inspect_function

from ._harness import Finding, Target, corpus_of, json_values, timed


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclass
class Point:
    x: int
    y: int = 0


class Options(TypedDict):
    depth: int
    label: str


class Booking(BaseModel):
    city: str = Field(min_length=1, max_length=20)
    nights: int = Field(ge=1, le=30)


def scalars(a: int, b: float = 1.0, s: str = "x", flag: bool = False) -> str:
    return ""


def containers(items: list[int], mapping: dict[str, float] | None = None) -> str:
    return ""


def choices(mode: Literal["a", "b"], color: Color = Color.RED) -> str:
    return ""


def structured(point: Point, options: Options | None = None) -> str:
    return ""


def model(booking: Booking) -> str:
    return ""


def constrained(
    count: Annotated[int, Field(ge=1, le=10)], name: Annotated[str, Field(min_length=1, pattern="^[a-z]+$")]
) -> str:
    return ""


def union(x: int | str | None = None, ys: list[int | str] | None = None) -> str:
    return ""


TOOLS: list[tuple[str, FunctionSignature]] = [
    (fn.__name__, inspect_function(fn))
    for fn in (scalars, containers, choices, structured, model, constrained, union)
]
_VALIDATORS = [jsonschema.Draft202012Validator(sig.input_schema) for _, sig in TOOLS]


def one_input(data: bytes) -> None:
    if not data:
        return
    index = data[0] % len(TOOLS)
    name, sig = TOOLS[index]
    try:
        value = msgspec.json.decode(data[1:])
    except msgspec.DecodeError:
        return
    arguments = value if isinstance(value, dict) else None
    try:
        sig.bind(arguments)
    except ArgumentError as exc:
        if not str(exc):
            raise Finding(f"{name}: an ArgumentError without a message") from None
        accepted = False
    else:
        accepted = True
    valid = _VALIDATORS[index].is_valid(arguments if arguments is not None else {})
    if accepted and not valid:
        raise Finding(f"{name} bound arguments its schema refuses: {arguments!r}; schema {sig.input_schema}")
    if valid and not accepted:
        raise Finding(
            f"{name} refused arguments its schema accepts: {arguments!r}; schema {sig.input_schema}"
        )


_leaf = st.one_of(
    st.integers(-3, 40), st.floats(allow_nan=False, allow_infinity=False, width=32), st.booleans(), st.none(),
    st.sampled_from(["a", "b", "red", "green", "abc", "", "Paris", "x" * 25, "1"]),
)  # fmt: skip
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["x", "y", "depth", "label", "city", "nights", "z"]), inner, max_size=3
        ),
    ),
    max_leaves=8,
)
_keys = st.sampled_from(
    ["a", "b", "s", "flag", "items", "mapping", "mode", "color", "point", "options", "booking", "count",
     "name", "x", "ys", "extra"]
)  # fmt: skip
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(
        # json.dumps, not msgspec.json.encode: json_values holds lone surrogates, which msgspec's
        # encoder refuses (UnicodeEncodeError while drawing) and json.dumps escapes as "\ud800",
        # as JavaScript's JSON.stringify does (RFC 8259 section 8.2 leaves their meaning open).
        lambda i, args: bytes([i]) + json.dumps(args).encode(),
        st.integers(0, len(TOOLS) - 1),
        st.one_of(st.dictionaries(_keys, _value, max_size=4), json_values),
    ),
    st.sampled_from(corpus_of("arguments") or [b'\x00{"a":1}']),
)

TARGET = Target(
    "arguments",
    timed(one_input),
    strategy,
    ("mcpkit.server.signature", "mcpkit.server._pydantic", "mcpkit.server._integral"),
)

"""Generated schemas are self-contained: ``$ref`` inlined, ``$defs`` kept only for recursion."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jsonschema
import pytest

from mcpkit import Client, MCPServer
from mcpkit.server._schema_refs import inline_defs


def refs_in(schema: Any) -> list[str]:
    """Every ``$ref`` value anywhere in ``schema``."""
    return [part.split('"')[1] for part in json.dumps(schema).split('"$ref": ')[1:]]


def test_a_type_used_twice_is_inlined_at_both_places() -> None:
    point = {"type": "object", "properties": {"x": {"type": "integer"}}}
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Point"},
            "b": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
        },
    }
    assert inline_defs(schema, {"Point": point}) == {
        "type": "object",
        "properties": {"a": point, "b": {"type": "array", "items": point}},
    }


def test_recursion_keeps_one_def_and_refs_to_it() -> None:
    # A -> B -> A: the cycle keeps its refs (inlining would never end), the rest is inlined.
    defs = {
        "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
        "B": {"type": "object", "properties": {"a": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}},
    }
    schema = inline_defs({"type": "object", "properties": {"root": {"$ref": "#/$defs/A"}}}, defs)
    # Every ref left is one the cycle needs, and points at a def carried beside it.
    assert {ref.rsplit("/", 1)[1] for ref in refs_in(schema)} == set(schema["$defs"]) <= {"A", "B"}
    root = schema["properties"]["root"]
    assert root["properties"]["b"]["properties"]["a"]["anyOf"][0] == {"$ref": "#/$defs/A"}
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({"root": {"b": {"a": {"b": {"a": None}}}}})
    assert not validator.is_valid({"root": {"b": {"a": {"b": {"a": 3}}}}})


def test_keywords_beside_a_ref_are_kept() -> None:
    schema = inline_defs(
        {
            "type": "object",
            "properties": {"c": {"$ref": "#/$defs/Color", "default": "red", "description": "Paint"}},
        },
        {"Color": {"enum": ["green", "red"]}},
    )
    assert schema["properties"]["c"] == {"enum": ["green", "red"], "default": "red", "description": "Paint"}


def test_data_that_looks_like_a_ref_is_left_alone() -> None:
    data = {"$ref": "#/$defs/Nothing"}
    schema = {
        "type": "object",
        "properties": {"p": {"type": "object", "default": data, "const": data, "enum": [data]}},
    }
    assert inline_defs(schema, {}) == schema


def test_a_ref_that_points_nowhere_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="unresolvable"):
        inline_defs({"properties": {"p": {"$ref": "#/$defs/Missing"}}}, {})


@dataclasses.dataclass
class Address:
    street: str
    city: str


@dataclasses.dataclass
class Person:
    name: str
    home: Address
    work: Address | None = None


@dataclasses.dataclass
class Folder:
    name: str
    children: list[Folder] = dataclasses.field(default_factory=list)


async def test_listed_tools_have_self_contained_schemas_and_raw_ones_stay_verbatim() -> None:
    server = MCPServer("schemas")

    @server.tool()
    def register(person: Person) -> Person:
        """Nested types: inlined in inputSchema and outputSchema."""
        return person

    @server.tool()
    def tree(root: Folder) -> int:
        """A recursive type keeps its $defs entry."""
        return len(root.children)

    raw = {
        "type": "object",
        "properties": {"where": {"$ref": "#/$defs/place"}},
        "$defs": {"place": {"type": "string"}},
    }

    @server.tool(input_schema=raw)
    def given(where: str) -> str:
        """A schema the author wrote is published as written."""
        return where

    async with Client(server) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        person = tools["register"]
        assert refs_in(person.input_schema) == [] and "$defs" not in person.input_schema
        assert person.input_schema["properties"]["person"]["properties"]["home"]["required"] == [
            "street",
            "city",
        ]
        assert person.output_schema is not None and refs_in(person.output_schema) == []
        assert tools["tree"].input_schema["$defs"].keys() == {"Folder"}
        assert tools["given"].input_schema == raw
        # Still validated and bound as before.
        result = await client.call_tool(
            "register", {"person": {"name": "Ann", "home": {"street": "Main", "city": "Oslo"}}}
        )
        assert result.structured_content == {"name": "Ann", "home": {"street": "Main", "city": "Oslo"}}
        bad = await client.call_tool("register", {"person": {"name": "Ann", "home": {"street": "Main"}}})
        assert bad.is_error

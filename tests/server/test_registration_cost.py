"""Registering N tools, resources and templates does O(N) cheap work: the expensive steps
(signature analysis, JSON Schema generation, the argument Struct) are counted, not timed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any

import msgspec
import pytest

import mcpkit.server.resources as resources_mod
import mcpkit.server.tools as tools_mod
from mcpkit import MCPServer
from mcpkit.server.signature import ArgumentError, inspect_function

N = 300


class Counter:
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.fn(*args, **kwargs)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Counter]]:
    counters = {
        "inspect_function": Counter(tools_mod.inspect_function),
        "TextArgs": Counter(resources_mod.TextArgs),
        "schema_components": Counter(msgspec.json.schema_components),
        "defstruct": Counter(msgspec.defstruct),
    }
    monkeypatch.setattr(tools_mod, "inspect_function", counters["inspect_function"])
    monkeypatch.setattr(resources_mod, "TextArgs", counters["TextArgs"])
    monkeypatch.setattr(msgspec.json, "schema_components", counters["schema_components"])
    monkeypatch.setattr(msgspec, "defstruct", counters["defstruct"])
    yield counters


def echo(value: str) -> str:
    """Echo."""
    return value


def static() -> str:
    return "r"


def item(id: str) -> str:
    return id


def test_one_handler_registered_n_times_is_analysed_once(counted: dict[str, Counter]) -> None:
    server = MCPServer("many")
    for i in range(N):
        server.tool(name=f"tool_{i}")(echo)
        server.resource(f"res://{i}", name=f"res_{i}")(static)
        server.resource(f"tmpl{i}://{{id}}/item", name=f"tmpl_{i}")(item)
    assert counted["inspect_function"].calls == 1
    assert counted["TextArgs"].calls == 2  # static and item
    tools = [server._tools.tools[f"tool_{i}"] for i in range(N)]
    assert {tool.definition.description for tool in tools} == {"Echo."}
    # Each tool's published schema is its own object, equal to the one analysis.
    first, second = tools[0].definition.input_schema, tools[1].definition.input_schema
    assert first == second == inspect_function(echo).input_schema
    assert first is not second and first["properties"] is not second["properties"]
    first["properties"]["value"]["description"] = "changed"
    assert "description" not in second["properties"]["value"]


def test_plain_parameters_need_no_schema_generation(counted: dict[str, Counter]) -> None:
    # N distinct functions with str/int/float/bool parameters: no JSON Schema generation and
    # no argument Struct per function (the four plain schemas are asked of msgspec once, ever).
    server = MCPServer("distinct")
    for i in range(N):
        namespace: dict[str, Any] = {}
        exec(f"def f{i}(a: str, b: int, c: float = 1.5, d: bool = False) -> str:\n    return a", namespace)
        server.tool()(namespace[f"f{i}"])
    assert counted["inspect_function"].calls == N
    assert counted["schema_components"].calls <= 4
    assert counted["defstruct"].calls == 0


def test_plain_schemas_are_msgspecs_own() -> None:
    def f(a: str, b: int, c: float = 1.5, d: bool = False, e: Annotated[int, msgspec.Meta(ge=0)] = 0) -> str:
        return a

    schema = inspect_function(f).input_schema
    (expected_a, expected_b, expected_c, expected_d), _ = msgspec.json.schema_components(
        [str, int, float, bool]
    )
    assert schema["properties"]["a"] == expected_a
    assert schema["properties"]["b"] == expected_b
    assert schema["properties"]["c"] == {**expected_c, "default": 1.5}
    assert schema["properties"]["d"] == {**expected_d, "default": False}
    assert schema["properties"]["e"] == {"type": "integer", "minimum": 0, "default": 0}
    assert schema["required"] == ["a", "b"]


def test_plain_binder_builds_its_struct_only_for_a_malformed_call(counted: dict[str, Counter]) -> None:
    def f(a: str, b: int = 2) -> str:
        return a

    sig = inspect_function(f)
    assert sig.bind({"a": "x"}) == {"a": "x", "b": 2}
    assert counted["defstruct"].calls == 0
    for _ in range(3):
        with pytest.raises(ArgumentError, match="Invalid argument 'b': Expected `int`, got `str`"):
            sig.bind({"a": "x", "b": "2"})
        with pytest.raises(ArgumentError, match="Missing required argument 'a'"):
            sig.bind({})
    assert counted["defstruct"].calls == 1


def test_a_changed_handler_is_analysed_again(counted: dict[str, Counter]) -> None:
    def g(value: str) -> str:
        """First."""
        return value

    server = MCPServer("changed")
    server.tool(name="one")(g)
    g.__doc__ = "Second."
    server.tool(name="two")(g)
    g.__annotations__ = {"value": int, "return": str}
    server.tool(name="three")(g)
    server.tool(name="four", structured_output=True)(g)
    tools = server._tools.tools
    assert counted["inspect_function"].calls == 4
    assert tools["one"].definition.description == "First."
    assert tools["two"].definition.description == "Second."
    assert tools["three"].definition.input_schema["properties"]["value"] == {"type": "integer"}
    assert tools["four"].definition.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
    }


def test_analyses_do_not_share_plain_schemas() -> None:
    first, second = inspect_function(echo).input_schema, inspect_function(echo).input_schema
    first["properties"]["value"]["description"] = "changed"
    assert second["properties"]["value"] == {"type": "string"}
    assert inspect_function(echo).input_schema["properties"]["value"] == {"type": "string"}


def test_shared_analysis_copies_keep_schema_values() -> None:
    def limit(x: float = float("inf")) -> str:
        return str(x)

    server = MCPServer("values")
    server.tool(name="one")(limit)
    server.tool(name="two")(limit)
    for name in ("one", "two"):
        assert server._tools.tools[name].definition.input_schema["properties"]["x"]["default"] == float("inf")

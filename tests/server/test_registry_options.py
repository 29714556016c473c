"""The options objects the decorators build once and hand to the registries."""

from __future__ import annotations

import dataclasses

import pytest

from mcpkit import Context, MCPServer
from mcpkit.protocol import types as t
from mcpkit.server.prompts import PromptOptions, PromptRegistry
from mcpkit.server.resources import ResourceOptions, ResourceRegistry
from mcpkit.server.tools import ToolOptions, ToolRegistry


def greet(who: str) -> str:
    """Say hello.

    Args:
        who: whom to greet
    """
    return f"hello {who}"


def test_options_are_frozen_and_default_to_nothing() -> None:
    for options in (ToolOptions(), ResourceOptions(), PromptOptions()):
        assert options.name is None and options.scopes == frozenset()
        with pytest.raises(dataclasses.FrozenInstanceError):
            options.name = "x"  # type: ignore[misc]


def test_tool_registry_publishes_the_options() -> None:
    registry = ToolRegistry()
    options = ToolOptions(
        name="hello",
        title="Hello",
        annotations={"read_only_hint": True},
        icons=[t.Icon(src="https://example.com/i.png")],
        meta={"k": 1},
        headers={"who": "Who"},
        scopes=frozenset({"greet"}),
    )
    tool = registry.add(greet, options)
    assert registry.get("hello") is tool
    assert tool.options is options and tool.scopes == {"greet"}
    definition = tool.definition
    assert (definition.title, definition.description) == ("Hello", "Say hello.")
    assert definition.annotations == t.ToolAnnotations(read_only_hint=True)
    assert definition.meta == {"k": 1}
    assert definition.input_schema["properties"]["who"]["x-mcp-header"] == "Who"
    assert tool.header_params == {"who": ("who",)}


def test_tool_registry_defaults_come_from_the_function() -> None:
    tool = ToolRegistry().add(greet)
    assert tool.definition.name == "greet"
    assert tool.definition.description == "Say hello."
    assert tool.header_params is None and tool.scopes == frozenset()


def test_tool_options_input_schema_and_bad_headers() -> None:
    schema = {"type": "object", "properties": {"who": {"type": "string"}}}
    tool = ToolRegistry().add(greet, ToolOptions(input_schema=schema))
    assert tool.definition.input_schema == schema
    with pytest.raises(ValueError, match="no parameter named 'nobody'"):
        ToolRegistry().add(greet, ToolOptions(headers={"nobody": "X"}))


def test_raw_tool_options_carry_name_and_scopes() -> None:
    definition = t.Tool(name="raw", input_schema={"type": "object"})
    tool = ToolRegistry().add_raw(definition, greet, scopes=frozenset({"s"}))
    assert tool.options == ToolOptions(name="raw", scopes=frozenset({"s"}))


def test_resource_registry_publishes_the_options() -> None:
    registry = ResourceRegistry()
    options = ResourceOptions(
        name="cfg", title="Config", mime_type="text/x", size=3, cache=(5, "public"), scopes=frozenset({"r"})
    )
    registry.add(lambda: "abc", "config://app", options)
    registry.add(greet, "hello://{who}", ResourceOptions(size=9))
    resource, entry = registry.resources["config://app"]
    assert (resource.name, resource.title, resource.mime_type, resource.size) == (
        "cfg",
        "Config",
        "text/x",
        3,
    )
    assert (entry.cache, entry.scopes) == ((5, "public"), {"r"})
    assert registry.scopes_for("config://app") == {"r"}
    template = registry.templates[0][0]
    assert (template.name, template.description) == ("greet", "Say hello.")
    assert not hasattr(template, "size")  # size is published for static resources only


def test_prompt_registry_publishes_the_options() -> None:
    registry = PromptRegistry()
    registry.add(
        greet, PromptOptions(name="hi", description="Greets.", meta={"m": 1}, scopes=frozenset({"p"}))
    )
    entry = registry.prompts["hi"]
    assert (entry.definition.description, entry.definition.meta, entry.scopes) == ("Greets.", {"m": 1}, {"p"})
    assert entry.definition.arguments == [
        t.PromptArgument(name="who", description="whom to greet", required=True)
    ]


def test_decorators_build_the_options_once() -> None:
    server = MCPServer("s")
    decorate = server.tool(title="T", scopes=["a", "b"])

    def one() -> str:
        return "1"

    def two() -> str:
        return "2"

    decorate(one)
    decorate(two)
    first, second = server._tools.tools["one"], server._tools.tools["two"]
    assert first.options is second.options
    assert first.options == ToolOptions(title="T", scopes=frozenset({"a", "b"}))


def test_add_tool_takes_the_decorator_options() -> None:
    server = MCPServer("s")
    server.add_tool(greet, name="late", scopes=["x"])
    assert server.required_scopes("tools/call", "late") == frozenset({"x"})
    with pytest.raises(TypeError):
        server.add_tool(greet, colour="red")


def test_resource_decorator_resolves_cache_against_the_server_policy() -> None:
    server = MCPServer("s", cache_ttl_ms=7, cache_scope="public")

    @server.resource("a://x", ttl_ms=3)
    def a() -> str:
        return "a"

    @server.resource("b://x", cache_scope="private")
    def b(ctx: Context) -> str:
        return "b"

    @server.resource("c://x")
    def c() -> str:
        return "c"

    cache = {uri: entry.cache for uri, (_, entry) in server._resources.resources.items()}
    assert cache == {"a://x": (3, "public"), "b://x": (7, "private"), "c://x": None}

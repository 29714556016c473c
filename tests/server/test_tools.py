"""The tool registry (server/tools.py) on its own: registration, replacement, removal,
lookup errors, where sync tools run, and argument validation."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from mcpkit import Context, MCPError
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INVALID_PARAMS
from mcpkit.server.tools import ToolOptions, ToolRegistry


def text_of(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry()


def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b


async def shout(text: str) -> str:
    return text.upper()


# -- registration ----------------------------------------------------------------


def test_registration_publishes_the_definition(registry: ToolRegistry) -> None:
    tool = registry.add(add)
    assert list(registry.tools) == ["add"]
    assert registry.get("add") is tool
    definition = tool.definition
    assert definition.name == "add"
    assert definition.description == "Add two numbers."
    assert definition.input_schema["properties"].keys() == {"a", "b"}
    assert definition.input_schema["required"] == ["a"]
    assert tool.runner is not None  # a sync function gets a runner; an async one does not
    assert registry.add(shout).runner is None


def test_options_override_what_the_function_says(registry: ToolRegistry) -> None:
    options = ToolOptions(
        name="plus",
        title="Plus",
        description="Adds.",
        annotations={"read_only_hint": True, "openWorldHint": False},
        scopes=frozenset({"math"}),
    )
    tool = registry.add(add, options)
    assert list(registry.tools) == ["plus"]
    assert (tool.definition.title, tool.definition.description) == ("Plus", "Adds.")
    annotations = tool.definition.annotations
    assert isinstance(annotations, t.ToolAnnotations)
    assert (annotations.read_only_hint, annotations.open_world_hint) == (True, False)
    assert tool.scopes == frozenset({"math"})
    assert tool.options is options


def test_tools_keep_registration_order(registry: ToolRegistry) -> None:
    for name in ("c", "a", "b"):
        registry.add(add, ToolOptions(name=name))
    assert list(registry.tools) == ["c", "a", "b"]


def test_a_duplicate_name_replaces_the_tool_in_place(registry: ToolRegistry) -> None:
    changes: list[str] = []
    registry.on_change = lambda: changes.append("changed")
    registry.add(add, ToolOptions(name="first"))
    registry.add(add)
    replacement = registry.add(shout, ToolOptions(name="add"))
    assert list(registry.tools) == ["first", "add"]
    assert registry.get("add") is replacement
    assert changes == ["changed"] * 3


def test_removal(registry: ToolRegistry) -> None:
    changes: list[str] = []
    registry.add(add)
    registry.on_change = lambda: changes.append("changed")
    registry.remove("add")
    assert registry.tools == {}
    assert changes == ["changed"]
    with pytest.raises(KeyError):
        registry.remove("add")
    assert changes == ["changed"]  # a failed removal changes nothing


def test_lookup_of_an_unknown_tool_is_invalid_params(registry: ToolRegistry) -> None:
    registry.add(add)
    with pytest.raises(MCPError) as caught:
        registry.get("nope")
    assert caught.value.code == INVALID_PARAMS
    assert "nope" in caught.value.message


def test_raw_tools_are_published_verbatim(registry: ToolRegistry) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    definition = t.Tool(name="raw", input_schema=schema, output_schema={"type": "object"})

    async def handler(arguments: dict[str, Any], ctx: Context | None) -> t.CallToolResult:
        return t.CallToolResult(content=[t.TextContent(text=str(arguments))])

    tool = registry.add_raw(definition, handler, scopes=frozenset({"s"}))
    assert tool.definition is definition
    assert tool.scopes == frozenset({"s"}) and tool.options.name == "raw"


def test_header_parameters_are_checked_at_registration(registry: ToolRegistry) -> None:
    def lookup(region: str, query: str) -> str:
        return query

    tool = registry.add(lookup, ToolOptions(headers={"region": "Region"}))
    assert tool.definition.input_schema["properties"]["region"]["x-mcp-header"] == "Region"
    assert tool.header_params
    with pytest.raises(ValueError, match="no parameter named"):
        registry.add(lookup, ToolOptions(name="other", headers={"missing": "Missing"}))
    assert "other" not in registry.tools


# -- calling ---------------------------------------------------------------------


async def test_an_async_tool_is_awaited(registry: ToolRegistry) -> None:
    result = await registry.add(shout).call({"text": "hi"}, None)
    assert (text_of(result), result.is_error) == ("HI", False)


async def test_a_sync_tool_starts_in_a_worker_thread(registry: ToolRegistry) -> None:
    threads: list[threading.Thread] = []

    def where() -> str:
        threads.append(threading.current_thread())
        return "ok"

    tool = registry.add(where)
    assert not tool.runs_inline
    assert text_of(await tool.call({}, None)) == "ok"
    assert threads == [threads[0]] and threads[0] is not threading.main_thread()


async def test_a_sync_tool_pinned_inline_runs_on_the_loop(registry: ToolRegistry) -> None:
    threads: list[threading.Thread] = []

    def where() -> str:
        threads.append(threading.current_thread())
        return "ok"

    tool = registry.add(where, ToolOptions(threaded=False))
    assert tool.runs_inline
    assert text_of(tool.call_inline({})) == "ok"
    assert text_of(await tool.call({}, None)) == "ok"
    assert threads == [threading.main_thread()] * 2


async def test_a_sync_tool_pinned_to_a_thread_stays_there(registry: ToolRegistry) -> None:
    threads: list[threading.Thread] = []

    def where() -> str:
        threads.append(threading.current_thread())
        return "ok"

    tool = registry.add(where, ToolOptions(threaded=True))
    runner = tool.runner
    assert runner is not None
    for _ in range(runner.TRIAL_CALLS * 2):  # fast calls never move a pinned tool inline
        await tool.call({}, None)
    assert not tool.runs_inline
    assert threading.main_thread() not in threads


async def test_a_fast_sync_tool_moves_inline_after_its_trials(registry: ToolRegistry) -> None:
    tool = registry.add(lambda: "quick", ToolOptions(name="quick"))
    runner = tool.runner
    assert runner is not None
    calls = 0
    while not tool.runs_inline:
        await tool.call({}, None)
        calls += 1
        assert calls <= runner.TRIAL_CALLS * 4, "a trivially fast tool never went inline"
    assert calls >= runner.TRIAL_CALLS


async def test_a_tool_taking_a_context_never_runs_inline(registry: ToolRegistry) -> None:
    def with_ctx(ctx: Context) -> str:
        return "ok"

    assert not registry.add(with_ctx, ToolOptions(threaded=False)).runs_inline


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({}, "a"),  # missing
        ({"a": "x"}, "a"),  # wrong type
        (None, "a"),
    ],
)
async def test_invalid_arguments_are_a_tool_error_naming_the_parameter(
    registry: ToolRegistry, arguments: dict[str, Any] | None, mentions: str
) -> None:
    tool = registry.add(add)
    result = await tool.call(arguments, None)
    assert result.is_error is True
    assert mentions in text_of(result)
    inline = registry.add(add, ToolOptions(name="inline", threaded=False)).call_inline(arguments)
    assert inline.is_error is True and text_of(inline) == text_of(result)


async def test_valid_arguments_are_bound_and_defaults_applied(registry: ToolRegistry) -> None:
    tool = registry.add(add, ToolOptions(structured_output=False))
    assert text_of(await tool.call({"a": 1}, None)) == "3"
    assert text_of(await tool.call({"a": 1, "b": 5}, None)) == "6"


async def test_a_failing_tool_is_a_tool_error_but_mcp_errors_propagate(registry: ToolRegistry) -> None:
    def boom() -> str:
        raise RuntimeError("kaput")

    def bare() -> str:
        raise ValueError

    def refuse() -> str:
        raise MCPError(-32042, "refused")

    failed = await registry.add(boom).call({}, None)
    assert (failed.is_error, text_of(failed)) == (True, "kaput")
    assert text_of(await registry.add(bare).call({}, None)) == "ValueError"
    with pytest.raises(MCPError, match="refused"):
        await registry.add(refuse).call({}, None)


async def test_structured_results(registry: ToolRegistry) -> None:
    tool = registry.add(add)
    assert isinstance(tool.definition.output_schema, dict)
    result = await tool.call({"a": 2, "b": 3}, None)
    assert result.structured_content == {"result": 5}
    assert text_of(result) == "5"  # a wrapped scalar reads as itself


async def test_calls_run_concurrently(registry: ToolRegistry) -> None:
    entered = 0
    both_in = asyncio.Event()

    async def meet() -> str:
        nonlocal entered
        entered += 1
        if entered == 2:
            both_in.set()
        await asyncio.wait_for(both_in.wait(), 5)
        return "met"

    tool = registry.add(meet)
    results = await asyncio.gather(tool.call({}, None), tool.call({}, None))
    assert [text_of(r) for r in results] == ["met", "met"]


# -- results without a JSON form ----------------------------------------------------


def paths() -> dict[str, Any]:
    import pathlib

    return {"home": pathlib.PurePosixPath("/home/ann"), "files": (name for name in ("a", "b"))}


def opaque() -> dict[str, Any]:
    return {"handle": threading.Lock()}


async def test_paths_and_generators_in_a_result_are_text_and_lists(registry: ToolRegistry) -> None:
    result = await registry.add(paths).call({}, None)
    assert not result.is_error
    assert result.structured_content == {"home": "/home/ann", "files": ["a", "b"]}


async def test_a_result_with_no_json_form_is_a_tool_error_that_says_why(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    result = await registry.add(opaque).call({}, None)
    assert result.is_error
    assert text_of(result) == "The tool's result cannot be converted to JSON: Cannot convert 'lock' to JSON"
    assert "tool 'opaque' returned a result that cannot be sent" in caplog.text


# -- sys.exit() in a tool -------------------------------------------------------------


def exits_like_argparse(flag: str) -> str:
    raise SystemExit(2)  # what argparse does with arguments it cannot parse


async def exits_async() -> str:
    raise SystemExit("bye")


async def test_sys_exit_in_a_tool_fails_the_call_not_the_server(registry: ToolRegistry) -> None:
    threaded = registry.add(exits_like_argparse)
    assert threaded.runner is not None  # a plain def: its SystemExit comes back from the thread
    result = await threaded.call({"flag": "--bad"}, None)
    assert result.is_error
    assert text_of(result) == "The tool called sys.exit(2); the call failed, the server runs on"
    inline = registry.add(exits_like_argparse, ToolOptions(name="inline", threaded=False))
    assert inline.call_inline({"flag": "--bad"}).is_error
    result = await registry.add(exits_async).call({}, None)
    assert text_of(result) == "The tool called sys.exit('bye'); the call failed, the server runs on"

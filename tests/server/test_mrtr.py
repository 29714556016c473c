"""One handler, both eras: server-to-client requests (legacy) and multi round-trip
results (modern) from the same ``ctx.elicit`` / ``ctx.sample`` / ``ctx.list_roots``."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mcpkit import Context, Elicit, ListRoots, MCPError, MCPServer, Sample
from mcpkit.protocol import types as t
from mcpkit.testing import connect


def build() -> MCPServer:
    server = MCPServer("mrtr", state_secret=b"k" * 32)

    @server.tool()
    async def greet(ctx: Context) -> str:
        first = await ctx.elicit(
            "First name?", {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        second = await ctx.elicit(
            "Favourite colour?", {"type": "object", "properties": {"c": {"type": "string"}}}
        )
        return f"{first.content['name']} likes {second.content['c']}"  # type: ignore[index]

    @server.tool()
    async def everything(ctx: Context) -> str:
        answers = await ctx.ask(
            {
                "who": Elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
                "llm": Sample("Capital of France?", max_tokens=10),
                "roots": ListRoots(),
            }
        )
        roots = [r.uri for r in answers["roots"].roots]
        return f"{answers['who'].content['name']}|{answers['llm'].content['text']}|{roots}"

    @server.prompt()
    async def personal(ctx: Context) -> str:
        who = await ctx.elicit(
            "Context?", {"type": "object", "properties": {"ctx": {"type": "string"}}}, key="user"
        )
        return f"context: {who.content['ctx']}"  # type: ignore[index]

    return server


def handlers(log: list[str]) -> dict[str, Any]:
    async def elicit(params: t.ElicitParams) -> dict[str, Any]:
        log.append(params.message)
        value = {
            "First name?": {"name": "Ada"},
            "Favourite colour?": {"c": "green"},
            "Name?": {"name": "Bo"},
            "Context?": {"ctx": "tests"},
        }[params.message]
        return {"action": "accept", "content": value}

    def sample(params: t.CreateMessageParams) -> t.CreateMessageResult:
        log.append("sample")
        return t.CreateMessageResult(role="assistant", content={"type": "text", "text": "Paris"}, model="m")

    return {"elicitation_handler": elicit, "sampling_handler": sample, "roots": ["file:///w"]}


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_same_handler_in_both_eras(protocol: str) -> None:
    log: list[str] = []
    async with connect(build(), protocol=protocol, **handlers(log)) as client:
        greeted = await client.call_tool("greet")
        assert greeted.content[0].text == "Ada likes green"  # type: ignore[union-attr]
        everything = await client.call_tool("everything")
        assert everything.content[0].text == "Bo|Paris|['file:///w']"  # type: ignore[union-attr]
        prompt = await client.get_prompt("personal")
        assert prompt.messages[0].content.text == "context: tests"  # type: ignore[union-attr]
    if protocol == "legacy":
        assert log == ["First name?", "Favourite colour?", "Name?", "sample", "Context?"]
    else:  # each round re-asks only what is still missing
        assert log == ["First name?", "Favourite colour?", "Name?", "sample", "Context?"]


async def _raw_call(client: Any, params: dict[str, Any]) -> Any:
    raw = await client._session.request("tools/call", client._params(params))
    return msgspec.json.decode(raw)


async def test_modern_wire_shape_and_state_protection() -> None:
    async with connect(build(), protocol="modern", **handlers([])) as client:
        first = await _raw_call(client, {"name": "greet"})
        assert first["resultType"] == "input_required"
        ((key, request),) = first["inputRequests"].items()
        assert request["method"] == "elicitation/create" and request["params"]["message"] == "First name?"
        state = first["requestState"]
        answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
        second = await _raw_call(client, {"name": "greet", "inputResponses": answer, "requestState": state})
        assert second["resultType"] == "input_required"
        assert [r["params"]["message"] for r in second["inputRequests"].values()] == ["Favourite colour?"]
        assert second["requestState"] != state
        for bad_state in (state + "-TAMPERED", "x.y", ""):
            with pytest.raises(MCPError) as info:
                await _raw_call(client, {"name": "greet", "inputResponses": {}, "requestState": bad_state})
            assert info.value.code == -32602
        with pytest.raises(MCPError) as info:  # state sealed for another request
            await _raw_call(client, {"name": "everything", "inputResponses": {}, "requestState": state})
        assert "different request" in info.value.message
        wrong = await _raw_call(
            client, {"name": "greet", "inputResponses": {"wrong_key": {"action": "accept"}}}
        )
        assert wrong["resultType"] == "input_required"
        malformed = await _raw_call(client, {"name": "greet", "inputResponses": {key: 12345}})
        assert malformed["resultType"] == "input_required"
        with pytest.raises(MCPError):
            await _raw_call(client, {"name": "greet", "inputResponses": None})


async def test_undeclared_capability_is_never_requested() -> None:
    async with connect(build(), protocol="modern") as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("greet")
    assert info.value.code == -32021
    assert info.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_client_gives_up_after_max_rounds() -> None:
    server = MCPServer("stubborn")
    rounds = iter(range(100))

    @server.tool()
    async def forever(ctx: Context) -> str:
        # A new key every run: the server never considers itself answered.
        await ctx.elicit("again?", {"type": "object"}, key=f"k{next(rounds)}")
        return "unreachable"

    async def accept(params: t.ElicitParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={})

    async with connect(server, protocol="modern", elicitation_handler=accept, max_input_rounds=3) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("forever")
    assert "3 rounds" in info.value.message
    assert next(rounds) == 4  # the first try and three retries

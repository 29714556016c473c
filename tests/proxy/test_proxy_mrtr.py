"""Multi round-trip requests through a proxy: a modern backend's input requests reach a modern
caller as they were made (their keys, several at once, only what the caller can answer)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpkit import Client, Context, Elicit, MCPError, MCPServer, Sample
from mcpkit.protocol import types as t

pytestmark = pytest.mark.timeout(30)

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def asker() -> MCPServer:
    server = MCPServer("asker")

    @server.tool()
    async def both(ctx: Context) -> str:
        answers = await ctx.ask({"who": Elicit("Name?", NAME), "model": Sample("Say hi", max_tokens=5)})
        return f"{answers['who'].content['name']} {answers['model'].content['text']}"

    @server.tool()
    async def polite(ctx: Context) -> str:
        if "elicitation" not in ctx.client_capabilities:
            return "no elicitation: not asked"
        answer = await ctx.elicit("Name?", NAME, key="who")
        return f"hello {answer.content['name']}"

    return server


async def elicit(params: t.ElicitParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"name": "Ada"})


async def sample(params: t.CreateMessageParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text="hi"), model="m")


async def raw_call(client: Client, name: str) -> dict[str, Any]:
    """One tools/call round, without the client answering input requests itself."""
    assert client._session is not None
    raw = await client._send(
        client._session, "tools/call", client._params({"name": name, "arguments": {}}), 10
    )
    body: dict[str, Any] = json.loads(bytes(raw))
    return body


async def test_input_requests_keep_their_keys_and_come_together() -> None:
    proxy = MCPServer.proxy(asker(), protocol="modern")
    async with Client(
        proxy, protocol="modern", elicitation_handler=elicit, sampling_handler=sample
    ) as client:
        first = await raw_call(client, "both")
        assert first["resultType"] == "input_required"
        assert sorted(first["inputRequests"]) == ["model", "who"]
        assert first["inputRequests"]["who"]["method"] == "elicitation/create"
        assert isinstance(first["requestState"], str)
        result = await client.call_tool("both")
        assert result.content[0].text == "Ada hi"  # type: ignore[union-attr]


async def test_the_backend_sees_the_callers_capabilities() -> None:
    proxy = MCPServer.proxy(asker(), protocol="modern")
    async with Client(proxy, protocol="modern") as bare:
        assert (await bare.call_tool("polite")).content[0].text == "no elicitation: not asked"  # type: ignore[union-attr]
    async with Client(proxy, protocol="modern", elicitation_handler=elicit) as able:
        assert (await able.call_tool("polite")).content[0].text == "hello Ada"  # type: ignore[union-attr]


@pytest.mark.parametrize("back", ["legacy", "modern"])
async def test_a_tampered_or_foreign_retry_is_refused(back: str) -> None:
    """The proxy's requestState is sealed and bound to the request: a retry that changes it fails."""
    proxy = MCPServer.proxy(asker(), protocol=back)
    async with Client(
        proxy, protocol="modern", elicitation_handler=elicit, sampling_handler=sample
    ) as client:
        first = await raw_call(client, "both")
        assert first["resultType"] == "input_required"
        assert client._session is not None
        tampered = client._params(
            {
                "name": "both",
                "arguments": {},
                "requestState": first["requestState"][:-4] + "AAAA",
                "inputResponses": {},
            }
        )
        with pytest.raises(MCPError, match=r"(?i)state"):
            await client._send(client._session, "tools/call", tampered, 10)

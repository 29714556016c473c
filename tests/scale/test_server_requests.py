"""Server-to-client requests whose answers reach another worker (legacy era).

A tool on worker A asks the client (elicitation, sampling) on its call's SSE
stream; the client POSTs the JSON-RPC response, the proxy delivers it to
worker B, and B must relay it to A, where the tool completes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scale_support import (
    Collected,
    StartClusterT,
    cluster_with_session,
    is_final,
    iter_sse,
    legacy_headers,
    read_events,
    stream_call,
    text_result,
)

pytestmark = pytest.mark.timeout(60)

CAPABILITIES = {"elicitation": {}, "sampling": {}}


async def ask_and_answer(
    start_cluster: StartClusterT, tool: str, arguments: dict[str, Any], method: str, answer: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Call ``tool`` on worker 0, answer its request (of ``method``) through worker 1;
    returns the tool's text and the server's request."""
    c, client, session = await cluster_with_session(start_cluster, capabilities=CAPABILITIES)
    got = Collected()
    c.route_next_to(0)
    call_entry = c.mark()
    async with stream_call(client, session, 42, tool, arguments) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = iter_sse(response)
        async with asyncio.timeout(10):
            await read_events(events, got, until=lambda m: m.get("method") == method)
        request = got.messages()[-1]
        assert isinstance(request["id"], int | str), request
        c.route_next_to(1)
        answer_entry = c.mark()
        posted = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": request["id"], "result": answer},
            headers=legacy_headers(session),
        )
        assert posted.status_code == 202, (posted.status_code, posted.text)
        async with asyncio.timeout(10):
            await read_events(events, got, until=is_final)
    assert c.proxy.log[call_entry].backend == 0
    assert c.proxy.log[answer_entry].backend == 1
    result = got.messages()[-1]
    assert is_final(result) and result["id"] == 42, got.messages()
    return text_result(result), request


async def test_elicitation_answered_through_another_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    text, request = await ask_and_answer(
        start_cluster, "ask_name", {}, "elicitation/create", {"action": "accept", "content": {"name": "Ada"}}
    )
    assert request["params"]["message"] == "What is your name?"
    assert text == "Hello, Ada! (accept)"


async def test_sampling_answered_through_another_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    answer = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model"}
    text, request = await ask_and_answer(
        start_cluster, "ask_model", {"question": "Capital of France?"}, "sampling/createMessage", answer
    )
    assert request["params"]["messages"][0]["content"]["text"] == "Capital of France?"
    assert text == "The model says: Paris"


async def test_an_error_answer_reaches_the_tool(start_cluster: StartClusterT, shared_redis: str) -> None:
    """A JSON-RPC error from the client, relayed the same way, fails the tool (not a hang)."""
    c, client, session = await cluster_with_session(start_cluster, capabilities=CAPABILITIES)
    got = Collected()
    c.route_next_to(0)
    async with stream_call(client, session, 43, "ask_name", {}) as response:
        events = iter_sse(response)
        async with asyncio.timeout(10):
            await read_events(events, got, until=lambda m: m.get("method") == "elicitation/create")
        rid = got.messages()[-1]["id"]
        c.route_next_to(1)
        refusal = {"jsonrpc": "2.0", "id": rid, "error": {"code": -1, "message": "user went away"}}
        posted = await client.post("/mcp", json=refusal, headers=legacy_headers(session))
        assert posted.status_code == 202, (posted.status_code, posted.text)
        async with asyncio.timeout(10):
            await read_events(events, got, until=is_final)
    result = got.messages()[-1]
    assert result["id"] == 43
    assert "error" in result or result["result"].get("isError") is True, result

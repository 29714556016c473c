"""Multi round-trip requests (2026-07-28 input_required) whose rounds land on different workers.

Nothing is kept between rounds but the HMAC-sealed ``requestState``, so any
worker holding the shared key (``MCPKIT_STATE_SECRET``) can take the next round.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from scale_support import StartClusterT, final, modern_tool_call, text_result

pytestmark = pytest.mark.timeout(60)

CAPABILITIES = {"elicitation": {}}


async def round_trip(
    client: httpx.AsyncClient, request_id: int, status: int = 200, **params: Any
) -> dict[str, Any]:
    headers, body = modern_tool_call(request_id, "greet_twice", {}, CAPABILITIES, **params)
    response = await client.post("/mcp", json=body, headers=headers)
    assert response.status_code == status, (response.status_code, response.text)
    return final(response)


async def test_each_round_on_another_worker(start_cluster: StartClusterT, shared_redis: str) -> None:
    c = await start_cluster(3)
    client = c.client()
    mark = c.mark()

    c.route_next_to(0)
    first = (await round_trip(client, 1))["result"]
    assert first["resultType"] == "input_required", first
    assert list(first["inputRequests"]) == ["step1"]
    assert first["inputRequests"]["step1"]["method"] == "elicitation/create"

    second = (
        await round_trip(
            client,
            2,
            inputResponses={"step1": {"action": "accept", "content": {"name": "Ada"}}},
            requestState=first["requestState"],
        )
    )["result"]
    assert second["resultType"] == "input_required", second
    assert list(second["inputRequests"]) == ["step2"]

    done = await round_trip(
        client,
        3,
        inputResponses={"step2": {"action": "accept", "content": {"color": "blue"}}},
        requestState=second["requestState"],
    )
    assert text_result(done) == "Ada likes blue"
    assert c.backends_since(mark) == [0, 1, 2]


async def test_a_tampered_state_is_refused_by_every_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c = await start_cluster(2)
    client = c.client()
    first = (await round_trip(client, 1))["result"]
    state: str = first["requestState"]
    body, _, mac = state.partition(".")
    tampered = body + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
    for worker in (0, 1):
        c.route_next_to(worker)
        answer = await round_trip(
            client,
            10 + worker,
            400,  # -32602 Invalid params, on the modern wire
            inputResponses={"step1": {"action": "accept", "content": {"name": "Eve"}}},
            requestState=tampered,
        )
        assert "error" in answer, answer
        assert "requestState" in answer["error"]["message"], answer

"""The harness itself: workers start, the proxy spreads requests, stateless calls work anywhere."""

from __future__ import annotations

import pytest
from scale_support import StartClusterT, modern_tool_call, tool_text

pytestmark = pytest.mark.timeout(60)


async def test_modern_calls_alternate_workers(start_cluster: StartClusterT, shared_redis: str) -> None:
    c = await start_cluster(3)
    client = c.client()
    mark = c.mark()
    pids = []
    for i in range(6):
        headers, body = modern_tool_call(i, "whoami", {})
        pids.append(tool_text(await client.post("/mcp", json=body, headers=headers)))
    assert c.backends_since(mark) == [0, 1, 2, 0, 1, 2]
    expected = [str(w.started_pid) for w in c.workers]
    assert pids == expected + expected
    headers, body = modern_tool_call(9, "echo", {"text": "hi"})
    assert tool_text(await client.post("/mcp", json=body, headers=headers)) == "hi"

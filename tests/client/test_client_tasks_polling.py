"""Client.call_tool polls a task at the interval the server suggests (``pollIntervalMs``;
2025-11-25 ``pollInterval``), in both eras, and never faster than its lower bound when the
server suggests less. Checked by timing the client's ``tasks/get`` requests on the wire (lower
bounds, and a generous upper bound on the median gap that a client polling at its own 1-second
default would miss)."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import msgspec
import pytest

from mcpkit import Client, MCPServer
from mcpkit.client.tasks import MIN_POLL_INTERVAL
from mcpkit.protocol import types as t
from mcpkit.server.tasks import TaskSettings
from mcpkit.session.channel import Channel

ERAS = ["2026-07-28", "2025-11-25"]


class PollClock:
    """A channel wrapper noting when each ``tasks/get`` is sent."""

    def __init__(self) -> None:
        self.polls: list[float] = []

    def __call__(self, channel: Channel) -> Channel:
        clock = self

        class Timed:
            def __getattr__(self, name: str) -> Any:
                return getattr(channel, name)

            def __setattr__(self, name: str, value: Any) -> None:
                setattr(channel, name, value)

            def write(self, data: bytes, related: Any = None) -> None:
                if msgspec.json.decode(data).get("method") == "tasks/get":
                    clock.polls.append(time.monotonic())
                channel.write(data, related)

        return Timed()  # type: ignore[return-value]

    def gaps(self) -> list[float]:
        return [later - earlier for earlier, later in zip(self.polls, self.polls[1:], strict=False)]


def make_server(poll_interval: float, release: asyncio.Event) -> MCPServer:
    server = MCPServer("polled", tasks=TaskSettings(poll_interval=poll_interval))

    @server.tool(task="required")
    async def slow() -> str:
        """Works until the test has seen enough polls."""
        await release.wait()
        return "done"

    return server


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("suggested", "least", "most"), [(0.2, 0.2, 0.8), (0.001, MIN_POLL_INTERVAL, 0.5)], ids=["200ms", "1ms"]
)
async def test_polls_follow_the_servers_interval(
    era: str, suggested: float, least: float, most: float
) -> None:
    release = asyncio.Event()
    clock = PollClock()
    async with Client(make_server(suggested, release), protocol=era, channel_wrapper=clock) as client:
        calling = asyncio.ensure_future(client.call_tool("slow"))
        async with asyncio.timeout(10):
            while len(clock.polls) < 5:
                await asyncio.sleep(0.01)
        release.set()
        result = await calling
    assert isinstance(result.content[0], t.TextContent) and result.content[0].text == "done"
    # (A small allowance for the timer's granularity.)
    assert min(clock.gaps()) >= least * 0.9, clock.gaps()
    # Nor the client's own default of a second: the server's suggestion is what counts.
    assert statistics.median(clock.gaps()) < most, clock.gaps()

"""A server with every built-in limit, run as a real process by the limit tests (stdio, and
``mcpkit run --workers 2 --redis``: the rate limits then live in Redis, shared by the workers)."""

import asyncio
import os
from collections.abc import Callable

from mcpkit import Context, MCPServer
from mcpkit.middleware import ConcurrencyLimit, RateLimit, Timeout


def only(tool: str) -> Callable[[Context], str | None]:
    """Key every call of ``tool`` under one limit; leave everything else unlimited."""
    return lambda ctx: "" if ctx.request.target == tool else None


server = MCPServer(
    "limits",
    middleware=[
        RateLimit("10/minute", per=only("limited"), name="limited"),
        RateLimit("2/minute", methods=["prompts/get"], name="prompts"),
        Timeout(per_tool={"hang": 0.2}),
        ConcurrencyLimit(1, per=only("hold"), mode="reject"),
    ],
)
cancelled: list[str] = []
release = asyncio.Event()


@server.tool()
def pid() -> str:
    """The id of the process that answered."""
    return str(os.getpid())


@server.tool()
def limited() -> str:
    """At most 10 calls a minute (RateLimit middleware), answers with the process id."""
    return str(os.getpid())


@server.tool(rate_limit="10/minute")
def quota() -> str:
    """At most 10 calls a minute (the per-tool option), answers with the process id."""
    return str(os.getpid())


async def _forever(name: str) -> str:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.append(name)
        raise
    return "never"


@server.tool()
async def hang() -> str:
    """Never answers by itself (Timeout(per_tool={"hang": 0.2}) cancels it)."""
    return await _forever("hang")


@server.tool(timeout=0.2)
async def hang_option() -> str:
    """Never answers by itself (its timeout=0.2 option cancels it)."""
    return await _forever("hang_option")


@server.tool()
def was_cancelled() -> str:
    """The tools that were cancelled so far."""
    return ",".join(cancelled)


holding: list[bool] = []


@server.tool()
async def hold() -> str:
    """Runs until `let_go` is called (ConcurrencyLimit: one at a time, others refused)."""
    holding.append(True)
    await release.wait()
    release.clear()
    return "released"


@server.tool()
def is_holding() -> str:
    """Whether a `hold` has started."""
    return "yes" if holding else "no"


@server.tool()
async def let_go() -> str:
    """Ends the running `hold` (async: asyncio.Event is not thread-safe, and a plain def
    starts in a worker thread)."""
    release.set()
    return "ok"


@server.prompt()
def greet(name: str) -> str:
    """At most 2 a minute."""
    return f"hello {name}"


if __name__ == "__main__":
    server.run()

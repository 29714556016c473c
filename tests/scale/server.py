"""The server of the scale-out tests: each worker process runs one copy.

    mcpkit run tests/scale/server.py --transport http --host 127.0.0.1 --port 8001

Workers share nothing but Redis (``MCPKIT_REDIS_URL``, ``MCPKIT_REDIS_PREFIX``)
and the ``requestState`` key (``MCPKIT_STATE_SECRET``). Every tool says which
worker ran it where that helps a test tell the workers apart (``whoami``).
"""

from __future__ import annotations

import asyncio
import os

from mcpkit import Context, MCPServer

server = MCPServer("scale-test", "1.0.0")

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
COLOR_SCHEMA = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
counter = 0


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def whoami() -> str:
    """The worker's process id."""
    return str(os.getpid())


@server.tool()
async def ticker(n: int, delay: float, ctx: Context) -> str:
    """Logs ``{"tick": i}`` (info) n times, ``delay`` seconds apart, then returns."""
    for i in range(n):
        await ctx.info({"tick": i})
        await asyncio.sleep(delay)
    return f"ticked {n}"


@server.tool()
async def poll_ticker(n: int, delay: float, close_after: int, ctx: Context) -> str:
    """Like ``ticker``, but ends its SSE response after ``close_after`` ticks (SSE polling)."""
    for i in range(n):
        if i == close_after:
            ctx.close_sse_stream()
        await ctx.info({"tick": i})
        await asyncio.sleep(delay)
    return f"ticked {n}"


@server.tool()
async def chatty(ctx: Context) -> str:
    """One log message at each of debug, info, warning and error."""
    for level in ("debug", "info", "warning", "error"):
        await ctx.log(level, {"level": level})  # type: ignore[arg-type]
    return "chatted"


@server.tool()
async def ask_name(ctx: Context) -> str:
    """Elicits a name (legacy: a server-to-client request on this call's stream)."""
    result = await ctx.elicit("What is your name?", NAME_SCHEMA)
    content = result.content if isinstance(result.content, dict) else {}
    return f"Hello, {content.get('name')}! ({result.action})"


@server.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Asks the client's model (legacy: ``sampling/createMessage`` on this call's stream)."""
    result = await ctx.sample(question, max_tokens=50)
    blocks = result.content if isinstance(result.content, list) else [result.content]
    text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
    return f"The model says: {text}"


@server.tool()
async def greet_twice(ctx: Context) -> str:
    """Two rounds of questions (2026-07-28: two input_required results, then the answer)."""
    first = await ctx.elicit("What is your name?", NAME_SCHEMA, key="step1")
    second = await ctx.elicit("What is your favorite color?", COLOR_SCHEMA, key="step2")
    name = first.content.get("name") if isinstance(first.content, dict) else None
    color = second.content.get("color") if isinstance(second.content, dict) else None
    return f"{name} likes {color}"


@server.tool()
async def touch(uri: str, n: int, delay: float) -> str:
    """Announces ``n`` updates of ``uri`` (``notifications/resources/updated``), ``delay`` apart."""
    global counter
    for i in range(n):
        if i:
            await asyncio.sleep(delay)
        counter += 1
        server.notify_resource_updated(uri)
    return f"touched {uri} {n} times"


@server.tool()
def add_tool(name: str) -> str:
    """Adds a tool called ``name`` on this worker (tools list_changed goes to every client)."""

    def dynamic() -> str:
        return f"I am {name}"

    server.add_tool(dynamic, name=name, description=f"added at run time: {name}")
    return f"added {name}"


@server.tool()
def remove_tool(name: str) -> str:
    """Removes a tool from this worker (tools list_changed)."""
    server.remove_tool(name)
    return f"removed {name}"


@server.resource("mem://counter", mime_type="text/plain")
def read_counter() -> str:
    """How many updates this worker announced."""
    return str(counter)


if __name__ == "__main__":
    server.run("http")

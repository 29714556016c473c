"""A server whose tools run as tasks (the tasks extension) and ask things on the way.

Polls are suggested every 200 ms. Run over stdio (default) or ``python tasker.py
http PORT`` for Streamable HTTP.
"""

from __future__ import annotations

import asyncio
import sys

from mcpkit import Context, MCPServer
from mcpkit.server.tasks import TaskSettings

server = MCPServer("tasker", "0.1.0", tasks=TaskSettings(poll_interval=0.2))


@server.tool(task="optional")
async def steps(count: int, ctx: Context) -> str:
    """Works in steps, each one said in the task's status message."""
    for i in range(count):
        await ctx.report_progress(i + 1, count, "step")
        await asyncio.sleep(0.4)
    return f"{count} steps done"


@server.tool(task="optional")
async def draft(topic: str, ctx: Context) -> str:
    """Asks the client's model for a draft (sampling, inside the task)."""
    result = await ctx.sample(f"Draft a note about {topic}", max_tokens=50)
    content = result.content if isinstance(result.content, dict) else {}
    return f"{result.model} drafted: {content.get('text')}"


@server.tool(task="optional")
async def where(ctx: Context) -> str:
    """Lists the client's roots (inside the task)."""
    return ", ".join(root.uri for root in await ctx.list_roots())


@server.tool(task="required")
async def approve(item: str, ctx: Context) -> str:
    """Must run as a task (2025-11-25: the client asks for one); asks for an approval."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answer = await ctx.elicit(f"Approve {item}?", schema)
    ok = answer.action == "accept" and isinstance(answer.content, dict) and answer.content.get("ok") is True
    return f"{'approved' if ok else 'refused'} {item}"


@server.tool(task="optional")
async def big(size: int) -> str:
    """A large result."""
    await asyncio.sleep(0.1)
    return "x" * size


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("http", port=int(sys.argv[2]))
    else:
        server.run()

"""A server that asks things of its client (elicitation, sampling) and sends hostile content.

Run over stdio (default) or ``python asker.py http PORT`` for Streamable HTTP.
"""

from __future__ import annotations

import sys

from mcpkit import Context, MCPServer
from mcpkit.protocol import types as t

server = MCPServer("asker", "0.1.0", instructions="<b>Asks</b> the user things.")

PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "What to call you"},
        "age": {"type": "integer", "minimum": 0},
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
        "subscribe": {"type": "boolean", "default": False},
    },
    "required": ["name"],
}


@server.tool()
async def greet(ctx: Context) -> str:
    """Ask for the user's name (elicitation), then greet them."""
    result = await ctx.elicit("Who are you?", PROFILE_SCHEMA)
    if result.action != "accept" or not isinstance(result.content, dict):
        return f"no answer ({result.action})"
    c = result.content
    return f"Hello {c['name']}! age={c.get('age')} color={c.get('color')} subscribe={c.get('subscribe')}"


@server.tool()
async def haiku(topic: str, ctx: Context) -> str:
    """Ask the client's model for a haiku (sampling)."""
    result = await ctx.sample(f"Write a haiku about {topic}", max_tokens=50, system_prompt="Be brief.")
    content = result.content if isinstance(result.content, dict) else {}
    return f"{result.model} wrote: {content.get('text')}"


@server.tool(description='<img src=x id="pwned-desc" onerror="document.title=\'pwned\'">')
def hostile() -> list[object]:
    """Content that must stay inert in the page."""
    return [
        t.TextContent(text='<b id="pwned-text">bold?</b><script>document.title="pwned"</script>'),
        # Not an image type: must not become an <img>.
        t.ImageContent(data="PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", mime_type="text/html"),
        t.ImageContent(data="not base64!", mime_type="image/png"),
        t.ResourceLink(uri="javascript:alert(1)", name='<a id="pwned-link">x</a>'),
    ]


@server.tool()
async def chatty(steps: int, ctx: Context) -> str:
    """Logs and reports progress."""
    for i in range(steps):
        await ctx.info(f"step {i}")
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return "done"


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("http", port=int(sys.argv[2]))
    else:
        server.run()

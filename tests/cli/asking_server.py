"""A server for the CLI findings tests (issue 19): its tools log, ask the user (elicitation)
and ask for the client's roots, in either era.

``ASKING_SERVER_ERA=legacy`` (or ``modern``) serves that era only; both by default.
"""

from __future__ import annotations

import json
import os

from mcpkit import Context, MCPServer
from mcpkit.protocol.versions import ALL_VERSIONS, LEGACY_VERSIONS, MODERN_VERSIONS

_ERA = os.environ.get("ASKING_SERVER_ERA", "both")
server = MCPServer(
    "asking-server",
    "0.3.0",
    versions={"legacy": LEGACY_VERSIONS, "modern": MODERN_VERSIONS}.get(_ERA, ALL_VERSIONS),
)

SIGNUP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "What to call you", "minLength": 2},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "color": {"type": "string", "enum": ["red", "green", "blue"], "default": "green"},
        "plan": {
            "type": "string",
            "oneOf": [{"const": "p1", "title": "Free"}, {"const": "p2", "title": "Pro"}],
        },
        "subscribe": {"type": "boolean", "default": False},
    },
    "required": ["name"],
}


@server.tool()
async def signup(ctx: Context) -> str:
    """Asks the user for a profile (a form with defaults and enums); answers what came back."""
    result = await ctx.elicit("Sign up for the newsletter", SIGNUP_SCHEMA)
    content = result.content if isinstance(result.content, dict) else None
    return json.dumps({"action": result.action, "content": content}, sort_keys=True)


@server.tool()
async def where(ctx: Context) -> str:
    """The client's roots."""
    return " ".join(root.uri for root in await ctx.list_roots())


@server.tool()
async def chatty(ctx: Context) -> str:
    """Logs at two levels, then answers."""
    await ctx.debug("chatty debug line")
    await ctx.info("chatty info line")
    return "chatted"


if __name__ == "__main__":
    server.run()

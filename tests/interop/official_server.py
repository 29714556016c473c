"""A server written with the official MCP Python SDK (``mcp.server.MCPServer``).

Run as a stdio subprocess by ``test_official_server.py`` and driven by mcpkit's
``Client``. It never imports mcpkit.
"""

from __future__ import annotations

import warnings
from typing import TypedDict

from mcp import MCPDeprecationWarning
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Image
from mcp_types import Completion

# The SDK flags the logging capability as deprecated for 2026-07-28; it still
# works in both eras, and the warning would only clutter stderr.
warnings.simplefilter("ignore", MCPDeprecationWarning)

server = MCPServer("official-server", version="4.5.6", instructions="Served by the official SDK.")


class Weather(TypedDict):
    city: str
    celsius: float


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def weather(city: str) -> Weather:
    """Structured output."""
    return {"city": city, "celsius": 21.5}


@server.tool()
def fail(message: str) -> str:
    """Always raises."""
    raise ValueError(message)


@server.tool()
async def work(steps: int, ctx: Context) -> str:
    """Logs at two levels and reports progress for each step."""
    await ctx.debug("debug detail")
    await ctx.info(f"working {steps} steps")
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"worked {steps}"


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.resource("config://app", mime_type="application/json")
def config() -> str:
    """The app configuration."""
    return '{"theme": "dark"}'


@server.resource("users://{user_id}/profile")
def profile(user_id: str) -> str:
    """A user's profile."""
    return f"profile of {user_id}"


@server.resource("data://blob", mime_type="application/octet-stream")
def blob() -> bytes:
    """Binary contents."""
    return b"\x00\x01\x02\xff"


@server.prompt()
def review(code: str) -> str:
    """Review some code."""
    return f"Please review:\n{code}"


@server.prompt()
def repeat(word: str, times: int) -> str:
    """A prompt with a non-string argument (sent as a JSON-encoded string)."""
    return " ".join([word] * times)


@server.completion()
async def complete(ref: object, argument: object, context: object) -> Completion:
    value = getattr(argument, "value", "")
    return Completion(values=[v for v in ("python", "pascal", "perl") if v.startswith(value)])


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1] in ("streamable-http", "sse"):
        # `official_server.py streamable-http PORT [json]`: serve over HTTP instead of stdio.
        server.run(
            sys.argv[1],
            host="127.0.0.1",
            port=int(sys.argv[2]),
            **({"json_response": True} if sys.argv[1:4][-1] == "json" else {}),
        )
    else:
        server.run()

"""A server exercising most of the framework, run as a real subprocess by tests."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Annotated

from mcpkit import Context, Image, MCPServer

server = MCPServer(
    "kitchen-sink",
    "1.2.3",
    instructions="A test server.",
    max_line_bytes=int(os.environ.get("MAX_LINE_BYTES", 1 << 16)),
)


@dataclass
class Forecast:
    city: str
    celsius: float


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: Annotated[int, "second addend"] = 1) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def forecast(city: str) -> Forecast:
    """Structured output."""
    return Forecast(city=city, celsius=21.5)


@server.tool()
def fail(message: str) -> str:
    """Always raises."""
    raise ValueError(message)


@server.tool()
async def sleep(seconds: float, ctx: Context) -> str:
    """Sleeps, reporting progress."""
    await ctx.report_progress(0, seconds, "starting")
    await ctx.info(f"sleeping {seconds}s")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        # Tests that cancel a call see it reach the handler through this file.
        marker = os.environ.get("KITCHEN_SINK_CANCELLED")
        if marker:
            with open(marker, "w") as f:
                f.write(str(seconds))
        raise
    await ctx.report_progress(seconds, seconds, "done")
    return f"slept {seconds}"


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG."""
    return Image(
        data=bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
        ),
        format="png",
    )


@server.tool()
def shout(text: str) -> None:
    """Prints to stdout (must not corrupt the protocol) and returns nothing."""
    print("SHOUT", text)


@server.resource("config://app", mime_type="application/json")
def config() -> str:
    return '{"theme": "dark"}'


@server.resource("users://{user_id}/profile")
def profile(user_id: int) -> dict[str, object]:
    """A user's profile."""
    return {"id": user_id, "name": f"user{user_id}"}


@server.prompt()
def review(code: str, language: str = "python") -> str:
    """Review some code."""
    return f"Review this {language}:\n{code}"


@server.completion()
def complete(ref: object, argument: object, context: dict[str, str]) -> list[str]:
    return [v for v in ("python", "pascal", "perl") if v.startswith(getattr(argument, "value", ""))]


if __name__ == "__main__":
    server.run()

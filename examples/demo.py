"""The `make run` demo: mcpkit's client spawns the seed weather server over stdio,
discovers its era, and uses every kind of thing it offers."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from mcpkit import Client

SERVER = Path(__file__).parent / "weather" / "server.py"


async def main() -> None:
    started = time.perf_counter()
    async with Client([sys.executable, str(SERVER)]) as client:
        elapsed = (time.perf_counter() - started) * 1000
        info = client.server_info
        print(f"connected to {info.name if info else '?'} in {elapsed:.0f} ms, "
              f"protocol {client.protocol_version} ({'modern' if client.is_modern else 'legacy'} era)")

        tools = await client.list_tools()
        for tool in tools:
            print(f"tool   {tool.name}: {tool.description}  schema={tool.input_schema}")
        for args in ({"city": "北京"}, {"city": "Paris", "days": 5}):
            name = "get_weather" if len(args) == 1 else "get_forecast"
            result = await client.call_tool(name, args)
            print(f"call   {name}({args}) -> {result.content[0].text}")  # type: ignore[union-attr]

        for resource in await client.list_resources():
            contents = await client.read_resource(resource.uri)
            print(f"read   {resource.uri} -> {contents.contents[0].text}")

        for prompt in await client.list_prompts():
            got = await client.get_prompt(prompt.name, {"code": "print('hi')"})
            print(f"prompt {prompt.name} -> {got.messages[0].content.text!r}")  # type: ignore[union-attr]

    async with Client([sys.executable, str(SERVER)], protocol="legacy") as legacy:
        result = await legacy.call_tool("get_weather", {"city": "Tokyo"})
        print(f"legacy {legacy.protocol_version}: get_weather -> {result.content[0].text}")  # type: ignore[union-attr]


if __name__ == "__main__":
    asyncio.run(main())

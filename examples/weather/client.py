# From the seed encyclopedia entry on MCP ("Python Client" section). Only the
# two import lines differ from the original, which used the official SDK.
import asyncio
from mcpkit import ClientSession, StdioServerParameters
from mcpkit.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(
        command="python",
        args=["server.py"],
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()           # 握手
            tools = await session.list_tools()   # 发现工具
            print([t.name for t in tools.tools])
            # 调用工具
            result = await session.call_tool("get_weather", {"city": "北京"})
            print(result.content[0].text)

asyncio.run(main())

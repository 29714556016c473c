# From the seed encyclopedia entry on MCP ("Python SDK" section): the weather
# server, its config resource and its code-review prompt. Only the import differs.
from mcpkit import MCPServer as FastMCP

mcp = FastMCP("weather-server")

@mcp.tool()
def get_weather(city: str) -> str:
    """获取指定城市的天气"""
    # 实际场景调用天气 API
    return f"{city}: 晴 25°C"

@mcp.tool()
def get_forecast(city: str, days: int = 3) -> str:
    """获取未来几天的天气预报"""
    return f"{city} 未来 {days} 天: 多云转晴"

@mcp.resource("config://app")
def get_config() -> str:
    """返回应用配置"""
    return '{"theme": "dark", "lang": "zh"}'

@mcp.prompt()
def code_review(code: str) -> str:
    """代码审查提示模板"""
    return f"请审查以下代码，按严重程度分级指出问题:\n\n{code}"

if __name__ == "__main__":
    mcp.run()  # 默认 stdio 传输

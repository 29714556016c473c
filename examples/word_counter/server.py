# From the seed document "A06: MCP protocol explained" (Python, stdio transport);
# only the import line differs from the original.
from mcpkit import MCPServer as FastMCP

# Create the server
mcp = FastMCP("word-counter")

# Register a tool
@mcp.tool()
def count_words(text: str) -> str:
    """Count the number of words in a text string."""
    word_count = len(text.strip().split())
    return f"Word count: {word_count}"

# Register a resource
@mcp.resource("info://server")
def server_info() -> str:
    """Return server status information."""
    import json, time
    return json.dumps({
        "name": "word-counter",
        "timestamp": time.time(),
    })

# Start the server (stdio transport)
if __name__ == "__main__":
    mcp.run(transport="stdio")

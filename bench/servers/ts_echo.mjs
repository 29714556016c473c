// TypeScript SDK (@modelcontextprotocol/sdk 1.x) stdio echo server for the benchmark: one tool,
// echo(text) -> text, registered with a zod input schema and no output schema (the result is `content` only).
// Usage: node ts_echo.mjs   (the SDK is loaded from .cache/bench-node; see _node_sdk.mjs)
import { sdk, zod } from "./_node_sdk.mjs";

const [{ McpServer }, { StdioServerTransport }, { z }] = await Promise.all([
  sdk("server/mcp.js"),
  sdk("server/stdio.js"),
  zod(),
]);

const server = new McpServer({ name: "echo", version: "0" });
server.registerTool(
  "echo",
  { description: "Return the text unchanged.", inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);
await server.connect(new StdioServerTransport());

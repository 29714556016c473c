// A server written with the TypeScript SDK, served over stdio, for tests/proxy/test_sdk_backends.py.
// Usage: node ts_server.mjs NODE_MODULES_DIR
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [modules] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(modules, rel)).href);
const { McpServer } = await load("@modelcontextprotocol/sdk/dist/esm/server/mcp.js");
const { StdioServerTransport } = await load("@modelcontextprotocol/sdk/dist/esm/server/stdio.js");
const { z } = await load("zod/index.js");

const server = new McpServer({ name: "ts-backend", version: "1.2.3" }, { capabilities: { logging: {} } });

server.registerTool("echo", { description: "Echo", inputSchema: { text: z.string() } }, async ({ text }) => ({
  content: [{ type: "text", text }],
}));

server.registerTool(
  "add",
  { description: "Add", inputSchema: { a: z.number(), b: z.number() }, outputSchema: { sum: z.number() } },
  async ({ a, b }) => ({
    content: [{ type: "text", text: String(a + b) }],
    structuredContent: { sum: a + b },
    _meta: { "example.com/by": "ts" },
  }),
);

server.registerTool("fail", { description: "Fails", inputSchema: {} }, async () => ({
  content: [{ type: "text", text: "it failed" }],
  isError: true,
}));

server.registerTool("steps", { description: "Progress", inputSchema: {} }, async (_args, extra) => {
  const token = extra._meta?.progressToken;
  for (const step of [1, 2]) {
    if (token !== undefined) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: step, total: 2 },
      });
    }
  }
  return { content: [{ type: "text", text: "stepped" }] };
});

server.registerTool("ask", { description: "Elicits", inputSchema: {} }, async () => {
  const answer = await server.server.elicitInput({
    message: "Name?",
    requestedSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
  });
  return { content: [{ type: "text", text: `${answer.action}:${answer.content?.name}` }] };
});

server.registerTool("think", { description: "Samples", inputSchema: {} }, async () => {
  const result = await server.server.createMessage({
    messages: [{ role: "user", content: { type: "text", text: "ping" } }],
    maxTokens: 20,
  });
  return { content: [{ type: "text", text: `model: ${result.content.text}` }] };
});

server.registerResource("config", "config://app", { mimeType: "application/json" }, async (uri) => ({
  contents: [{ uri: uri.href, mimeType: "application/json", text: '{"theme":"dark"}' }],
}));

server.registerPrompt("review", { description: "Review", argsSchema: { code: z.string() } }, ({ code }) => ({
  messages: [{ role: "user", content: { type: "text", text: `Review: ${code}` } }],
}));

await server.connect(new StdioServerTransport());

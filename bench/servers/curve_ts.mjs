// TypeScript SDK (@modelcontextprotocol/sdk 1.x) server for the cost-curve benchmarks: the same tools,
// resources and arguments as curve_mcpkit.py. Usage: node curve_ts.mjs N stdio | node curve_ts.mjs N http PORT MODE
// (MODE json or sse: stateful sessions, enableJsonResponse on or off). The SDK does not page its lists.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { sdk, zod } from "./_node_sdk.mjs";

const [{ McpServer, ResourceTemplate }, { StdioServerTransport }, { StreamableHTTPServerTransport }, { isInitializeRequest }, { z }] =
  await Promise.all([sdk("server/mcp.js"), sdk("server/stdio.js"), sdk("server/streamableHttp.js"), sdk("types.js"), zod()]);

const n = Number(process.argv[2]);
const kind = process.argv[3];

function makeServer() {
  const server = new McpServer({ name: "curve", version: "0" });
  server.registerTool("text", { description: "Return size characters.", inputSchema: { size: z.number().int() } },
    async ({ size }) => ({ content: [{ type: "text", text: "x".repeat(size) }] }));
  server.registerResource("text_resource", new ResourceTemplate("payload://text/{size}", { list: undefined }),
    { mimeType: "text/plain" },
    async (uri, { size }) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: "x".repeat(Number(size)) }] }));
  server.registerResource("blob_resource", new ResourceTemplate("payload://blob/{size}", { list: undefined }),
    { mimeType: "application/octet-stream" },
    async (uri, { size }) => ({
      contents: [{ uri: uri.href, mimeType: "application/octet-stream", blob: Buffer.alloc(Number(size)).toString("base64") }],
    }));
  for (let i = 0; i < n; i++) {
    server.registerTool(`tool_${i}`, { description: `Filler tool ${i}.`, inputSchema: { value: z.string() } },
      async ({ value }) => ({ content: [{ type: "text", text: value }] }));
    server.registerResource(`res_${i}`, `res://${i}`, {}, async (uri) => ({ contents: [{ uri: uri.href, text: "r" }] }));
    server.registerResource(`tmpl_${i}`, new ResourceTemplate(`tmpl${i}://{id}/item`, { list: undefined }), {},
      async (uri, { id }) => ({ contents: [{ uri: uri.href, text: String(id) }] }));
  }
  return server;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined));
    req.on("error", reject);
  });
}

if (kind === "stdio") {
  await makeServer().connect(new StdioServerTransport());
} else {
  const port = Number(process.argv[4]);
  const mode = process.argv[5] || "json";
  const transports = new Map();
  http
    .createServer(async (req, res) => {
      const sid = req.headers["mcp-session-id"];
      const body = req.method === "POST" ? await readBody(req) : undefined;
      let transport = sid ? transports.get(sid) : undefined;
      if (!transport) {
        if (sid || req.method !== "POST" || !isInitializeRequest(body)) {
          res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "no session" } }));
          return;
        }
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: mode === "json",
          onsessioninitialized: (id) => transports.set(id, transport),
        });
        transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
        await makeServer().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    })
    .listen(port, "127.0.0.1");
}

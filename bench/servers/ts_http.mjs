// TypeScript SDK (@modelcontextprotocol/sdk 1.x) Streamable HTTP echo server for the HTTP benchmark.
// Usage: node ts_http.mjs PORT [MODE]. node:http on 127.0.0.1, endpoint /mcp, one echo tool (zod input schema,
// `content`-only result). The SDK is loaded from .cache/bench-node (see _node_sdk.mjs). MODE:
//   json (default)   stateful: one StreamableHTTPServerTransport per session, enableJsonResponse: true;
//   sse              stateful, the SDK default (SSE responses);
//   stateless-json   a new McpServer + transport per request (sessionIdGenerator: undefined,
//                    enableJsonResponse: true), the SDK's documented stateless pattern.
// The SDK 1.x speaks the handshake-era revisions only (no 2026-07-28 "modern" requests).
import http from "node:http";
import { randomUUID } from "node:crypto";
import { sdk, zod } from "./_node_sdk.mjs";

const [{ McpServer }, { StreamableHTTPServerTransport }, { isInitializeRequest }, { z }] = await Promise.all([
  sdk("server/mcp.js"),
  sdk("server/streamableHttp.js"),
  sdk("types.js"),
  zod(),
]);

const port = Number(process.argv[2]);
const mode = process.argv[3] || "json";
if (!["json", "sse", "stateless-json"].includes(mode)) {
  console.error(`unsupported mode: ${mode}`);
  process.exit(2);
}

function makeServer() {
  const server = new McpServer({ name: "echo", version: "0" });
  server.registerTool(
    "echo",
    { description: "Return the text unchanged.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
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

function fail(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message } }));
}

const transports = new Map(); // session id -> transport (stateful modes)

async function stateful(req, res) {
  const sid = req.headers["mcp-session-id"];
  const body = req.method === "POST" ? await readBody(req) : undefined;
  let transport = sid ? transports.get(sid) : undefined;
  if (!transport) {
    if (sid || req.method !== "POST" || !isInitializeRequest(body)) {
      return fail(res, sid ? 404 : 400, sid ? "Session not found" : "Bad Request: no valid session ID");
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: mode === "json",
      onsessioninitialized: (id) => transports.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) transports.delete(transport.sessionId);
    };
    await makeServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
}

async function stateless(req, res) {
  if (req.method !== "POST") return fail(res, 405, "Method not allowed");
  const body = await readBody(req);
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

const handler = mode === "stateless-json" ? stateless : stateful;
http
  .createServer((req, res) => {
    const url = req.url || "";
    if (url !== "/mcp" && !url.startsWith("/mcp?")) return fail(res, 404, "Not found");
    handler(req, res).catch((err) => {
      console.error(err);
      if (!res.headersSent) fail(res, 500, "Internal error");
      else res.end();
    });
  })
  .listen(port, "127.0.0.1");

// The TypeScript SDK's HTTP clients: the legacy HTTP+SSE one (SSEClientTransport, the default) or
// the Streamable HTTP one (StreamableHTTPClientTransport, given "streamable"). Calls a tool COUNT
// times (one after another, or all at once) with a progress handler, and prints what each call saw
// and the errors the SDK reported.
// Usage: node ts_sse_progress_client.mjs SDK_DIR TOOL COUNT seq|par URL [sse|streamable]
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir, tool, count, mode, url, kind = "sse"] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(sdkDir, "dist", "esm", rel)).href);
const { Client } = await load("client/index.js");
let transport;
if (kind === "streamable") {
  const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(url));
} else {
  const { SSEClientTransport } = await load("client/sse.js");
  transport = new SSEClientTransport(new URL(url));
}
const client = new Client({ name: "ts-sse-progress-test", version: "1.0.0" });
const errors = [];
client.onerror = (error) => errors.push(String(error));
await client.connect(transport);

const call = async () => {
  const seen = [];
  const result = await client.callTool({ name: tool, arguments: {} }, undefined, {
    onprogress: (p) => seen.push(p.progress),
  });
  return { seen, text: result.content[0].text };
};
let calls;
if (mode === "par") {
  calls = await Promise.all(Array.from({ length: Number(count) }, call));
} else {
  calls = [];
  for (let i = 0; i < Number(count); i++) calls.push(await call());
}
await client.close();
console.log(JSON.stringify({ calls, errors }));

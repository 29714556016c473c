// The TypeScript SDK's StreamableHTTPClientTransport sending a 2025-03-26 JSON-RPC batch whose
// tool calls ask the client (roots/list, sampling/createMessage); the client answers each as the
// SDK does, by POSTing the response. With two URLs (two workers sharing sessions on Redis) the
// batch goes to the first and the answers to the last, other requests alternate.
// Prints the batch items' answers, every message received, and the errors the SDK reported.
// Usage: node ts_http_batch_client.mjs SDK_DIR URL [URL]
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir, ...urls] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(sdkDir, "dist", "esm", rel)).href);
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");

let turn = 0;
const route = (init) => {
  const body = typeof init?.body === "string" ? init.body : "";
  if (body.startsWith("[")) return urls[0];
  if (body.includes('"result"')) return urls[urls.length - 1];
  return urls[turn++ % urls.length];
};
const transport = new StreamableHTTPClientTransport(new URL(urls[0]), {
  fetch: (url, init) => fetch(route(init), init),
});
const errors = [];
const seen = [];
const waiting = new Map();
const answered = (id) => new Promise((resolve) => waiting.set(id, resolve));
transport.onerror = (error) => errors.push(String(error));
transport.onmessage = (message) => {
  seen.push(message);
  if ("method" in message && "id" in message) {
    const result =
      message.method === "roots/list"
        ? { roots: [{ uri: "file:///r", name: "r" }] }
        : { role: "assistant", content: { type: "text", text: "sampled" }, model: "m" };
    transport.send({ jsonrpc: "2.0", id: message.id, result }).catch((e) => errors.push(String(e)));
  } else if ("id" in message && waiting.has(message.id)) {
    waiting.get(message.id)(message);
  }
};
const timeout = (what) =>
  new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), 10000));

await transport.start();
const init = answered(1);
await transport.send({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: "2025-03-26",
    capabilities: { roots: {}, sampling: {} },
    clientInfo: { name: "ts-batch", version: "0" },
  },
});
await Promise.race([init, timeout("initialize")]);
await transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
const call = (id, name) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: {} } });
const finals = Promise.all([2, 3, 4, 5].map(answered));
// (Not awaited alone: a server that answers the batch as JSON only once every item is done
// never answers it at all when an item waits for the client.)
transport
  .send([call(2, "roots"), { jsonrpc: "2.0", id: 3, method: "ping" }, call(4, "sample"), call(5, "echo")])
  .catch((e) => errors.push(String(e)));
let answers = null;
try {
  answers = await Promise.race([finals, timeout("the batch's answers")]);
} catch (error) {
  errors.push(String(error));
}
await Promise.race([transport.close(), new Promise((resolve) => setTimeout(resolve, 1000))]);
console.log(JSON.stringify({ answers, seen, errors }));
process.exit(0);

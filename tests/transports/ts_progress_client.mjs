// The TypeScript SDK's client over stdio: calls a tool COUNT times (one after another, or all at
// once) with a progress handler, and prints what each call saw, the errors the SDK reported and
// the event loop the server says it runs on (its `loop` tool).
// Usage: node ts_progress_client.mjs SDK_DIR TOOL COUNT seq|par COMMAND [ARGS...]
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const [sdkDir, tool, count, mode, command, ...args] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(sdkDir, "dist", "esm", rel)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "ts-progress-test", version: "1.0.0" });
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
const loop = (await client.callTool({ name: "loop", arguments: {} })).content[0].text;
await client.close();
console.log(JSON.stringify({ calls, errors, loop }));

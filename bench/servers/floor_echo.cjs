// Hand-written Node floor: the least a stdio JSON-RPC echo server can do in Node.
// Reads one line at a time (node:readline), parses it with JSON.parse, answers initialize, tools/list and
// tools/call with hand-built objects, serializes with JSON.stringify and writes it (stdout to a pipe is
// synchronous on Linux). Notifications (no id) are ignored; unknown methods get -32601.
"use strict";
const readline = require("node:readline");

const TOOL = {
  name: "echo",
  description: "Return the text unchanged.",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

function answer(msg) {
  let result;
  switch (msg.method) {
    case "tools/call":
      result = { content: [{ type: "text", text: msg.params.arguments.text }], isError: false };
      break;
    case "initialize":
      result = {
        protocolVersion: msg.params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "floor-node", version: "0" },
      };
      break;
    case "tools/list":
      result = { tools: [TOOL] };
      break;
    default:
      return { jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } };
  }
  return { jsonrpc: "2.0", id: msg.id, result };
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  process.stdout.write(JSON.stringify(answer(msg)) + "\n");
});
rl.on("close", () => process.exit(0));

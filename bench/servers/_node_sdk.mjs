// Loads the TypeScript MCP SDK and zod for the benchmark's Node servers from the npm prefix that
// bench/peers.py installs them into (default: <repo>/.cache/bench-node; override with MCP_BENCH_NODE_PREFIX).
// ESM ignores NODE_PATH, so the files are imported by path: the SDK's package.json maps
// "@modelcontextprotocol/sdk/<sub>" to "./dist/esm/<sub>" for `import`, and zod's "." to "./index.js".
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const prefix = process.env.MCP_BENCH_NODE_PREFIX || path.resolve(here, "..", "..", ".cache", "bench-node");
const modules = path.join(prefix, "node_modules");

export function sdk(sub) {
  return import(pathToFileURL(path.join(modules, "@modelcontextprotocol", "sdk", "dist", "esm", sub)).href);
}

export function zod() {
  return import(pathToFileURL(path.join(modules, "zod", "index.js")).href);
}

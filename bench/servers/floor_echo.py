"""Hand-written floor: the least a stdio JSON-RPC echo server can do.

Reads one line at a time, parses it with orjson, answers ``initialize``, ``tools/list``
and ``tools/call`` with hand-built dicts, serializes with orjson, writes and flushes.
Notifications (no ``id``) are ignored; unknown methods get -32601.
"""

import sys
from typing import Any

import orjson

TOOL = {
    "name": "echo",
    "description": "Return the text unchanged.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(msg: dict[str, Any]) -> dict[str, Any]:
    method = msg.get("method")
    if method == "tools/call":
        text = msg["params"]["arguments"]["text"]
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "floor", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    else:
        return {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": msg["id"], "result": result}


def main() -> None:
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    for line in stdin:
        msg = orjson.loads(line)
        if "id" not in msg:
            continue
        stdout.write(orjson.dumps(answer(msg)) + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()

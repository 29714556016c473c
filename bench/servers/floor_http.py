"""Hand-written HTTP floor: the least a Streamable HTTP echo server can do, as a bare ASGI app.

Usage: ``python floor_http.py PORT [MODE]``. One uvicorn worker on 127.0.0.1 (asyncio loop, h11, access log
off: the same uvicorn defaults as the two SDK servers).

Every POST body is parsed with orjson and answered with a hand-built result: ``initialize`` (with a fresh
``Mcp-Session-Id``), ``tools/list`` and ``tools/call`` (echo). Notifications get 202, DELETE gets 200.
Nothing is validated (no Host/Origin check, no session lookup, no header checks). MODE ``sse`` answers each
request as a one-event ``text/event-stream`` (chunked, like an SSE response); every other mode
(``json``, ``modern``, ``modern-json``, ``stateless-json``) answers ``application/json``.
"""

import secrets
import sys
from typing import Any

import orjson
import uvicorn

TOOL = {
    "name": "echo",
    "description": "Return the text unchanged.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]

SSE = len(sys.argv) > 2 and sys.argv[2] == "sse"


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


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["method"] == "DELETE":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    msg = orjson.loads(body)
    if "id" not in msg:  # a notification
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    extra = []
    if msg.get("method") == "initialize":
        extra.append((b"mcp-session-id", secrets.token_urlsafe(24).encode()))
    data = orjson.dumps(answer(msg))
    if SSE:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + extra})
        await send(
            {
                "type": "http.response.body",
                "body": b"event: message\ndata: " + data + b"\n\n",
                "more_body": True,
            }
        )
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [*JSON_HEADERS, (b"content-length", str(len(data)).encode()), *extra]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)

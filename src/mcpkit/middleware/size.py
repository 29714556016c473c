"""``ResponseSizeLimit``: results larger than a limit are replaced by a clear error.

::

    from mcpkit.middleware import ResponseSizeLimit

    server = MCPServer(
        "files",
        middleware=[ResponseSizeLimit(1_000_000, tools={"export": 20_000_000, "thumbnail": None})],
    )

The size is that of the result encoded as JSON (``msgspec.json.encode``), as the
handler and the middleware inside this one returned it (the era's shaping
later adds a few dozen bytes of ``_meta``). Over the limit:

- a ``tools/call`` answers ``isError: true`` with the text
  ``result too large: N bytes > LIMIT`` (the model reads it and can ask for less);
- any other request answers the JSON-RPC error ``-32603`` with the same message
  and ``data: {"size": N, "limit": LIMIT}``.

``max_bytes`` applies to every request but the handshake (``initialize``,
``server/discover``: the server's own description, which a limit would only
turn into a server nobody can connect to); ``tools`` sets a tool's own limit by
name (``None``: no limit for that tool). Each oversized result is logged at
WARNING to ``mcpkit.size``. Measuring costs one extra encoding of each result
this middleware sees.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from ..protocol import types as t
from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..server.context import Context
from ..server.middleware import CallNext, Middleware

__all__ = ["ResponseSizeLimit"]

logger = logging.getLogger("mcpkit.size")
_encode = msgspec.json.Encoder().encode
#: Never limited: without their answer there is no connection at all.
_HANDSHAKE = frozenset({"initialize", "server/discover"})


class ResponseSizeLimit(Middleware):
    """Replace a result whose JSON encoding exceeds ``max_bytes`` with an error.

    ``tools`` maps a tool's name to its own limit in bytes, or to ``None`` for
    no limit. A tool over its limit answers ``isError: true`` ("result too
    large: N bytes > LIMIT"); any other request the JSON-RPC error ``-32603``
    with ``data`` ``{"size": N, "limit": LIMIT}``.
    """

    runs_inline = True  # no current task needed: calls of quick sync tools stay on the read path

    def __init__(self, max_bytes: int = 1_000_000, *, tools: Mapping[str, int | None] | None = None) -> None:
        for name, limit in {"": max_bytes, **(tools or {})}.items():
            if limit is not None and (not isinstance(limit, int) or limit < 0):
                what = f"the limit of tool {name!r}" if name else "max_bytes"
                raise ValueError(f"{what} must be a number of bytes, not {limit!r}")
        self.max_bytes = max_bytes
        self.tools: dict[str, int | None] = dict(tools or {})

    def limit_for(self, method: str, target: str | None) -> int | None:
        """The limit for a request: the tool's own, else ``max_bytes`` (None: no limit)."""
        if method == "tools/call" and target is not None and target in self.tools:
            return self.tools[target]
        if method in _HANDSHAKE:
            return None
        return self.max_bytes

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        """Run the request; measure its result against the limit."""
        result = await call_next(ctx)
        request = ctx.request
        limit = self.limit_for(request.method, request.target)
        if limit is None:
            return result
        size = len(_encode(result))
        if size <= limit:
            return result
        message = f"result too large: {size} bytes > {limit}"
        logger.warning("%s %s: %s", request.method, request.target or "-", message)
        if request.method == "tools/call":
            return t.CallToolResult(content=[t.TextContent(text=message)], is_error=True)
        raise MCPError(INTERNAL_ERROR, message, {"size": size, "limit": limit})

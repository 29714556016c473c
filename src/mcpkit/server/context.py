"""The per-request :class:`Context` a handler receives by annotating a parameter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol import types as t
from ..protocol.errors import MISSING_CLIENT_CAPABILITY, MCPError
from ..protocol.lifecycle import RequestScope
from ..protocol.types.client_features import LOG_LEVELS

if TYPE_CHECKING:
    from .connection import ServerConnection

__all__ = ["Context"]

_LEVEL_RANK: dict[str, int] = {name: i for i, name in enumerate(LOG_LEVELS)}


class Context:
    """What a tool, resource or prompt handler can know and do about its request.

    Declare a parameter annotated ``Context`` to receive it::

        @server.tool()
        async def slow(n: int, ctx: Context) -> str:
            await ctx.report_progress(0, n)
            await ctx.info("starting")
            ...
    """

    __slots__ = ("_conn", "_scope", "request_id")

    def __init__(self, conn: ServerConnection, scope: RequestScope, request_id: int | str) -> None:
        self._conn = conn
        self._scope = scope
        self.request_id = request_id

    # -- who is asking -------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        return self._scope.version.value

    @property
    def is_modern(self) -> bool:
        """True when the request came in the stateless (2026-07-28+) era."""
        return self._scope.is_modern

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self._scope.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._scope.client_capabilities

    @property
    def lifespan_context(self) -> Any:
        """Whatever the server's lifespan hook yielded."""
        return self._conn.server.lifespan_state

    @property
    def server(self) -> Any:
        return self._conn.server

    # -- progress and logging ------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the client asked for progress on this request."""
        token = self._scope.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and self._scope.version >= "2025-03-26":
            params["message"] = message
        self._conn.session.notify("notifications/progress", params)
        await self._conn.session.channel.drain()

    async def log(self, level: t.LoggingLevel, data: Any, *, logger: str | None = None) -> None:
        """Send ``notifications/message`` when ``level`` passes the client's threshold.

        Modern requests carry their own threshold in ``_meta`` and get nothing
        when they set none (2026-07-28 server/utilities/logging).
        """
        threshold = self._scope.log_level if self._scope.is_modern else self._conn.lifecycle.log_level
        if self._scope.is_modern and threshold is None:
            return
        if threshold is not None and _LEVEL_RANK.get(level, 0) < _LEVEL_RANK.get(threshold, 0):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._conn.session.notify("notifications/message", params)
        await self._conn.session.channel.drain()

    async def debug(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("debug", message, logger=logger)

    async def info(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("info", message, logger=logger)

    async def warning(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("warning", message, logger=logger)

    async def error(self, message: Any, *, logger: str | None = None) -> None:
        await self.log("error", message, logger=logger)

    # -- reaching back -------------------------------------------------------

    async def read_resource(self, uri: str) -> list[t.ResourceContents]:
        """Read one of this server's own resources."""
        return await self._conn.server._resources.read(uri, self)

    async def elicit(self, message: str, schema: dict[str, Any] | type[Any]) -> t.ElicitResult:
        """Ask the user for input shaped by ``schema`` (a JSON Schema or a type)."""
        self._require("elicitation")
        requested = schema if isinstance(schema, dict) else _schema_for(schema)
        raw = await self._server_request(
            "elicitation/create", {"message": message, "requestedSchema": requested}
        )
        return msgspec.json.decode(raw, type=t.ElicitResult)

    async def sample(
        self,
        messages: str | list[dict[str, Any]] | list[t.SamplingMessage],
        *,
        max_tokens: int = 512,
        system_prompt: str | None = None,
        temperature: float | None = None,
        **extra: Any,
    ) -> t.CreateMessageResult:
        """Ask the client's model for a completion (``sampling/createMessage``)."""
        self._require("sampling")
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": msgspec.to_builtins(messages), "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        raw = await self._server_request("sampling/createMessage", params)
        return msgspec.json.decode(raw, type=t.CreateMessageResult)

    async def list_roots(self) -> list[t.Root]:
        """The client's roots (``roots/list``)."""
        self._require("roots")
        raw = await self._server_request("roots/list", None)
        return msgspec.json.decode(raw, type=t.ListRootsResult).roots

    def _require(self, capability: str) -> None:
        if capability not in self._scope.client_capabilities:
            raise MCPError(
                MISSING_CLIENT_CAPABILITY,
                f"The client did not declare the {capability!r} capability",
                {"requiredCapabilities": {capability: {}}},
            )

    async def _server_request(self, method: str, params: dict[str, Any] | None) -> msgspec.Raw:
        if self._scope.is_modern:
            # Server-to-client requests do not exist in the modern era; they become
            # multi round-trip results (basic/patterns/mrtr), which need a transport
            # that re-issues the request. Said plainly rather than hanging.
            raise MCPError(
                MISSING_CLIENT_CAPABILITY,
                f"{method} needs a multi round-trip capable transport for modern requests",
            )
        return await self._conn.session.request(method, params)


def _schema_for(tp: type[Any]) -> dict[str, Any]:
    """A flat object schema for a dataclass / TypedDict / Struct, as elicitation wants."""
    (schema,), defs = msgspec.json.schema_components([tp], ref_template="{name}")
    name = schema.get("$ref")
    if isinstance(name, str):
        schema = defs[name]
    schema = {k: v for k, v in schema.items() if k not in ("title", "$defs")}
    if schema.get("type") != "object":
        raise TypeError(f"elicitation needs an object type, not {tp!r}")
    return schema

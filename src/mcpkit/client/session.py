"""``ClientSession``: the official SDK's client API over mcpkit's engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.versions import LATEST_LEGACY, ProtocolVersion
from ..session.channel import Channel
from .client import Client
from .options import ClientOptions

__all__ = ["ClientSession"]

R = TypeVar("R")


class ClientSession:
    """A session over an open channel, with the official SDK's method names.

    ::

        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
    """

    def __init__(
        self,
        read_stream: Channel,
        write_stream: Channel | None = None,
        read_timeout_seconds: timedelta | float | None = None,
        sampling_callback: Callable[..., Awaitable[Any]] | None = None,
        elicitation_callback: Callable[..., Awaitable[Any]] | None = None,
        list_roots_callback: Callable[..., Awaitable[Any]] | None = None,
        logging_callback: Callable[..., Awaitable[None]] | None = None,
        message_handler: Callable[..., Awaitable[None]] | None = None,
        client_info: t.Implementation | None = None,
        protocol_version: str | ProtocolVersion = LATEST_LEGACY,
    ) -> None:
        if write_stream is not None and write_stream is not read_stream:
            raise ValueError("mcpkit channels are bidirectional: pass the channel stdio_client yields")
        timeout = (
            read_timeout_seconds.total_seconds()
            if isinstance(read_timeout_seconds, timedelta)
            else read_timeout_seconds
        )
        options = ClientOptions(
            protocol=str(protocol_version),
            client_info=client_info,
            timeout=timeout if timeout is not None else 60.0,
            sampling_handler=(lambda p: sampling_callback(None, p)) if sampling_callback else None,
            elicitation_handler=(lambda p: elicitation_callback(None, p)) if elicitation_callback else None,
            roots=(lambda: _roots(list_roots_callback)) if list_roots_callback else None,
            log_handler=logging_callback,
            notification_handler=(lambda m, p: message_handler({"method": m, "params": p}))
            if message_handler
            else None,
        )
        self._client = Client.over(read_stream, options)
        self.initialize_result: t.InitializeResult | None = None

    async def __aenter__(self) -> ClientSession:
        await self._client._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.close()

    async def initialize(self) -> t.InitializeResult:
        """The ``initialize`` handshake (or era negotiation for a modern version)."""
        await self._client._negotiate()
        c = self._client
        self.initialize_result = t.InitializeResult(
            protocol_version=c.protocol_version.value,  # type: ignore[union-attr]
            capabilities=c.server_capabilities or t.ServerCapabilities(),
            server_info=c.server_info or t.Implementation(name="", version=""),
            instructions=c.instructions if c.instructions is not None else UNSET,
        )
        return self.initialize_result

    async def send_ping(self) -> t.EmptyResult:
        """Send ``ping``; returns an empty result once the server answers."""
        await self._client.ping()
        return t.EmptyResult()

    async def list_tools(self, cursor: str | None = None) -> t.ListToolsResult:
        """One page of tools (``tools/list``) from ``cursor``; ``next_cursor`` names the next page."""
        return await self._page("tools/list", cursor, t.ListToolsResult)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: timedelta | None = None,
        progress_callback: Callable[..., Any] | None = None,
    ) -> t.CallToolResult:
        """Call the tool ``name`` (``tools/call``); a tool's own failure comes back as ``is_error``."""
        timeout = read_timeout_seconds.total_seconds() if read_timeout_seconds else None
        return await self._client.call_tool(name, arguments, timeout=timeout, progress=progress_callback)

    async def list_resources(self, cursor: str | None = None) -> t.ListResourcesResult:
        """One page of resources (``resources/list``) from ``cursor``."""
        return await self._page("resources/list", cursor, t.ListResourcesResult)

    async def list_resource_templates(self, cursor: str | None = None) -> t.ListResourceTemplatesResult:
        """One page of resource templates (``resources/templates/list``) from ``cursor``."""
        return await self._page("resources/templates/list", cursor, t.ListResourceTemplatesResult)

    async def read_resource(self, uri: Any) -> t.ReadResourceResult:
        """Read the resource at ``uri`` (``resources/read``)."""
        return await self._client.read_resource(str(uri))

    async def subscribe_resource(self, uri: Any) -> t.EmptyResult:
        """Send ``resources/subscribe`` for ``uri``; returns an empty result."""
        await self._client.subscribe_resource(str(uri))
        return t.EmptyResult()

    async def unsubscribe_resource(self, uri: Any) -> t.EmptyResult:
        """Send ``resources/unsubscribe`` for ``uri``; returns an empty result."""
        await self._client.unsubscribe_resource(str(uri))
        return t.EmptyResult()

    async def list_prompts(self, cursor: str | None = None) -> t.ListPromptsResult:
        """One page of prompts (``prompts/list``) from ``cursor``."""
        return await self._page("prompts/list", cursor, t.ListPromptsResult)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> t.GetPromptResult:
        """Render the prompt ``name`` with ``arguments`` (``prompts/get``)."""
        return await self._client.get_prompt(name, arguments)

    async def complete(
        self, ref: Any, argument: dict[str, str], context_arguments: dict[str, str] | None = None
    ) -> t.CompleteResult:
        """Completions for ``argument`` (``{"name": ..., "value": ...}``) of the prompt or resource
        ``ref`` (``completion/complete``)."""
        ref_dict = ref if isinstance(ref, dict) else msgspec.to_builtins(ref)
        completion = await self._client.complete(
            ref_dict, argument["name"], argument["value"], context_arguments
        )
        return t.CompleteResult(completion=completion)

    async def set_logging_level(self, level: t.LoggingLevel) -> t.EmptyResult:
        """Set the server's log level (``logging/setLevel``; modern era: sent with every request)."""
        await self._client.set_logging_level(level)
        return t.EmptyResult()

    async def send_roots_list_changed(self) -> None:
        """Send ``notifications/roots/list_changed`` (legacy era; a no-op when modern)."""
        await self._client.send_roots_list_changed()

    async def _page(self, method: str, cursor: str | None, tp: type[R]) -> R:
        return await self._client._call(method, {} if cursor is None else {"cursor": cursor}, tp)


async def _roots(callback: Callable[..., Awaitable[Any]]) -> list[t.Root]:
    result = await callback(None)
    roots = getattr(result, "roots", result)
    return [r if isinstance(r, t.Root) else t.Root(uri=str(getattr(r, "uri", r))) for r in roots]

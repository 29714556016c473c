"""How a :class:`~mcpkit.client.Client` settles the era when it connects: ``server/discover``
(modern) or ``initialize`` (legacy), the fallback to HTTP+SSE, the era cached per server,
and the switch to a version a modern server supports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.errors import UNSUPPORTED_PROTOCOL_VERSION, MCPError
from ..protocol.versions import LATEST_LEGACY, LATEST_MODERN, MODERN_VERSIONS, ProtocolVersion, parse_version
from ..session.channel import Channel
from .targets import _HTTP, _Stdio
from .tasks import TASKS_REVISION

if TYPE_CHECKING:
    from .client import Client

__all__ = ["adopt_supported_version", "negotiate"]

# Era verdicts per server command (2026-07-28 basic/versioning: clients SHOULD
# cache the era for the lifetime of the server process; we keep it per command).
_ERA_CACHE: dict[tuple[str, ...], ProtocolVersion] = {}


async def negotiate(client: Client) -> None:
    """Settle the era as ``client.options.protocol`` says (and handshake, if legacy)."""
    mode = client.options.protocol
    if mode == "legacy":
        await initialize_or_fall_back(client, LATEST_LEGACY)
        return
    if mode == "modern":
        await discover(client, LATEST_MODERN, probe=False)
        return
    if mode != "auto":
        version = parse_version(mode)
        if version is None:
            raise ValueError(f"unknown protocol version {mode!r}")
        if version.is_modern:
            await discover(client, version, probe=False)
        else:
            await initialize_or_fall_back(client, version)
        return
    target = client._target
    if isinstance(target, _HTTP) and target.transport == "sse":
        # The 2024-11-05 HTTP+SSE transport belongs to the legacy era (2026-07-28 defines
        # stdio and Streamable HTTP only): no server/discover probe over it.
        await initialize(client, LATEST_LEGACY)
        return
    key: tuple[str, ...] = ()
    if client._url is not None:
        key = ("url", client._url)  # HTTP: cached per origin and endpoint
    elif isinstance(client._target, _Stdio):
        key = tuple(client.command_line())
    cached = _ERA_CACHE.get(key) if key else None
    if cached is not None:
        await (discover(client, cached, probe=False) if cached.is_modern else initialize(client, cached))
        return
    if not await discover(client, LATEST_MODERN, probe=True):
        await initialize_or_fall_back(client, LATEST_LEGACY)
    if key and client.protocol_version is not None:
        _ERA_CACHE[key] = client.protocol_version


async def initialize_or_fall_back(client: Client, version: ProtocolVersion) -> None:
    """``initialize``; over HTTP, a 404/405 means a 2024-11-05 HTTP+SSE server
    (2025-03-26 transports, "Backward Compatibility"): reconnect with that."""
    try:
        await initialize(client, version)
    except MCPError:
        channel = client._session.channel if client._session is not None else None
        status = getattr(channel, "last_status", None)
        target = client._target
        if not isinstance(target, _HTTP) or target.transport != "auto" or status not in (400, 404, 405):
            raise
        await switch_channel(client, await target.open("sse", client.options.max_message_bytes))
        await initialize(client, version)


async def switch_channel(client: Client, channel: Channel) -> None:
    if client._session is not None:
        await client._session.shutdown(grace=0)
    if client._reader is not None:
        client._reader.cancel()
    client._attach(channel)


async def discover(client: Client, version: ProtocolVersion, *, probe: bool) -> bool:
    """Try ``server/discover``; True when the server is modern (stdio "Backward Compatibility")."""
    client.protocol_version = version
    try:
        result = await client._call(
            "server/discover", {}, t.DiscoverResult, timeout=client.probe_timeout if probe else client.timeout
        )
    except MCPError as exc:
        if exc.code == UNSUPPORTED_PROTOCOL_VERSION:
            supported = (exc.data or {}).get("supported", []) if isinstance(exc.data, dict) else []
            mutual = [v for v in MODERN_VERSIONS if v.value in supported]
            if mutual:
                return await discover(client, mutual[-1], probe=False)
            if not probe:
                raise
        if not probe:
            raise
        client.protocol_version = None
        return False
    client.server_capabilities = result.capabilities
    client.instructions = result.instructions or None
    if result.meta and isinstance(result.meta.get("io.modelcontextprotocol/serverInfo"), dict):
        client.server_info = msgspec.convert(
            result.meta["io.modelcontextprotocol/serverInfo"], t.Implementation
        )
    return True


async def initialize(client: Client, version: ProtocolVersion) -> None:
    assert client._session is not None
    capabilities = client.handlers.capabilities()
    if version is TASKS_REVISION and client.options.tasks:
        # basic/utilities/tasks "Capabilities": a client that supports task-augmented
        # requests declares tasks; it receives none as tasks (requests: none, exhaustive).
        capabilities["tasks"] = {}
    params = {
        "protocolVersion": version.value,
        "capabilities": capabilities,
        "clientInfo": msgspec.to_builtins(client.client_info),
    }
    raw = await client._send(client._session, "initialize", params, client.timeout)
    result = msgspec.json.decode(raw, type=t.InitializeResult)
    answered = parse_version(result.protocol_version)
    if answered is None or answered.is_modern:
        raise MCPError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"server answered initialize with unsupported version {result.protocol_version!r}",
        )
    client.protocol_version = answered
    client._task_state.forget()
    client.server_info = result.server_info
    client.server_capabilities = result.capabilities
    client.instructions = result.instructions or None
    client._session.notify("notifications/initialized")
    channel = client._session.channel
    if hasattr(channel, "start_listening"):
        channel.protocol_version = answered.value  # type: ignore[attr-defined]
        channel.start_listening()
    if client.log_level is not None and result.capabilities.logging is not UNSET:
        await client.set_logging_level(client.log_level)


def adopt_supported_version(client: Client, exc: MCPError) -> bool:
    """On -32022 from a modern server, switch to a version it supports (if any)."""
    if exc.code != UNSUPPORTED_PROTOCOL_VERSION or not client.is_modern or not isinstance(exc.data, dict):
        return False
    supported = exc.data.get("supported")
    mutual = [v for v in MODERN_VERSIONS if isinstance(supported, list) and v.value in supported]
    if not mutual or mutual[-1] == client.protocol_version:
        return False
    client.protocol_version = mutual[-1]
    return True

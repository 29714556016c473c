"""Which era and revision a request is served under (2026-07-28 basic/versioning).

:class:`ServerLifecycle` is the server's per-connection state machine. It knows
nothing of I/O: the session feeds it each request's method and ``_meta`` and
gets back a :class:`RequestScope`, or an :class:`MCPError` to answer with.

- A request whose ``_meta`` names a protocol version is *modern*: served on its
  own, with the capabilities and identity it carries.
- ``initialize`` selects the *legacy* era for the rest of the connection; later
  requests without modern ``_meta`` are served under the negotiated revision.
- Anything else before ``initialize`` is refused.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from .errors import INVALID_PARAMS, INVALID_REQUEST, MCPError
from .meta import CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL, PROGRESS_TOKEN, PROTOCOL_VERSION
from .types.client_features import LOG_LEVELS
from .versions import ALL_VERSIONS, ProtocolVersion, negotiate_legacy, parse_version

__all__ = [
    "LEGACY_ONLY_METHODS",
    "LEGACY_TASK_METHODS",
    "MODERN_ONLY_METHODS",
    "Era",
    "LifecycleState",
    "RequestScope",
    "ServerLifecycle",
]


class Era(enum.Enum):
    LEGACY = "legacy"
    MODERN = "modern"


class LifecycleState(enum.Enum):
    #: Nothing received yet; only ``initialize``, ``ping`` and modern requests are served.
    NEW = "new"
    #: ``initialize`` answered; waiting for ``notifications/initialized``.
    INITIALIZING = "initializing"
    #: Legacy session established.
    READY = "ready"


# Removed in 2026-07-28 (changelog, major changes 2, 4, 5).
LEGACY_ONLY_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
# Introduced in 2026-07-28 (tasks/update with the tasks extension, SEP-2663).
MODERN_ONLY_METHODS = frozenset({"server/discover", "subscriptions/listen", "tasks/update"})
# The experimental tasks of 2025-11-25 (basic/utilities/tasks): no older revision has them.
# The tasks extension keeps tasks/get and tasks/cancel; tasks/result and tasks/list are
# gone from 2026-07-28 (-32601 there).
LEGACY_TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
_TASKS_SINCE = ProtocolVersion.V2025_11_25
_NOT_MODERN = LEGACY_ONLY_METHODS | (LEGACY_TASK_METHODS - {"tasks/get", "tasks/cancel"})


class RequestScope(msgspec.Struct):
    """What a server knows about one request: its era, revision and client.

    A struct for its cost: one is made for every request, in C.
    """

    era: Era
    version: ProtocolVersion
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    #: Minimum level for ``notifications/message`` during this request; None sends none.
    log_level: str | None
    progress_token: int | str | None

    @property
    def is_modern(self) -> bool:
        return self.era is Era.MODERN


class ServerLifecycle:
    """Per-connection era and handshake state for a dual-era server."""

    def __init__(self, supported: tuple[ProtocolVersion, ...] = ALL_VERSIONS) -> None:
        self.supported = supported
        self.legacy_supported = tuple(v for v in supported if not v.is_modern)
        self.state = LifecycleState.NEW
        self.version: ProtocolVersion | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] | None = None
        #: Set by ``logging/setLevel`` (legacy). None means "everything".
        self.log_level: str | None = None

    def supported_names(self) -> list[str]:
        """Supported revisions, newest first, as UnsupportedProtocolVersionError lists them."""
        return [v.value for v in reversed(self.supported)]

    def initialize(self, params: dict[str, Any]) -> ProtocolVersion:
        """Handle ``initialize``; returns the version to answer with."""
        if self.state is not LifecycleState.NEW:
            raise MCPError(INVALID_REQUEST, "Session already initialized")
        if not self.legacy_supported:
            raise MCPError(
                INVALID_REQUEST,
                "This server does not support the initialize handshake; supported versions: "
                + ", ".join(self.supported_names()),
            )
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        if not isinstance(params.get("protocolVersion"), str) or not isinstance(caps, dict):
            raise MCPError(INVALID_PARAMS, "initialize needs protocolVersion and capabilities")
        self.version = negotiate_legacy(params["protocolVersion"], self.legacy_supported)
        self.client_capabilities = caps
        self.client_info = info if isinstance(info, dict) else None
        self.state = LifecycleState.INITIALIZING
        return self.version

    def assume(self, version: ProtocolVersion) -> None:
        """Serve as if ``initialize`` had negotiated ``version`` (stateless legacy HTTP)."""
        self.version = version
        self.state = LifecycleState.READY

    def initialized(self) -> None:
        """Handle ``notifications/initialized``."""
        if self.state is LifecycleState.INITIALIZING:
            self.state = LifecycleState.READY

    def scope(self, method: str, meta: dict[str, Any] | None) -> RequestScope:
        """Classify a request, or raise the MCPError to answer it with."""
        token = meta.get(PROGRESS_TOKEN) if meta else None
        if meta and PROTOCOL_VERSION in meta and method != "initialize":
            return self._modern_scope(method, meta, token)
        if self.version is not None:
            if method in MODERN_ONLY_METHODS or (
                method in LEGACY_TASK_METHODS and self.version < _TASKS_SINCE
            ):
                raise MCPError.method_not_found(method)
            return RequestScope(
                Era.LEGACY, self.version, self.client_capabilities, self.client_info, self.log_level, token
            )
        if method == "initialize" or (method == "ping" and self.legacy_supported):
            version = self.legacy_supported[-1] if self.legacy_supported else self.supported[-1]
            return RequestScope(Era.LEGACY, version, {}, None, None, token)
        raise MCPError(
            INVALID_PARAMS,
            f'Missing "_meta.{PROTOCOL_VERSION}": send it with every request, '
            "or call initialize first to use a legacy protocol revision",
        )

    def _modern_scope(self, method: str, meta: dict[str, Any], token: int | str | None) -> RequestScope:
        requested = meta[PROTOCOL_VERSION]
        version = parse_version(requested)
        if version is None or not version.is_modern or version not in self.supported:
            raise MCPError.unsupported_version(requested, self.supported_names())
        caps = meta.get(CLIENT_CAPABILITIES)
        if not isinstance(caps, dict):
            raise MCPError(INVALID_PARAMS, f'Missing or invalid "_meta.{CLIENT_CAPABILITIES}"')
        if method in _NOT_MODERN:
            raise MCPError.method_not_found(method)
        info = meta.get(CLIENT_INFO)
        level = meta.get(LOG_LEVEL)
        if level is not None and level not in LOG_LEVELS:
            # 2026-07-28 server/utilities/logging: an unknown level SHOULD be -32602.
            raise MCPError(INVALID_PARAMS, f'Invalid "_meta.{LOG_LEVEL}": {level!r}')
        return RequestScope(
            Era.MODERN,
            version,
            caps,
            info if isinstance(info, dict) else None,
            level if isinstance(level, str) else None,
            token,
        )

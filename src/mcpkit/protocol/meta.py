"""Reserved ``_meta`` keys (2026-07-28 basic/index, "_meta")."""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT_CAPABILITIES",
    "CLIENT_INFO",
    "LOG_LEVEL",
    "PROGRESS_TOKEN",
    "PROTOCOL_VERSION",
    "SERVER_INFO",
    "SUBSCRIPTION_ID",
]

PROGRESS_TOKEN: Final = "progressToken"
PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

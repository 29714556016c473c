"""JSON-RPC and MCP error codes, and the exceptions that carry them.

Two families, after h11: :class:`MCPError` is an error *answer* (it has a wire
code and becomes a JSON-RPC error response), :class:`ProtocolError` means a peer
broke the framing or envelope rules and the message could not be understood.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HEADER_MISMATCH",
    "HTTP_TRANSPORT_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MESSAGE_TOO_LARGE",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "RATE_LIMITED",
    "REQUEST_CANCELLED",
    "REQUEST_TIMEOUT",
    "RESOURCE_NOT_FOUND_LEGACY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "MCPError",
    "ProtocolError",
]

# JSON-RPC 2.0 section 5.1.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# MCP codes. -32002 is resource-not-found up to 2025-11-25 (2026-07-28 uses -32602
# instead, basic/index "Error Codes"); -32042 exists in 2025-11-25 only.
RESOURCE_NOT_FOUND_LEGACY = -32002
URL_ELICITATION_REQUIRED = -32042
# mcpkit's own, in the implementation-defined range JSON-RPC leaves to servers
# (-32000..-32099) and outside the part 2026-07-28 reserves: a request refused by
# a rate limit; ``data.retryAfter`` says in how many seconds to try again.
RATE_LIMITED = -32010
# 2026-07-28 reserves -32020..-32099 for the specification.
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

# Local conditions, never sent on the wire (basic/index: local errors must not be
# mistakable for peer errors), so they live outside the JSON-RPC reserved range.
REQUEST_TIMEOUT = -1001
REQUEST_CANCELLED = -1002
#: An HTTP exchange failed (connection refused, a status with no JSON-RPC answer).
HTTP_TRANSPORT_ERROR = -1003
#: A message from the peer is larger than this side accepts (the client's
#: ``max_message_bytes``): it was discarded unread; ``data.limit`` is the limit.
MESSAGE_TOO_LARGE = -1004


class MCPError(Exception):
    """An error with a JSON-RPC code: raised by handlers, received by clients.

    Raise it from a server handler to answer with exactly this error; the client
    raises it when the peer answers a request with an error response.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"MCPError(code={self.code}, message={self.message!r})"

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    @classmethod
    def invalid_params(cls, message: str, data: Any = None) -> MCPError:
        """An ``-32602 Invalid params`` error."""
        return cls(INVALID_PARAMS, message, data)

    @classmethod
    def method_not_found(cls, method: str) -> MCPError:
        """A ``-32601 Method not found`` error naming ``method``."""
        return cls(METHOD_NOT_FOUND, f"Method not found: {method}")

    @classmethod
    def unsupported_version(cls, requested: object, supported: list[str]) -> MCPError:
        """The error for an unsupported protocol version, listing the ``supported`` ones."""
        return cls(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": supported, "requested": requested},
        )


class ProtocolError(Exception):
    """The peer sent bytes or an envelope that cannot be processed.

    ``code`` is the JSON-RPC error to answer with (-32700 or -32600) and
    ``request_id`` the id when it could be recovered, so the answer can still be
    correlated.
    """

    def __init__(self, code: int, message: str, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

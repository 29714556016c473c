"""Sealing ``requestState`` for multi round-trip requests (2026-07-28 basic/patterns/mrtr).

The state a server hands out with an ``input_required`` result carries every
answer gathered so far. It is integrity-protected with an HMAC and bound to the
request (method, target, arguments), the principal and an expiry, so a client
can neither forge answers nor replay one caller's state for another
("Server Requirements"). Pure computation: every worker that shares the key
verifies what any other sealed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from typing import Any

import msgspec

from .errors import INVALID_PARAMS, MCPError

__all__ = ["RequestStateCodec"]


class _State(msgspec.Struct, array_like=True):
    version: int
    binding: str
    principal: str | None
    expires: int
    answers: dict[str, Any]


_state_encoder = msgspec.json.Encoder()
_state_decoder = msgspec.json.Decoder(_State)


class RequestStateCodec:
    """Signs and verifies ``requestState`` with HMAC-SHA256.

    Every worker behind one endpoint must share ``secret`` (``MCPKIT_STATE_SECRET``
    in the environment, else a random per-process key).
    """

    def __init__(
        self, secret: bytes | str | None = None, ttl: float = 600.0, *, explicit: bool = False
    ) -> None:
        env = os.environ.get("MCPKIT_STATE_SECRET")
        #: Whether the key was given (argument or environment) rather than made up here.
        self.explicit = explicit or secret is not None or bool(env)
        if secret is None:
            secret = env.encode() if env else os.urandom(32)
        self._key = secret.encode() if isinstance(secret, str) else secret
        self.ttl = ttl

    @staticmethod
    def binding(method: str, target: str, arguments: Any) -> str:
        """What a state is bound to: the method, its target and a digest of its arguments."""
        digest = hashlib.sha256(_state_encoder.encode(arguments)).hexdigest()[:32]
        return f"{method}\x00{target}\x00{digest}"

    def seal(self, binding: str, principal: str | None, answers: dict[str, Any]) -> str:
        payload = _state_encoder.encode(_State(1, binding, principal, int(time.time() + self.ttl), answers))
        body = base64.urlsafe_b64encode(payload).rstrip(b"=")
        mac = base64.urlsafe_b64encode(hmac.digest(self._key, body, "sha256")).rstrip(b"=")
        return (body + b"." + mac).decode("ascii")

    def open(self, state: str, binding: str, principal: str | None) -> dict[str, Any]:
        """The answers sealed in ``state``; MCPError -32602 when it is not ours or not for this."""
        try:
            body, _, mac = state.encode("ascii").partition(b".")
            expected = base64.urlsafe_b64encode(hmac.digest(self._key, body, "sha256")).rstrip(b"=")
            if not hmac.compare_digest(mac, expected):
                raise ValueError("bad signature")
            decoded = _state_decoder.decode(base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4)))
        except (ValueError, UnicodeEncodeError, msgspec.DecodeError):
            raise MCPError(INVALID_PARAMS, "Invalid requestState: integrity check failed") from None
        if decoded.binding != binding:
            raise MCPError(INVALID_PARAMS, "Invalid requestState: it belongs to a different request")
        if decoded.principal != principal:
            raise MCPError(INVALID_PARAMS, "Invalid requestState: it belongs to a different principal")
        if decoded.expires < time.time():
            raise MCPError(INVALID_PARAMS, "Invalid requestState: expired")
        return decoded.answers

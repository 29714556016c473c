"""Multi round-trip requests (2026-07-28 basic/patterns/mrtr), server side.

A handler asks for input the same way in both eras (``await ctx.elicit(...)``).
In the modern era the ask raises :class:`InputRequired`; the dispatcher turns
that into an ``input_required`` result whose ``requestState`` carries every
answer gathered so far, integrity-protected with an HMAC and bound to the
request (method, target, arguments), the principal and an expiry. The client
retries with the answers; the handler runs again from the top and this time
each ask returns its answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..protocol.mrtr import RequestStateCodec

__all__ = ["InputRequired", "RequestStateCodec", "RoundTrip"]

_SUPPORTED = frozenset({"tools/call", "prompts/get", "resources/read"})


class InputRequired(Exception):
    """Raised inside a handler: these input requests must be answered first."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests


@dataclass(slots=True)
class RoundTrip:
    """Answers known to one modern request, and the next key to assign."""

    binding: str
    principal: str | None = None
    answers: dict[str, Any] = field(default_factory=dict)
    counter: int = 0

    def next_key(self, method: str) -> str:
        self.counter += 1
        return f"{method.rsplit('/', 1)[-1]}-{self.counter}"


def supports_input_required(method: str) -> bool:
    return method in _SUPPORTED

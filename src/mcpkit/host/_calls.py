"""One authorised tool call of a host: what it runs on, and its audit record.

:meth:`Host.authorize` runs the policy (and the pins) and audits the decision;
:meth:`ToolCall.run` sends the call however the caller sends it (the host's own client,
or the gateway's forwarder) and audits the outcome.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol import types as t
from .policy import AuditLog, Outcome, Stopwatch

if TYPE_CHECKING:
    from ._entries import HostTool
    from .backend import Backend

__all__ = ["Auditor", "ToolCall", "auditor"]

logger = logging.getLogger("mcpkit.host")

Auditor = Callable[[Outcome, float, "str | None"], None]


def auditor(
    log: AuditLog | None,
    entry: HostTool,
    args: dict[str, Any],
    call: int | None,
    principal: str | None = None,
) -> Auditor:
    """Writes the records of one call (call id ``call``, made by ``principal``) to ``log``;
    never raises."""

    def write(outcome: Outcome, ms: float, reason: str | None) -> None:
        if log is None:
            return
        # (given only when there is one: an audit sink of the caller's own may not take it)
        who: dict[str, Any] = {"principal": principal} if principal is not None else {}
        try:
            log.record(
                outcome=outcome,
                server=entry.server,
                tool=entry.tool.name,
                name=entry.name,
                arguments=args,
                duration_ms=ms,
                call=call,
                reason=reason,
                **who,
            )
        except Exception:  # an audit sink failing must not turn into a tool failure
            logger.exception("audit log write failed")

    return write


@dataclass(slots=True)
class ToolCall:
    """A call the policy let through: ``entry`` on ``backend`` with ``arguments``.

    ``call`` is its id in the audit log (None without one), ``since`` when it was first
    authorised (Unix time: a later round of a modern multi round-trip call carries it).
    """

    entry: HostTool
    backend: Backend
    arguments: dict[str, Any]
    audit: Auditor
    call: int | None = None
    since: float = field(default_factory=time.time)
    clock: Stopwatch = field(default_factory=Stopwatch)

    def __post_init__(self) -> None:
        self.clock.start -= max(0.0, time.time() - self.since)  # the call's whole duration

    async def run(
        self,
        send: Callable[[], Awaitable[t.CallToolResult]],
        *,
        pending: tuple[type[BaseException], ...] = (),
    ) -> t.CallToolResult:
        """``await send()``, its outcome audited.

        An exception of a ``pending`` type means the call goes on in a later round (a
        modern client is asked something first): nothing is audited for it yet.
        """
        try:
            result = await send()
        except pending:
            raise
        except BaseException as exc:
            self.audit("error", self.clock.ms(), f"{type(exc).__name__}: {exc}")
            raise
        failed = result.is_error is True
        self.audit(
            "error" if failed else "ok", self.clock.ms(), "the tool reported an error" if failed else None
        )
        return result

"""``ErrorMasking``: unexpected exceptions reach the client as a generic message with a
correlation id; the details go to the log only.

::

    from mcpkit.middleware import AccessLog, ErrorMasking

    server = MCPServer("db", middleware=[AccessLog(), ErrorMasking()])

What is masked:

- a tool's unexpected exception. Without this middleware it becomes an
  ``isError`` result carrying ``str(exc)`` (the model can read it); with it, the
  result says ``Internal error (correlation id: 3f9c0a1b2d4e5f60)`` instead, with
  the id also in ``_meta["io.mcpkit/correlationId"]``;
- any other handler's unexpected exception (a resource, a prompt, a completion,
  another middleware): the JSON-RPC error ``-32603`` with the same message and
  ``data: {"correlationId": ...}``.

What is not: an :class:`~mcpkit.protocol.errors.MCPError` raised on purpose,
whatever its code (it is the server's API: the message was written for the
client), invalid tool arguments (the model needs them to correct itself), and
an ``isError`` result a tool returns itself.

Each masked error is logged once, at ERROR with its traceback, to the logger
``mcpkit.errors`` (or the one given): the method, target, client and the same
correlation id, so a user's report can be matched to the log line.

How a tool's exception is seen: the tool layer turns it into a result before
any middleware runs, so this middleware hands the tool layer a list for the
request (the context variable :data:`mcpkit.server.tools.tool_failures`) where
each exception is recorded with the result made of it; the result the chain
returns is masked when it is one of those. A middleware inside this one that
replaces that result has chosen what the client sees, and is left alone.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

from ..protocol import types as t
from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..server.context import Context
from ..server.middleware import CallNext, Middleware
from ..server.tools import tool_failures

__all__ = ["ErrorMasking"]

#: The ``_meta`` key of a masked tool result.
CORRELATION_META = "io.mcpkit/correlationId"


def _new_id() -> str:
    return secrets.token_hex(8)


class ErrorMasking(Middleware):
    """Replace unexpected exceptions with ``message`` and a correlation id; log the details.

    ``message``: what the client reads (the correlation id is appended).
    ``logger``: where the exception goes (a logger or its name; default
    ``"mcpkit.errors"``). ``mask_tool_errors=False`` leaves tools' exceptions as
    ``isError`` results with their text, masking only JSON-RPC errors.
    ``correlation_id``: makes the ids (default: 16 random hex digits). See the
    module documentation for what is and is not masked.
    """

    runs_inline = True  # no current task needed: calls of quick sync tools stay on the read path

    def __init__(
        self,
        message: str = "Internal error",
        *,
        logger: logging.Logger | str | None = None,
        mask_tool_errors: bool = True,
        correlation_id: Callable[[], str] = _new_id,
    ) -> None:
        self.message = message
        self.logger = (
            logger if isinstance(logger, logging.Logger) else logging.getLogger(logger or "mcpkit.errors")
        )
        self.mask_tool_errors = mask_tool_errors
        self.correlation_id = correlation_id

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        """Run the request; mask what it failed with unexpectedly."""
        failures: list[tuple[Exception, t.CallToolResult]] | None = None
        token = None
        if self.mask_tool_errors and ctx.request.method == "tools/call":
            failures = []
            token = tool_failures.set(failures)
        try:
            result = await call_next(ctx)
        except MCPError:
            raise
        except Exception as exc:
            cid = self._log(ctx, exc)
            raise MCPError(INTERNAL_ERROR, self._text(cid), {"correlationId": cid}) from None
        finally:
            if token is not None:
                tool_failures.reset(token)
        if failures:
            for error, failed in failures:
                if failed is result:
                    cid = self._log(ctx, error)
                    return t.CallToolResult(
                        content=[t.TextContent(text=self._text(cid))],
                        is_error=True,
                        meta={CORRELATION_META: cid},
                    )
        return result

    def _text(self, cid: str) -> str:
        return f"{self.message} (correlation id: {cid})"

    def _log(self, ctx: Context, exc: Exception) -> str:
        cid = self.correlation_id()
        request = ctx.request
        self.logger.error(
            "%s %s failed (correlation id: %s, client %s): %s: %s",
            request.method,
            request.target or "-",
            cid,
            ctx.client_id,
            type(exc).__name__,
            exc,
            exc_info=(type(exc), exc, exc.__traceback__),
            extra={"correlation_id": cid},
        )
        return cid

"""The authenticated caller of the HTTP request being handled (None without auth)."""

from __future__ import annotations

import contextvars

from ...protocol.auth import Principal

current_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "mcpkit_principal", default=None
)

"""Who is calling (re-exported from :mod:`mcpkit.protocol.auth`, where the
transports can use it without depending on the server framework)."""

from ..protocol.auth import Authenticator, AuthError, Principal

__all__ = ["AuthError", "Authenticator", "Principal"]

"""Middleware for :class:`~mcpkit.MCPServer`: wrap every request and notification.

::

    from mcpkit import MCPServer
    from mcpkit.middleware import Middleware

    class Audit(Middleware):
        async def on_call_tool(self, ctx, call_next):
            result = await call_next(ctx)
            print(ctx.request.target, "->", "error" if result.is_error else "ok")
            return result

    server = MCPServer("db", middleware=[Audit()])
"""

from ..server.middleware import CallNext, ComponentKind, Middleware, NotifyNext

__all__ = ["CallNext", "ComponentKind", "Middleware", "NotifyNext"]

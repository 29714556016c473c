"""Streamable HTTP (both eras) and the legacy HTTP+SSE transport, as one ASGI app."""

from .app import HTTPSettings, StreamableHTTPApp

__all__ = ["HTTPSettings", "StreamableHTTPApp"]

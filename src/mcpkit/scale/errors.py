"""Errors of the scale-out layer (importable without redis-py installed)."""

from __future__ import annotations

__all__ = ["RedisUnavailable"]


class RedisUnavailable(Exception):
    """Redis could not be reached (or answered too slowly); the request cannot be served now."""

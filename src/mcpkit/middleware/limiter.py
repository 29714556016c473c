"""Rate limits for your own code: :class:`Limiter`, :class:`Rate`, :class:`RateLimitExceeded`.

The engine behind :class:`~mcpkit.middleware.RateLimit` and the per-tool
``@server.tool(rate_limit=...)`` option, for **outgoing** calls too: a tool
that wraps a rate-limited external API queues its calls to it::

    from mcpkit.middleware import Limiter

    github = Limiter("5000/hour", mode="queue", max_wait=30)

    @server.tool()
    async def issues(repo: str) -> list[str]:
        async with github:  # waits its turn (first come, first served), at most 30 s
            return await fetch_issues(repo)

``await github.acquire(key=token)`` keeps one limit per key. With
``MCPKIT_REDIS_URL`` set (or ``redis_url=``), the limit is shared by every
worker and machine on that Redis. See :class:`Limiter` for the semantics, the
Redis outage policy and the parameters.

(The classes are defined in :mod:`mcpkit.server.limiting`, because the server
enforces per-tool options with them; this module is their public home.)
"""

from __future__ import annotations

from ..server.limiting import Limiter, Rate, RateLimitExceeded

__all__ = ["Limiter", "Rate", "RateLimitExceeded"]

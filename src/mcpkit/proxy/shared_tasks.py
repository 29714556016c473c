"""Where a proxy's callers' backend tasks are, kept in Redis for every proxy instance.

A proxy remembers each task a backend made for one of its callers: which backend (by name:
a config of several servers has one per server) and which principal (:class:`ProxyTasks
<mcpkit.proxy.extensions.ProxyTasks>`). In memory, that map is lost when the proxy
restarts and unknown to other instances. With Redis (``MCPKIT_REDIS_URL``, the tasks'
``TaskSettings(redis_url=...)`` or the HTTP app's ``redis_url``: where the proxy's own
tasks go), :class:`SharedTaskRoutes` keeps it there, so any instance routes ``tasks/*`` of
a task made through another, on the caller's own backend session (its credentials, from
``credentials(principal)``: no secret is stored, only the backend's name and the owner).

Keys (under the deployment's prefix, ``MCPKIT_REDIS_PREFIX``):

- ``proxy:task:{id}`` string: ``{"backend": name, "owner": principal key or null}``,
  expiring ``expiry_margin`` seconds after the task's TTL (never, for a task without one);
- ``proxy:tasks`` sorted set: the ids, scored by when they were made; beyond ``max_tasks``
  the oldest go, with their entries, in the same script that adds one (the bound the
  in-memory map has, shared by every instance).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import msgspec

from .backend import Pool, Session

if TYPE_CHECKING:
    from ..scale.backend import RedisBackend

__all__ = ["SharedTaskRoutes", "session_of"]


class Route(msgspec.Struct, frozen=True):
    """Where a task was made: the backend's name in its proxy, and the principal it is for."""

    backend: str
    owner: str | None


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Route).decode

# Remember ARGV[1] (the id) -> ARGV[2] (the route), expiring in ARGV[3] ms (0: never), made at
# ARGV[4]; then forget the oldest ids beyond ARGV[5], with their entries (ARGV[6]: their prefix).
_PUT = """
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  for _, id in ipairs(old) do
    redis.call('DEL', ARGV[6] .. id)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
return over
"""


class SharedTaskRoutes:
    """The task id -> :class:`Route` map of a proxy's callers' tasks, in Redis.

    Every command is bounded by ``timeout``; a failure raises
    :class:`~mcpkit.scale.errors.RedisUnavailable` at once.
    """

    def __init__(
        self, url: str, prefix: str = "mcpkit", *, timeout: float = 2.0, expiry_margin: float = 60.0
    ) -> None:
        from ..scale.backend import RedisBackend  # needs the redis extra: imported only when used

        self.backend: RedisBackend = RedisBackend(url, prefix, timeout=timeout)
        self.expiry_margin = expiry_margin
        self._entry_prefix = self.backend.key("proxy", "task", "")
        self._index = self.backend.key("proxy", "tasks")

    def __repr__(self) -> str:
        from ..scale.backend import redact

        return f"SharedTaskRoutes({redact(self.backend.url)!r}, prefix={self.backend.prefix!r})"

    async def put(self, task_id: str, route: Route, ttl_ms: int | None, max_tasks: int) -> None:
        """Remember where ``task_id`` is (atomically with the bound's evictions)."""
        expires = 0 if ttl_ms is None else max(1, ttl_ms + round(self.expiry_margin * 1000))
        client = self.backend.client
        await self.backend.call(
            client.eval(
                _PUT,
                2,
                self._entry_prefix + task_id,
                self._index,
                task_id,
                _encode(route),
                str(expires),
                repr(time.time()),
                str(max_tasks),
                self._entry_prefix,
            )
        )

    async def get(self, task_id: str) -> Route | None:
        """Where ``task_id`` was made, or None (unknown, expired, or beyond the bound)."""
        data = await self.backend.call(self.backend.client.get(self._entry_prefix + task_id))
        if data is None:
            return None
        try:
            return _decode(data)
        except msgspec.DecodeError:
            return None

    async def aclose(self) -> None:
        """Close this process's connections (the map stays in Redis)."""
        await self.backend.close()


async def session_of(pool: Pool, principal: Any) -> Session:
    """The session of ``pool`` a caller with ``principal`` is served on now (as
    :meth:`Pool.session_for` picks it): for a task made through another proxy instance,
    the caller's own credentials reach it again, on a session opened here if none is."""
    if pool.credentials is None:
        return pool.default
    given = await pool.resolve(principal)
    if not given or given == pool.default.credentials:
        return pool.default
    live = pool.current(Session(pool, given))
    assert isinstance(live, Session)
    return live

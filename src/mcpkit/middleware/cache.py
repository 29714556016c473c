"""``ResponseCache``: serve list results and resource reads from memory.

Keyed as the 2026-07-28 caching rules key a response (server/utilities/caching
"Cache Key"): the method and the parameters that affect the result, the
``cursor`` of a list page or the ``uri`` of a read. A result whose scope is
``private`` (the server's ``cacheScope`` for the method, a resource's own, or
any list a middleware filters per caller) is kept per principal, or per client
when nobody is authenticated, never shared ("Caches MUST NOT be shared across
authorization contexts"). Retries of multi round-trip requests, and their
``input_required`` results, are never cached ("Cache Key"). A list change drops
that list's pages and a resource update drops that resource's reads, in every
worker when the server's bus is shared ("Interaction with Notifications").
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ..server.middleware import CallNext, Middleware
from ..session.bus import ChangeEvent

if TYPE_CHECKING:
    from ..server.context import Context

__all__ = ["ResponseCache"]

# Method -> the list whose change invalidates it ("resource": per URI, by updates).
_CACHED = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resource",
}

_Key = tuple[str, str, str]  # ("<era> <method>", cursor or uri, who: "" when public)


class ResponseCache(Middleware):
    """Cache ``tools/list``, ``prompts/list``, ``resources/list``,
    ``resources/templates/list`` and ``resources/read`` results for ``ttl`` seconds.

    ``max_entries`` bounds memory (least recently used first out). ``methods``
    narrows what is cached. ``clock`` returns monotonic seconds (for tests).
    Reads of resources that change without ``notify_resource_updated`` should
    not be cached, or only with a short ``ttl``.
    """

    runs_inline = True  # no current task needed: calls of quick sync tools stay on the read path

    def __init__(
        self,
        ttl: float = 60.0,
        *,
        max_entries: int = 10_000,
        methods: frozenset[str] | set[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive (seconds)")
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        unknown = set(methods or ()) - _CACHED.keys()
        if unknown:
            raise ValueError(f"cannot cache {', '.join(sorted(unknown))}: only {', '.join(sorted(_CACHED))}")
        self.ttl = ttl
        self.max_entries = max_entries
        self.methods = frozenset(methods) if methods is not None else frozenset(_CACHED)
        self._clock = clock
        self._entries: OrderedDict[_Key, tuple[float, Any]] = OrderedDict()
        self._watching: set[int] = set()
        #: Counters, for tests and metrics.
        self.hits = 0
        self.misses = 0

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        request = ctx.request
        method = request.method
        if method not in self.methods:
            return await call_next(ctx)
        params = request.params
        if getattr(params, "request_state", UNSET) is not UNSET or getattr(
            params, "input_responses", UNSET
        ) not in (UNSET, None):
            return await call_next(ctx)  # an MRTR retry depends on inputs outside the key
        self._watch(ctx.server)
        private = self._private(ctx, method, request.target)
        # The era is part of the key: a modern read carries cache hints a legacy answer must not.
        era = "modern" if ctx.is_modern else "legacy"
        key = (f"{era} {method}", _subject(request), _who(ctx) if private else "")
        now = self._clock()
        found = self._entries.get(key)
        if found is not None and found[0] > now:
            self._entries.move_to_end(key)
            self.hits += 1
            # A copy: the server shapes each answer for its request's revision in place.
            return msgspec.structs.replace(found[1])
        self.misses += 1
        result = await call_next(ctx)
        if getattr(result, "result_type", UNSET) not in (UNSET, "complete"):
            return result  # input_required: interim, not cacheable
        self._entries[key] = (now + self.ttl, msgspec.structs.replace(result))
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return result

    def clear(self) -> None:
        """Drop every cached result."""
        self._entries.clear()

    def _private(self, ctx: Context, method: str, uri: str | None) -> bool:
        server = ctx.server
        if server.hides:
            return True  # what a caller may see is filtered per caller
        _, scope = server.cache_policy(method, uri)
        return bool(scope == "private")

    def _watch(self, server: Any) -> None:
        if id(server) in self._watching:
            return
        self._watching.add(id(server))
        server.bus.subscribe(self._changed)

    def _changed(self, event: ChangeEvent) -> None:
        if event.kind == "resource":
            stale = [k for k in self._entries if k[0].endswith("resources/read") and k[1] == event.uri]
        else:
            stale = [k for k in self._entries if _CACHED[k[0].split(" ", 1)[1]] == event.kind]
        for key in stale:
            del self._entries[key]


def _subject(request: Any) -> str:
    params = request.params
    if request.method == "resources/read":
        return str(params.uri)
    cursor = getattr(params, "cursor", UNSET)
    return cursor if isinstance(cursor, str) else ""


def _who(ctx: Context) -> str:
    principal = ctx.principal
    return f"principal:{principal.key}" if principal is not None else ctx.client_id

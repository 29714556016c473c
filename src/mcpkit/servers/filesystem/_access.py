"""Which directories a call may use: the command line's, and the client's roots.

The directories given on the command line are the operator's. A client that declares the
``roots`` capability also says which directories it is working in (``roots/list``); what a
call may use then depends on ``--roots``:

- ``narrow`` (the default): the roots *narrow* the command line's directories, never widen
  them: the parts of each root that lie inside a command-line directory. With no
  directories on the command line, the roots are the allowed directories.
- ``replace``: the roots replace the command line's directories, as the community server
  does (a client may then reach any directory it names).
- ``ignore``: roots are never asked for.

A client whose roots are empty, or none of them an existing local directory (``file://``),
gets the command line's directories, as with the community server.

When roots are asked for: in the legacy era, once per connection (a legacy HTTP session,
a stdio process), and again after the client sends ``notifications/roots/list_changed``
(every connection's copy is dropped then, since the notification does not say whose
changed). In the modern era (2026-07-28) requests are independent: each call asks again,
answered through the multi round-trip exchange (basic/patterns/mrtr), which costs the
client one more round trip per call.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Literal
from urllib.parse import unquote, urlsplit

from ...protocol.errors import MCPError
from ...server import Context
from ._sandbox import AllowedDir, FsError, Sandbox, within

__all__ = ["Access", "RootsPolicy", "Settings"]

RootsPolicy = Literal["narrow", "replace", "ignore"]

logger = logging.getLogger("mcpkit.servers.filesystem")

#: Connections whose roots are remembered at once (the oldest are forgotten first).
_CACHED_CONNECTIONS = 1024


class Settings:
    """The server's limits and switches (each a command-line option)."""

    __slots__ = (
        "allow_hardlinks",
        "max_depth",
        "max_entries",
        "max_read_bytes",
        "max_write_bytes",
        "read_only",
        "roots",
    )

    def __init__(
        self,
        *,
        read_only: bool = False,
        roots: RootsPolicy = "narrow",
        max_read_bytes: int = 1 << 20,
        max_write_bytes: int = 1 << 20,
        max_entries: int = 10_000,
        max_depth: int = 64,
        allow_hardlinks: bool = False,
    ) -> None:
        if roots not in ("narrow", "replace", "ignore"):
            raise ValueError(f"roots must be 'narrow', 'replace' or 'ignore', not {roots!r}")
        for name, value in (
            ("max_read_bytes", max_read_bytes),
            ("max_write_bytes", max_write_bytes),
            ("max_entries", max_entries),
            ("max_depth", max_depth),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
        self.read_only = read_only
        self.roots: RootsPolicy = roots
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.max_entries = max_entries
        self.max_depth = max_depth
        self.allow_hardlinks = allow_hardlinks


class Access:
    """Gives each call its :class:`Sandbox`: the directories it may use, with the limits."""

    def __init__(self, dirs: Sequence[AllowedDir], settings: Settings) -> None:
        self.dirs = tuple(dirs)
        self.settings = settings
        self._known: OrderedDict[str, tuple[tuple[AllowedDir, ...], str]] = OrderedDict()
        # Bumped by every roots/list_changed: an answer asked for before it is not kept.
        self._generation = 0

    async def roots_changed(self) -> None:
        """``notifications/roots/list_changed``: forget every connection's roots."""
        self._generation += 1
        self._known.clear()

    async def sandbox(self, ctx: Context) -> Sandbox:
        """The sandbox for the call ``ctx`` serves (asking the client's roots when needed).

        In the modern era this may raise the framework's input request for ``roots/list``:
        it must propagate (the call is answered ``input_required`` and runs again).
        """
        dirs, reason = await self._dirs(ctx)
        s = self.settings
        return Sandbox(
            dirs,
            max_read_bytes=s.max_read_bytes,
            max_write_bytes=s.max_write_bytes,
            max_entries=s.max_entries,
            max_depth=s.max_depth,
            allow_hardlinks=s.allow_hardlinks,
            empty_reason=reason,
        )

    async def _dirs(self, ctx: Context) -> tuple[tuple[AllowedDir, ...], str]:
        if self.settings.roots == "ignore" or "roots" not in ctx.client_capabilities:
            return self.dirs, _NONE_GIVEN
        # Legacy connections are remembered by their session or connection; a network
        # address alone (modern or stateless HTTP) is not someone, so those ask every time.
        key = ctx.client_id if not ctx.is_modern else None
        if key is not None and key.startswith("peer:"):
            key = None
        if key is not None and key in self._known:
            self._known.move_to_end(key)
            return self._known[key]
        generation = self._generation
        try:
            roots = await ctx.list_roots()
        except MCPError as exc:
            logger.warning("the client did not answer roots/list (%s); using the command line's", exc.message)
            return self.dirs, _NONE_GIVEN
        answer = self._combine([root.uri for root in roots])
        if key is not None and generation == self._generation:
            self._known[key] = answer
            while len(self._known) > _CACHED_CONNECTIONS:
                self._known.popitem(last=False)
        return answer

    def _combine(self, uris: Sequence[str]) -> tuple[tuple[AllowedDir, ...], str]:
        roots: list[AllowedDir] = []
        for uri in uris:
            root = _root_dir(uri)
            if root is not None and root not in roots:
                roots.append(root)
        if not roots:
            return self.dirs, _NONE_GIVEN
        if self.settings.roots == "replace" or not self.dirs:
            return tuple(roots), _NONE_GIVEN
        narrowed: list[AllowedDir] = []
        for root in roots:
            for given in self.dirs:
                inner = (
                    root
                    if within(root.path, given.path)
                    else given
                    if within(given.path, root.path)
                    else None
                )
                if inner is not None and inner not in narrowed:
                    narrowed.append(inner)
        reason = (
            f"the client's roots ({', '.join(r.path for r in roots)}) lie outside the server's "
            f"allowed directories ({', '.join(d.path for d in self.dirs)})"
        )
        return tuple(narrowed), reason


_NONE_GIVEN = (
    "no allowed directories: start the server with directories on its command line, or "
    "connect with a client that offers roots"
)


def _root_dir(uri: str) -> AllowedDir | None:
    """A ``file://`` root as an allowed directory; None for anything else (logged)."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        logger.warning("ignoring a root that is not a local file:// URI: %r", uri)
        return None
    path = unquote(parts.path)
    if "\x00" in path or not os.path.isabs(path):
        logger.warning("ignoring a root with an unusable path: %r", uri)
        return None
    try:
        return AllowedDir.from_path(path)
    except FsError as exc:
        logger.warning("ignoring root %r: %s", uri, exc)
        return None

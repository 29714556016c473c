"""The host's side of pinning: watch every listing, record what changed, block what is unapproved.

:class:`PinGuard` is fed each ready server's tool list whenever the host
re-indexes (at start, on ``notifications/tools/list_changed`` re-fetches, after
a restart). It pins new tools the policy allows (trust on first use: an
``allow`` rule is the user's approval), notes changed ones as pending and
writes one audit record per change, removal and restoration, and tells the
host which tools are blocked: those whose definition differs from their pin.
:class:`CollisionLog` finds tool names several servers share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol import types as t
from .pins import PinChange, PinStore, pin_hash

__all__ = ["CollisionLog", "PinGuard"]

logger = logging.getLogger("mcpkit.host")

#: Writes one audit event: ``(event, fields)``.
EventSink = Callable[[str, dict[str, Any]], None]
_DIFF_LIMIT = 4000  # characters of diff kept in an audit record


class PinGuard:
    """Compares listed tools with a :class:`PinStore` and reports the differences once each."""

    def __init__(self, store: PinStore, record: EventSink, *, hint: str | None = None) -> None:
        self.store = store
        self._record = record
        self._hint = hint
        #: Last hash seen per (server, tool); a server is absent until first listed.
        self._seen: dict[str, dict[str, str]] = {}

    def observe(self, server: str, tools: Iterable[t.Tool], allowed: Callable[[t.Tool], bool]) -> bool:
        """Take note of ``server``'s current tools; whether anything was newly blocked or cleared."""
        self.store.refresh()
        before = self._seen.get(server)
        now: dict[str, str] = {}
        moved = False
        for tool in tools:
            digest = pin_hash(tool)
            now[tool.name] = digest
            if before is not None and before.get(tool.name) == digest:
                continue
            status, pin = self.store.check(server, tool)
            if status == "new":
                if allowed(tool):
                    # Not an audit record: first sight is routine (every tool, every new config).
                    self.store.pin(server, tool)
                    logger.debug("pinned %s/%s as %s", server, tool.name, digest)
            elif status == "restored":
                self.store.mark_present(server, tool.name)
                self._record("tool_restored", {"server": server, "tool": tool.name, "hash": digest})
            elif status == "changed" and pin is not None:
                moved = True
                change = self.store.change(server, tool)
                assert change is not None
                self.store.note_pending(server, tool)
                diff = change.diff()
                logger.warning(
                    "server %r changed the tool %r since it was approved; it is blocked until approved again",
                    server,
                    tool.name,
                )
                self._record(
                    "tool_changed",
                    {
                        "server": server,
                        "tool": tool.name,
                        "old_hash": change.old_hash,
                        "new_hash": change.new_hash,
                        "diff": diff[:_DIFF_LIMIT],
                    },
                )
            elif status == "pinned" and before is not None and before.get(tool.name) is not None:
                moved = True  # changed back to what was approved: unblocked
        gone = (
            set(before) - set(now)
            if before is not None
            else {pin.tool for pin in self.store.pins(server) if pin.removed_at is None} - set(now)
        )
        for name in sorted(gone):
            if self.store.get(server, name) is not None:
                self.store.mark_removed(server, name)
                self._record("tool_removed", {"server": server, "tool": name})
        self._seen[server] = now
        return moved

    def change(self, server: str, tool: t.Tool) -> PinChange | None:
        """The change that blocks ``tool``, or None when it may be used as the policy says."""
        # Every call asks this: compare the hash taken when the list was indexed
        # (the tool object is from that same listing) before hashing anything again.
        pin = self.store.get(server, tool.name)
        if pin is None or pin.hash == self._seen.get(server, {}).get(tool.name):
            return None
        return self.store.change(server, tool)

    def approve(self, change: PinChange, tool: t.Tool, how: str) -> None:
        """Pin ``tool`` as it is now, after the user approved ``change``."""
        self.store.pin(change.server, tool)
        self._record(
            "change_approved",
            {"server": change.server, "tool": change.tool, "hash": change.new_hash, "by": how},
        )

    def pin_new(self, server: str, tool: t.Tool, how: str) -> None:
        """Pin a tool with no pin yet, after a call of it was approved."""
        if self.store.get(server, tool.name) is None:
            self.store.pin(server, tool)
            logger.debug("pinned %s/%s after a call was %s", server, tool.name, how)

    def refusal(self, change: PinChange, name: str) -> str:
        """Why a changed tool was refused, and how to approve it."""
        how = (
            self._hint.format(server=change.server, tool=change.tool)
            if self._hint
            else ("approve it through the host's approval callback or PinStore.pin")
        )
        return (
            f"the definition of {name} changed since it was approved "
            f"({change.old_hash[:19]} -> {change.new_hash[:19]}); it stays blocked until approved "
            f"again: {how}"
        )


class CollisionLog:
    """Tool names several servers share, each new one logged once as a warning.

    Nothing is shadowed (each tool is ``mcp__<server>__<tool>``), but a model
    told to "use search" may pick either server's: the user should know. The
    audit log is for calls and changes; collisions go to logging and to
    ``mcpkit audit-servers``.
    """

    def __init__(self) -> None:
        self._seen: set[tuple[str, tuple[str, ...]]] = set()

    def update(self, listings: Iterable[tuple[str, Iterable[t.Tool]]]) -> dict[str, list[str]]:
        """The shared names now (tool name -> servers), warning about the new ones."""
        owners: dict[str, list[str]] = {}
        for server, tools in listings:
            for name in dict.fromkeys(tool.name for tool in tools):
                owners.setdefault(name, []).append(server)
        shared = {name: servers for name, servers in owners.items() if len(servers) > 1}
        new: dict[tuple[str, ...], list[str]] = {}
        for name, servers in shared.items():
            key = (name, tuple(servers))
            if key not in self._seen:
                self._seen.add(key)
                new.setdefault(tuple(servers), []).append(name)
        for servers_key, names in new.items():
            logger.warning(
                "servers %s all offer tools named %s (each is listed as mcp__<server>__<tool>)",
                ", ".join(map(repr, servers_key)),
                ", ".join(map(repr, names)),
            )
        return shared

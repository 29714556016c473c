"""Names for aggregated tools and prompts: ``mcp__<server>__<tool>``.

The convention is Claude Code's (landscape §5), which its permission rules
(``mcp__server``, ``mcp__server__*``, ``mcp__server__tool``) refer to.

Each part is reduced to ``[A-Za-z0-9_-]``: the MCP spec allows ``.`` too
(2025-11-25 tool names), but model APIs that receive these names do not, and a
name must survive that trip. Names longer than ``max_length`` are cut and given
a short hash of the full name, so two long names never collide.

Resources keep their URIs, which clients and tool results refer to as they are.
A URI (or URI template) that two or more servers list is shown once per server
under :func:`qualify_uri`'s ``mcp://<server>/<uri>``: no server's copy is hidden
behind another's, as no tool is.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["PREFIX", "URI_SCHEME", "NameTable", "join_name", "qualify_uri", "sanitize"]

PREFIX = "mcp__"
#: The scheme of server-qualified resource URIs (:func:`qualify_uri`).
URI_SCHEME = "mcp"
DEFAULT_MAX_LENGTH = 64  # what model APIs accept; the MCP spec itself allows 128

_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(part: str) -> str:
    """``part`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _DISALLOWED.sub("_", part) or "_"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def join_name(server: str, item: str, *, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """``mcp__<server>__<item>`` from already-sanitized parts, shortened if needed."""
    name = f"{PREFIX}{server}__{item}"
    if len(name) <= max_length:
        return name
    tail = "_" + _digest(name)
    return name[: max_length - len(tail)] + tail


def qualify_uri(server: str, uri: str) -> str:
    """``mcp://<server>/<uri>``: the URI (or URI template) ``uri`` of the server whose
    sanitized name is ``server``, told apart from the same URI of other servers.

    The prefix is literal text, so a qualified template is still a template, and
    the server's own URI is what follows the prefix.
    """
    return f"{URI_SCHEME}://{server}/{uri}"


class NameTable:
    """Hands out unique exposed names; the same inputs give the same names, in order."""

    def __init__(self, *, max_length: int = DEFAULT_MAX_LENGTH) -> None:
        if max_length < len(PREFIX) + 16:
            raise ValueError("max_length is too short for mcp__<server>__<name>")
        self.max_length = max_length
        self._taken: set[str] = set()

    def server(self, name: str) -> str:
        """A unique sanitized server name (``my.db`` and ``my_db`` do not share one)."""
        return self._claim(sanitize(name), name)

    def item(self, server: str, name: str) -> str:
        """The exposed name of a tool or prompt ``name`` of sanitized ``server``."""
        return self._claim(join_name(server, sanitize(name), max_length=self.max_length), f"{server}\0{name}")

    def _claim(self, candidate: str, original: str) -> str:
        if candidate in self._taken:
            # A clash after sanitizing or cutting: tell them apart by the original.
            tail = "_" + _digest(original)
            candidate = candidate[: self.max_length - len(tail)] + tail
            while candidate in self._taken:
                tail = "_" + _digest(candidate)
                candidate = candidate[: self.max_length - len(tail)] + tail
        self._taken.add(candidate)
        return candidate

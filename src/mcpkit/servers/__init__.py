"""Reference servers built on mcpkit, secure by default: ``mcpkit serve NAME ARGS...`` or
``python -m mcpkit.servers.NAME ARGS...``.

Each keeps the tool names and argument shapes of the community server it replaces, so
prompts and host configs written for those keep working, and documents its threat model.
"""

from __future__ import annotations

__all__ = ["SERVERS"]

#: Name -> module of every reference server (each has ``main(argv, *, prog=None) -> int``;
#: ``prog`` names the command in its usage and help).
SERVERS: dict[str, str] = {
    "filesystem": "mcpkit.servers.filesystem",
    "sql": "mcpkit.servers.sql",
    "fetch": "mcpkit.servers.fetch",
    "openapi": "mcpkit.servers.openapi",
    "skills": "mcpkit.servers.skills",
}

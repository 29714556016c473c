"""The skills extension's methods (SEP-2640), as the dispatcher calls them.

``skills/list`` and ``skills/get`` exist on a server that serves skills
(:meth:`MCPServer.add_skills <mcpkit.server.MCPServer.add_skills>`, which
declares ``io.modelcontextprotocol/skills``); ``resources/directory/read`` only
when it also declares ``directoryRead`` (SEP-2640 "Error Handling": otherwise
an unknown method). Elsewhere each is ``-32601`` with a message saying why.
They are served in every revision whose capabilities declare the extension
(the ``initialize`` result carries it as ``server/discover`` does); the cache
fields (``ttlMs``, ``cacheScope``) only from 2026-07-28, as on every result.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import METHOD_NOT_FOUND, MCPError
from ..protocol.requests import ServerRequest
from ..protocol.skills import SKILLS_EXTENSION

if TYPE_CHECKING:
    from .dispatcher import ServerDispatcher
    from .skills import SkillSet

__all__ = ["SKILL_HANDLERS"]


def _skills(conn: ServerDispatcher, request: ServerRequest) -> SkillSet:
    skills = conn.server.skills
    if skills is None:
        raise MCPError(
            METHOD_NOT_FOUND,
            f"Method not found: {request.method} (this server serves no skills: it does not "
            f"declare the {SKILLS_EXTENSION} extension)",
        )
    return skills


def _shown(conn: ServerDispatcher, request: ServerRequest) -> Callable[[str], bool]:
    """Whether a URI is visible to this caller: a skill whose ``SKILL.md`` middleware hides
    (``Middleware.hides(ctx, "resource", uri)``) is neither listed nor got, as its read is refused."""
    from .handlers import visible  # (the handlers module imports this one)

    return visible(conn, request, "resource")


async def _list(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return await _skills(conn, request).list_result(request.params.cursor, _shown(conn, request))


async def _get(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return await _skills(conn, request).get_result(request.params.uri, _shown(conn, request))


async def _read_directory(conn: ServerDispatcher, request: ServerRequest) -> Any:
    skills = _skills(conn, request)
    if not skills.settings.directory_read:
        raise MCPError(
            METHOD_NOT_FOUND,
            f"Method not found: {request.method} (this server does not declare directoryRead)",
        )
    return await skills.directory_result(request.params.uri, request.params.cursor, _shown(conn, request))


SKILL_HANDLERS: dict[str, Callable[[ServerDispatcher, ServerRequest], Awaitable[Any]]] = {
    "skills/list": _list,
    "skills/get": _get,
    "resources/directory/read": _read_directory,
}

"""The Inspector's Skills view (the ``io.modelcontextprotocol/skills`` extension): the
server's skills with their manifests, and a file's content once verified.

``/api/skills/list`` and ``/api/skills/get`` fetch entries only (no file: ext-skills
"Lazy Retrieval"); the entries are held here, per connection, and ``/api/skills/read``
reads one file of a held skill through :meth:`~mcpkit.client.skills.Skill.read`, so the
page gets a file's content only after its size, digest and (``SKILL.md``) frontmatter
matched the entry. What the page sends names a skill and a path; the digests it is
checked against are the ones the server sent, never the page's. A refused file answers
422 with why, and none of its content.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..client.skills import Skill, SkillError, SkillsUnsupported
from ._api import ApiError, _error_from, _text

if TYPE_CHECKING:
    from ..client.client import Client
    from ._session import InspectorSession

__all__ = ["SkillsView", "skill_json"]

#: Entries held at most (a listing larger than this keeps its first ones for reading).
MAX_HELD = 4096


def skill_json(skill: Skill) -> dict[str, Any]:
    """A skill as the page shows it: the entry as sent, and what the client made of it."""
    return {
        "uri": skill.uri,
        "name": skill.name,
        "description": skill.description,
        "frontmatter": skill.frontmatter,
        "dynamic": skill.dynamic,
        "problem": skill.problem,
        "files": [
            {"uri": f.uri, "path": f.path, "size": f.size, "digest": f.digest} for f in skill.files.values()
        ],
        "entry": skill.entry,
    }


class SkillsView:
    """The skills routes of one Inspector session."""

    def __init__(self, session: InspectorSession) -> None:
        self.session = session
        self._client: Client | None = None
        self._held: dict[str, Skill] = {}

    def _connected(self) -> Client:
        client = self.session._require()
        if client is not self._client:
            # A new connection: entries of the last one are not this server's word.
            self._client, self._held = client, {}
        return client

    async def _attempt(self, work: Any) -> Any:
        try:
            return await work
        except SkillsUnsupported as exc:
            raise ApiError(409, str(exc)) from None
        except SkillError as exc:
            raise ApiError(422, str(exc), data={"refused": True}) from None
        except Exception as exc:
            raise _error_from(exc) from None

    def _hold(self, skill: Skill) -> None:
        if skill.uri in self._held or len(self._held) < MAX_HELD:
            self._held[skill.uri] = skill

    async def list(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``skills/list``, every page; the entries are held for reading."""
        client = self._connected()
        skills: list[Skill] = await self._attempt(client.list_skills())
        for skill in skills:
            self._hold(skill)
        return {"skills": [skill_json(s) for s in skills]}

    async def get(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``skills/get`` by URI or name (a fresh entry replaces the held one)."""
        client = self._connected()
        name = _text(body, "uri", required=True, limit=8192)
        assert name is not None
        skill: Skill = await self._attempt(client.get_skill(name))
        self._hold(skill)
        return {"skill": skill_json(skill)}

    async def read(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """One file of a held skill, verified: ``{"uri", "path", "size", "digest", "text"|"blob"}``."""
        client = self._connected()
        uri = _text(body, "uri", required=True, limit=8192)
        path = _text(body, "path", limit=8192) or "SKILL.md"
        assert uri is not None
        skill = self._held.get(uri)
        if skill is None:
            skill = await self._attempt(client.get_skill(uri))
            self._hold(skill)
        data: bytes = await self._attempt(skill.read(path))
        entry = skill.file(path)
        out: dict[str, Any] = {
            "uri": entry.uri,
            "path": entry.path,
            "size": entry.size,
            "digest": entry.digest,
        }
        try:
            out["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            out["blob"] = base64.b64encode(data).decode("ascii")
        return out

"""A proxy of several servers: what the parent of the mounted proxies serves for them.

``proxy({"mcpServers": {...}})`` with several servers mounts one :class:`ProxyServer` per
server under its name. Mounting puts the children's tools, prompts, resources and
templates in the parent, routes their tasks (the parent's :class:`ProxyTasks`) and carries
a child's ``notifications/resources/updated`` up under the namespaced URI. Three things a
proxy does are not covered by mounting, and this module adds them:

- **Subscriptions.** A client's ``resources/subscribe`` (legacy) or
  ``subscriptions/listen`` naming resources (2026-07-28) at the parent, of a URI under a
  mounted proxy, is that proxy's subscription of the URI as its backend knows it: counted
  with the proxy's own, renewed by it after its backend reconnects, and its updates reach
  the parent's subscribers under the namespaced URI.
- **Apps** (SEP-1865). The views are the mounted ``ui://`` resources; once a mounted proxy's
  backend declares the extension the parent filters them, as a proxy does, for its callers
  that do not declare it (:class:`~mcpkit.proxy.extensions.AppsFilter`).
- **Skills** (SEP-2640). A mounted proxy serves its backend's skills only once its backend
  has declared them, after the mount; the parent then declares the extension and answers
  ``skills/list``, ``skills/get`` and ``resources/directory/read`` with every such
  backend's answers, each under ``skill://<namespace>/...`` (as ``server.mount`` serves a
  child's own skills); the files are the mounted ``skill://<namespace>/...`` resources.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ..client import Client
from ..protocol import types as t
from ..protocol.apps import APPS_EXTENSION
from ..protocol.errors import INVALID_PARAMS, MCPError
from ..protocol.skills import (
    DIRECTORY_MIME,
    SKILLS_EXTENSION,
    GetSkillResult,
    ListSkillsResult,
    ReadDirectoryResult,
    Skill,
    SkillError,
    split_uri,
    unknown_skill,
)
from ..server.paging import page as paged
from ..server.skills import SkillSet, SkillSettings
from .extensions import ProxySkills, filter_apps
from .server import ProxyServer
from .subscriptions import SubscriptionHooks, Subscriptions

if TYPE_CHECKING:
    from ..server.app import MCPServer
    from ..server.mount import Mount

__all__ = ["MountedSkills", "MountedSubscriptions", "serve_mounted"]

_SCHEME = "skill://"


def serve_mounted(parent: MCPServer) -> None:
    """Make ``parent`` forward subscriptions to, and serve the skills of, its mounted proxies."""
    mounts = [m for m in parent._mounts if isinstance(m.child, ProxyServer)]
    parent.add_middleware(SubscriptionHooks(MountedSubscriptions(mounts)))
    skills = MountedSkills(parent, mounts)

    def apps_changed() -> None:
        # The parent serves the views: it filters for its callers as a proxy does for its own.
        if any(APPS_EXTENSION in m.child.extensions for m in mounts):
            filter_apps(parent)

    for mount in mounts:
        assert isinstance(mount.child, ProxyServer)
        default = mount.child.pool.default
        default.on_connect = _then(default.on_connect, skills.backends_changed)
        default.on_connect = _then(default.on_connect, apps_changed)


def _then(
    first: Callable[[Client], Awaitable[None]] | None, then: Callable[[], None]
) -> Callable[[Client], Awaitable[None]]:
    async def connected(client: Client) -> None:
        if first is not None:
            await first(client)
        then()

    return connected


class MountedSubscriptions(Subscriptions):
    """The parent's subscriptions: each one is the mounted proxy's, of its own URI."""

    def __init__(self, mounts: list[Mount]) -> None:
        super().__init__(self._nowhere)
        self.mounts = mounts

    @staticmethod
    def _nowhere(uri: str) -> Any:
        raise LookupError(uri)  # (never called: every subscription is a mounted proxy's)

    def _route(self, uri: str) -> tuple[Subscriptions, str] | None:
        for mount in self.mounts:
            inner = mount.child_uri(uri)
            if inner is not None and isinstance(mount.child, ProxyServer):
                return mount.child.subscriptions, inner
        return None

    async def acquire(self, uri: str) -> None:
        routed = self._route(uri)
        if routed is not None:
            await routed[0].acquire(routed[1])

    async def release(self, uri: str) -> None:
        routed = self._route(uri)
        if routed is not None:
            await routed[0].release(routed[1])


class MountedSkills(SkillSet):
    """The skills of the parent's mounted proxies' backends, under ``skill://<namespace>/...``.

    The parent serves them (declares the extension) once a backend that serves skills has
    connected; ``directoryRead`` when any of them declares it.
    """

    def __init__(self, parent: MCPServer, mounts: list[Mount]) -> None:
        super().__init__(parent, SkillSettings(directory_read=False))
        self._parent = parent
        self.mounts = mounts

    def _serving(self) -> list[tuple[Mount, ProxySkills]]:
        return [(m, m.child.skills) for m in self.mounts if isinstance(m.child.skills, ProxySkills)]

    def backends_changed(self) -> None:
        """A mounted proxy's backend (re)connected: serve the skills there are now."""
        parent, serving = self._parent, self._serving()
        if parent.skills is not None and parent.skills is not self:
            return  # (the parent serves skills of its own)
        if not serving:
            if parent.skills is self:
                parent.skills = None
                parent._extensions.pop(SKILLS_EXTENSION, None)
            return
        directory = any(skills.settings.directory_read for _, skills in serving)
        self.settings = SkillSettings(directory_read=directory)
        parent.skills = self
        parent.declare_extension(SKILLS_EXTENSION, {"directoryRead": True} if directory else {})

    def _find(self, uri: str) -> tuple[Mount, ProxySkills, str] | None:
        for mount, skills in self._serving():
            inner = mount.child_uri(uri)
            if inner is not None:
                return mount, skills, inner
        return None

    @staticmethod
    def _renamed(mount: Mount, skill: Skill) -> Skill:
        resources = skill.resources
        if not isinstance(resources, str):
            resources = [msgspec.structs.replace(r, uri=mount.uri(r.uri)) for r in resources]
        return msgspec.structs.replace(skill, uri=mount.uri(skill.uri), resources=resources)

    async def _all(self, mount: Mount, skills: ProxySkills) -> list[Skill]:
        found: list[Skill] = []
        cursor: Any = UNSET
        while True:
            page = await skills.list_result(cursor)
            found += [self._renamed(mount, skill) for skill in page.skills]
            cursor = page.next_cursor
            if not isinstance(cursor, str) or not page.skills:
                return found

    async def list_result(
        self, cursor: str | Any, shown: Callable[[str], bool] = lambda _: True
    ) -> ListSkillsResult:
        entries = [
            skill
            for mount, skills in self._serving()
            for skill in await self._all(mount, skills)
            if shown(skill.uri)
        ]
        page, nxt = paged(entries, cursor, self._page_size())
        return ListSkillsResult(skills=page, next_cursor=nxt)

    async def get_result(self, uri: str, shown: Callable[[str], bool] = lambda _: True) -> GetSkillResult:
        found = self._find(uri)
        if found is None:
            raise unknown_skill(uri)
        mount, skills, inner = found
        result = await skills.get_result(inner)
        result.skill = self._renamed(mount, result.skill)
        if not shown(result.skill.uri):
            raise unknown_skill(uri)
        return result

    async def directory_result(
        self, uri: str, cursor: str | Any, shown: Callable[[str], bool] = lambda _: True
    ) -> ReadDirectoryResult:
        for mount, skills in self._serving():
            if uri == f"{_SCHEME}{mount.namespace}":
                # The namespace itself: a directory of the backend's top-level skill directories.
                tops = {_top(skill.uri) for skill in await self._all(mount, skills)}
                items = [
                    t.Resource(uri=f"{uri}/{name}", name=name, mime_type=DIRECTORY_MIME)
                    for name in sorted(top for top in tops if top is not None)
                    if shown(f"{uri}/{name}")
                ]
                page, nxt = paged(items, cursor, self._page_size())
                return ReadDirectoryResult(resources=page, next_cursor=nxt)
        found = self._find(uri)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"{uri} is not a directory resource", {"uri": uri})
        mount, skills, inner = found
        result = await skills.directory_result(inner, cursor)
        renamed = [msgspec.structs.replace(r, uri=mount.uri(r.uri)) for r in result.resources]
        result.resources = [r for r in renamed if shown(r.uri)]
        return result


def _top(uri: str) -> str | None:
    """The first path segment of a (mounted) skill's URI after the namespace."""
    try:
        segments = split_uri(uri)
    except (SkillError, UnicodeDecodeError):
        return None
    return segments[1] if len(segments) > 2 else None

"""What an :class:`~mcpkit.server.MCPServer` declares and serves besides its registries:
skills, extensions, the capabilities of both eras, and ``completion/complete``."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any, cast

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.tasks import TASKS_EXTENSION
from .context import Context
from .skills import SkillSet, SkillSettings

if TYPE_CHECKING:
    from .app import MCPServer
    from .mount import Mount
    from .tasks_legacy import LegacyTasks

__all__ = ["Completer", "Surface"]

Completer = Callable[..., Awaitable[Any] | Any]


class Surface:
    """The protocol-surface half of :class:`~mcpkit.server.MCPServer` (a mixin: its state
    is set by ``MCPServer.__init__``)."""

    skills: SkillSet | None
    legacy_tasks: LegacyTasks
    _extensions: dict[str, dict[str, Any]]
    _completer: Completer | None
    _mounts: list[Mount]

    def add_skills(
        self,
        *sources: str | os.PathLike[str] | Traversable,
        prefix: str | None = None,
        settings: SkillSettings | None = None,
    ) -> SkillSet:
        """Serve Agent Skills (the ``io.modelcontextprotocol/skills`` extension, SEP-2640).

        Each source is a directory of skills (every directory below it with a ``SKILL.md``),
        one skill's directory, or a package's resources
        (``importlib.resources.files("pkg") / "skills"``). ``prefix`` publishes them under
        ``skill://<prefix>/...``; ``settings`` (limits, ``directoryRead``, refresh) apply
        from the first call on. A skill that breaks the rules raises
        :class:`~mcpkit.protocol.skills.SkillError` naming it. See :mod:`mcpkit.server.skills`."""
        if self.skills is None:
            self.skills = SkillSet(cast("MCPServer", self), settings)
        elif settings is not None and settings != self.skills.settings:
            raise ValueError("skill settings are given once, with the first add_skills()")
        for source in sources:
            self.skills.add(source, prefix=prefix)
        return self.skills

    def declare_extension(self, name: str, settings: Mapping[str, Any] | None = None) -> None:
        """Declare the extension ``name`` (for example ``io.modelcontextprotocol/ui``) with its
        ``settings`` in the capabilities, in ``server/discover`` and in ``initialize``
        results alike (SEP-2663 "Capability Negotiation"; 2025-11-25 servers carry the same
        ``extensions`` map). Declaring it again replaces its settings."""
        if not isinstance(name, str) or "/" not in name:
            raise ValueError(f"an extension is named 'vendor-prefix/name', not {name!r}")
        self._extensions[name] = dict(settings or {})

    @property
    def extensions(self) -> Mapping[str, Mapping[str, Any]]:
        """The extensions declared with :meth:`declare_extension` (tasks aside)."""
        return self._extensions

    def capabilities(self, *, modern: bool, legacy_tasks: bool = False) -> t.ServerCapabilities:
        """The capabilities the server declares, in the ``initialize`` result (``modern=False``)
        and the ``server/discover`` result (``modern=True``); the same in both eras, but for
        tasks: the extension in ``server/discover``, ``tasks`` in an ``initialize`` result
        that negotiated 2025-11-25 (``legacy_tasks``: its experimental tasks)."""
        # Modern: change notifications and resource updates through subscriptions/listen.
        return t.ServerCapabilities(
            tools={"listChanged": True},
            resources={"listChanged": True, "subscribe": True},
            prompts={"listChanged": True},
            logging={},
            completions={},
            # 2026-07-28 extensions, declared in server/discover (SEP-2663 "Capability Negotiation").
            extensions=(
                {TASKS_EXTENSION: {}, **self._extensions} if modern else dict(self._extensions) or UNSET
            ),
            tasks=self.legacy_tasks.capability() if legacy_tasks and not modern else UNSET,
        )

    async def _complete(self, params: t.CompleteParams, ctx: Context) -> t.CompleteResult:
        for mount in self._mounts:  # a mounted server's prompt or template: its own completer
            inner = mount.completion_ref(params.ref)
            if inner is not None:
                return await mount.child._complete(msgspec.structs.replace(params, ref=inner), ctx)
        values: Any = []
        if self._completer is not None:
            context = params.context.arguments if params.context is not UNSET else UNSET
            values = self._completer(params.ref, params.argument, context if context is not UNSET else {})
            if hasattr(values, "__await__"):
                values = await values
        if isinstance(values, t.Completion):
            completion = values
        else:
            items = list(values or [])
            completion = t.Completion(values=items[:100], total=len(items), has_more=len(items) > 100)
        return t.CompleteResult(completion=completion)

"""Serving Agent Skills over MCP (``io.modelcontextprotocol/skills``, SEP-2640).

:meth:`MCPServer.add_skills <mcpkit.server.MCPServer.add_skills>` hands a
directory of skills (or one skill, or a package's resources) to the server's
:class:`SkillSet`, which:

- scans it once, validating every ``SKILL.md`` (its frontmatter, the Agent Skills
  naming rules, the limits of :class:`SkillSettings`): a bad skill is an error at
  add time, naming the file and what is wrong;
- computes each file's size and ``sha256:`` digest, and keeps them current: on
  access, at most every :attr:`SkillSettings.refresh_interval` seconds, it
  re-stats the files and hashes again only those whose size, mtime or inode
  changed (a read that finds different bytes triggers the same). A change is
  announced as ``notifications/resources/updated`` for each changed file and,
  when the listed ``SKILL.md`` resources change (a skill added, removed or
  re-described), ``notifications/resources/list_changed``;
- publishes each ``SKILL.md`` as a listed resource (``text/markdown``, name and
  description from the frontmatter) and every file of every skill under the
  template ``skill://{+path}``, read through the manifest only (see
  :mod:`mcpkit.server._skill_scan` for the path-traversal rules);
- answers ``skills/list`` (paginated, verbatim frontmatter, complete manifests),
  ``skills/get`` and, with ``directory_read``, ``resources/directory/read``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..protocol import _binary as binary
from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, MCPError
from ..protocol.skills import (
    DIRECTORY_MIME,
    MAX_SKILL_BYTES,
    MAX_SKILL_RESOURCES,
    SKILL_FILE,
    SKILL_MIME,
    SKILLS_EXTENSION,
    GetSkillResult,
    ListSkillsResult,
    ReadDirectoryResult,
    Skill,
    SkillError,
    digest,
    file_uri,
    split_uri,
    unknown_skill,
)
from ._skill_scan import ScannedSkill, SkillLimits, read_file, scan_dir_skill, scan_source
from .paging import page as paged
from .resources import ResourceNotFound

if TYPE_CHECKING:
    from .app import MCPServer

__all__ = ["SkillSet", "SkillSettings"]

logger = logging.getLogger("mcpkit.skills")

#: The template every skill file is read through (the listed SKILL.md resources aside).
FILES_TEMPLATE = "skill://{+path}"


#: Files up to this size are read on the event loop; larger ones in a worker thread.
_INLINE_READ_BYTES = 64 * 1024


def _everything(uri: str) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class SkillSettings:
    """How a server serves skills (``server.add_skills(..., settings=SkillSettings(...))``)."""

    #: Declare ``directoryRead`` and answer ``resources/directory/read``.
    directory_read: bool = True
    #: Largest file served, in bytes; a larger one makes its skill an error.
    max_file_bytes: int = MAX_SKILL_BYTES
    #: Largest skill (its files summed), in bytes: 16 MiB, what every host accepts (SEP-2640 "Limits").
    max_skill_bytes: int = MAX_SKILL_BYTES
    #: Most files in one skill, ``SKILL.md`` included: 512, what every host accepts.
    max_files_per_skill: int = MAX_SKILL_RESOURCES
    #: Deepest directory nesting searched for skills and within a skill.
    max_depth: int = 8
    #: Seconds between checks for changed files (on access; and at least ten times as long
    #: as the last check took, so that checks never take more than a tenth of the time);
    #: 0 checks on every access,
    #: None never (call :meth:`SkillSet.refresh` yourself).
    refresh_interval: float | None = 1.0
    #: Serve files and directories whose names start with a dot (``.env``, ``.git``): off.
    include_hidden: bool = False
    #: Names (``fnmatch`` patterns) never served nor searched.
    exclude: tuple[str, ...] = ("__pycache__", "*.pyc", "*.pyo")
    #: Entries per ``skills/list`` and ``resources/directory/read`` page; None: the server's page size.
    page_size: int | None = None


class SkillSet:
    """The skills a server serves; made by :meth:`MCPServer.add_skills`."""

    def __init__(self, server: MCPServer, settings: SkillSettings | None = None) -> None:
        self._server = server
        self.settings = settings or SkillSettings()
        s = self.settings
        if s.max_file_bytes <= 0 or s.max_skill_bytes <= 0 or s.max_files_per_skill <= 0:
            raise ValueError("skill size limits must be positive")
        self._limits = SkillLimits(
            s.max_file_bytes,
            s.max_skill_bytes,
            s.max_files_per_skill,
            s.max_depth,
            s.include_hidden,
            s.exclude,
        )
        #: Each source, its prefix, and for a package's resources (read once) the URIs it gave.
        self._sources: list[tuple[Path | Traversable, tuple[str, ...], list[str]]] = []
        #: SKILL.md URI -> skill, in the order they were added.
        self._skills: dict[str, ScannedSkill] = {}
        self._entries: list[Skill] = []
        self._by_path: dict[tuple[str, ...], ScannedSkill] = {}
        #: Directory (segments) -> child name -> (skill, path in it) for a file, None for a directory.
        self._dirs: dict[tuple[str, ...], dict[str, tuple[ScannedSkill, str] | None]] = {}
        #: When the next check for edits may run (see :meth:`_fresh`).
        self._next_check = time.monotonic() + (self.settings.refresh_interval or 0.0)
        self._lock: asyncio.Lock | None = None

    # -- adding --------------------------------------------------------------

    def add(self, source: str | os.PathLike[str] | Traversable, *, prefix: str | None = None) -> list[str]:
        """Serve the skills of ``source`` (see :meth:`MCPServer.add_skills`); returns the
        ``SKILL.md`` URIs it added. Raises :class:`~mcpkit.protocol.skills.SkillError` for
        a skill that breaks the rules, one whose URI is already served, or a source with none."""
        where: Path | Traversable = Path(source) if isinstance(source, str | os.PathLike) else source
        segments = tuple(split_uri("skill://" + prefix.strip("/"))) if prefix else ()
        found = scan_source(where, segments, self._limits)
        if not found:
            raise SkillError(f"{source}: no skills (no directory with a SKILL.md)")
        skills = dict(self._skills)
        for skill in found:
            if skill.uri in skills:
                raise SkillError(f"{skill.uri} is served twice (the second from {source})")
            skills[skill.uri] = skill
        static = [] if isinstance(where, Path) else [skill.uri for skill in found]
        self._sources.append((where, segments, static))
        self._apply(skills)
        self._server.declare_extension(
            SKILLS_EXTENSION, {"directoryRead": True} if self.settings.directory_read else {}
        )
        return [skill.uri for skill in found]

    def remove(self, source: str | os.PathLike[str] | Traversable, *, prefix: str | None = None) -> list[str]:
        """Stop serving the skills :meth:`add` added from ``source`` under ``prefix``; returns
        their ``SKILL.md`` URIs. :class:`KeyError` when no such source is served."""
        where: Path | Traversable = Path(source) if isinstance(source, str | os.PathLike) else source
        segments = tuple(split_uri("skill://" + prefix.strip("/"))) if prefix else ()
        for index, (served, served_segments, _) in enumerate(self._sources):
            if served == where and served_segments == segments:
                del self._sources[index]
                break
        else:
            raise KeyError(f"{source} (prefix {prefix!r}) is not a source of these skills")
        gone = [u for u, skill in self._skills.items() if skill.path[: len(segments)] == segments]
        kept = self._rescan()
        gone = [u for u in gone if u not in kept]
        self._apply(kept)
        return gone

    @property
    def sources(self) -> list[tuple[Path | Traversable, str | None]]:
        """Every source served, with its prefix (``None`` for none), as given to :meth:`add`."""
        return [(where, "/".join(segments) or None) for where, segments, _ in self._sources]

    @property
    def entries(self) -> list[Skill]:
        """The entry of every skill served, as ``skills/list`` gives them."""
        return list(self._entries)

    # -- keeping current -------------------------------------------------------

    async def refresh(self) -> bool:
        """Re-scan every source now (files whose size, mtime and inode are unchanged are not
        hashed again); announce what changed. Returns whether anything did. A skill that has
        become invalid is withdrawn, with a warning logged, until it is valid again."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            started = time.monotonic()
            skills = await asyncio.to_thread(self._rescan)
            done = time.monotonic()
            # At most every refresh_interval, and never more than a tenth of the time: a
            # tree so large that a check takes 0.5 s is checked every 5 s at the most
            # (refresh_interval=0 asks for every access, whatever it costs).
            interval = self.settings.refresh_interval or 0.0
            self._next_check = done + (max(interval, 10 * (done - started)) if interval else 0.0)
            return self._apply(skills)

    async def _refresh_around(self, uri: str) -> None:
        """Re-scan the skills that hold ``uri`` (the innermost and those it nests in): what
        a read that found other bytes than the manifest's costs, whatever the tree's size."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            segments = split_uri(uri)
            holders = [s for p, s in self._by_path.items() if p == segments[: len(p)] and s.root is not None]
            skills = dict(self._skills)
            for skill in holders:
                assert skill.root is not None
                try:
                    skills[skill.uri] = await asyncio.to_thread(
                        scan_dir_skill, skill.root, skill.path, self._limits, skill
                    )
                except (SkillError, OSError) as exc:
                    _withdrawn(exc if isinstance(exc, SkillError) else SkillError(f"{skill.root}: {exc}"))
                    skills.pop(skill.uri, None)
            self._apply(skills)

    async def _fresh(self) -> None:
        interval = self.settings.refresh_interval
        if interval is not None and time.monotonic() >= self._next_check:
            await self.refresh()

    def _rescan(self) -> dict[str, ScannedSkill]:
        previous = self._skills
        skills: dict[str, ScannedSkill] = {}
        for where, prefix, static in self._sources:
            if not isinstance(where, Path):  # a package's resources do not change: kept as read
                skills.update({uri: previous[uri] for uri in static if uri in previous})
                continue
            try:
                found = scan_source(where, prefix, self._limits, previous, on_error=_withdrawn)
            except (SkillError, OSError) as exc:  # the whole source is gone or unreadable
                _withdrawn(SkillError(f"{where}: {exc}"))
                continue
            for skill in found:
                skills.setdefault(skill.uri, skill)
        return skills

    def _apply(self, skills: dict[str, ScannedSkill]) -> bool:
        """Make ``skills`` the served set; announce the differences. True if any."""
        old = self._skills
        updated: list[str] = []
        for uri, skill in skills.items():
            before = old.get(uri)
            if before is None:
                continue
            for rel in before.files.keys() | skill.files.keys():
                a, b = before.files.get(rel), skill.files.get(rel)
                if a is None or b is None or a.digest != b.digest:
                    updated.append(skill.file_uri(rel))
        listed, was = _listing(skills), _listing(old)
        changed = bool(updated) or listed != was or skills.keys() != old.keys()
        self._skills = skills  # (also when only stamps moved: the next check compares with these)
        self._entries = [s.entry() for s in skills.values()]
        self._by_path = {s.path: s for s in skills.values()}
        self._dirs = _tree(skills.values())
        if listed != was or not old:
            self._publish_resources(old, skills)
        for uri in sorted(set(updated)):
            self._server.notify_resource_updated(uri)
        return changed

    def _publish_resources(self, old: dict[str, ScannedSkill], new: dict[str, ScannedSkill]) -> None:
        """List each SKILL.md (SEP-2640 "Resource Metadata") and the file template; one
        ``list_changed`` for the lot."""
        registry = self._server._resources
        notify, registry.on_change = registry.on_change, None
        try:
            for uri in old.keys() - new.keys():
                registry.resources.pop(uri, None)
            for uri, skill in new.items():
                definition = t.Resource(
                    uri=uri,
                    name=str(skill.frontmatter["name"]),
                    description=str(skill.frontmatter["description"]),
                    mime_type=SKILL_MIME,
                    size=skill.files[SKILL_FILE].size,
                )
                registry.add_raw(definition, self._reader)
            if not any(tpl.uri_template == FILES_TEMPLATE for tpl, _, _ in registry.templates):
                registry.add_raw(
                    t.ResourceTemplate(
                        uri_template=FILES_TEMPLATE,
                        name="skill-files",
                        description="The files of the skills this server serves (see skills/list)",
                    ),
                    self._reader,
                )
        finally:
            registry.on_change = notify
        if notify is not None:
            notify()

    # -- reading -------------------------------------------------------------

    def _locate(self, uri: str) -> tuple[ScannedSkill, str] | None:
        try:
            segments = split_uri(uri)
        except (SkillError, UnicodeDecodeError):
            return None
        for cut in range(len(segments) - 1, 0, -1):  # the innermost skill first
            skill = self._by_path.get(segments[:cut])
            if skill is not None:
                rel = "/".join(segments[cut:])
                if rel in skill.files:
                    return skill, rel
        return None

    async def _reader(self, uri: str, ctx: Any = None) -> list[t.ResourceContents]:
        await self._fresh()
        found = self._locate(uri)
        if found is None:
            raise ResourceNotFound(uri)
        skill, rel = found
        if skill.root is None:
            data = skill.blobs[rel]
        else:
            try:
                limit = self.settings.max_file_bytes
                if skill.files[rel].size <= _INLINE_READ_BYTES:
                    data = read_file(skill.root, rel, limit)  # a few µs: cheaper than a thread hop
                else:
                    data = await asyncio.to_thread(read_file, skill.root, rel, limit)
            except (OSError, SkillError) as exc:
                logger.warning("skills: cannot serve %s: %s", uri, exc)
                raise ResourceNotFound(uri) from None
            info = skill.files[rel]
            if len(data) != info.size or digest(data) != info.digest:
                await self._refresh_around(uri)  # changed since the last check: the manifest follows
        info = skill.files[rel]
        mime = info.mime_type
        try:
            text = data.decode("utf-8") if b"\x00" not in data else None
        except UnicodeDecodeError:
            text = None
        if text is not None and (info.text or mime.startswith("text/")):
            return [t.ResourceContents(uri=uri, mime_type=mime, text=text)]
        return [binary.blob(uri, data, mime)]

    # -- the methods ---------------------------------------------------------

    def _page_size(self) -> int | None:
        return self.settings.page_size if self.settings.page_size is not None else self._server.page_size

    async def list_result(
        self, cursor: str | Any, shown: Callable[[str], bool] = _everything
    ) -> ListSkillsResult:
        """``skills/list``: a page of the entries ``shown`` lets through (never splitting one)."""
        await self._fresh()
        entries = [e for e in self._entries if shown(e.uri)]
        page, nxt = paged(entries, cursor, self._page_size())
        return ListSkillsResult(skills=page, next_cursor=nxt)

    async def get_result(self, uri: str, shown: Callable[[str], bool] = _everything) -> GetSkillResult:
        """``skills/get``: the entry of the skill whose ``SKILL.md`` is at ``uri``, else -32602."""
        await self._fresh()
        try:
            canonical = file_uri("/".join(split_uri(uri)))
        except (SkillError, UnicodeDecodeError):
            raise unknown_skill(uri) from None
        skill = self._skills.get(canonical)
        if skill is None or not shown(canonical):
            raise unknown_skill(uri)
        return GetSkillResult(skill=skill.entry())

    async def directory_result(
        self, uri: str, cursor: str | Any, shown: Callable[[str], bool] = _everything
    ) -> ReadDirectoryResult:
        """``resources/directory/read``: the direct children of a directory in the skill
        namespace (a skill's root, one of its subdirectories, or a prefix); -32602 for
        anything else (SEP-2640 "Reading Directories")."""
        await self._fresh()
        try:
            segments = split_uri(uri)
        except (SkillError, UnicodeDecodeError):
            segments = None
        children = self._dirs.get(segments) if segments else None
        if segments is None or children is None:
            raise MCPError(INVALID_PARAMS, f"{uri} is not a directory resource", {"uri": uri})
        items: list[t.Resource] = []
        for name, child in sorted(children.items()):
            child_uri = file_uri("/".join((*segments, name)))
            if not shown(child_uri):
                continue
            if child is None:
                items.append(t.Resource(uri=child_uri, name=name, mime_type=DIRECTORY_MIME))
            else:
                info = child[0].files[child[1]]
                items.append(t.Resource(uri=child_uri, name=name, mime_type=info.mime_type, size=info.size))
        page, nxt = paged(items, cursor, self._page_size())
        return ReadDirectoryResult(resources=page, next_cursor=nxt)


def _withdrawn(error: SkillError) -> None:
    logger.warning("skills: withdrawn until fixed: %s", error)


def _listing(skills: dict[str, ScannedSkill]) -> list[tuple[str, Any, Any, int]]:
    """What ``resources/list`` shows of the skills: a change here is a ``list_changed``."""
    return [
        (uri, s.frontmatter.get("name"), s.frontmatter.get("description"), s.files[SKILL_FILE].size)
        for uri, s in skills.items()
    ]


def _tree(
    skills: Any,
) -> dict[tuple[str, ...], dict[str, tuple[ScannedSkill, str] | None]]:
    dirs: dict[tuple[str, ...], dict[str, tuple[ScannedSkill, str] | None]] = {}
    for skill in skills:
        for rel in skill.files:
            full = (*skill.path, *rel.split("/"))
            for cut in range(1, len(full)):
                last = cut == len(full) - 1
                dirs.setdefault(full[:cut], {})[full[cut]] = (skill, rel) if last else None
    return dirs

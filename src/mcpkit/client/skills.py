"""Skills, client side: the ``io.modelcontextprotocol/skills`` extension (SEP-2640).

A server that declares the extension serves Agent Skills: each skill a directory of
files (a ``SKILL.md`` with YAML frontmatter, and supporting files) exposed as resources,
listed by ``skills/list`` and ``skills/get`` with a complete manifest: every file's URI,
``size`` and ``sha256:`` digest. The client here:

- lists skills (:meth:`Client.list_skills`, every page; :meth:`Client.list_skills_page`,
  one) and gets one by URI or name (:meth:`Client.get_skill`), and checks each entry's
  shape (Skill Entries: ``resources`` complete, within the skill, well-formed digests);
- reads nothing ahead of need (ext-skills "Lazy Retrieval"): listing or getting a skill
  fetches no file; :meth:`Skill.read` fetches one file, when asked;
- verifies every file it reads against the held entry ("Integrity and Verification"):
  its byte length against ``size``, its SHA-256 against ``digest``, a file not in the
  manifest refused, and a ``SKILL.md``'s frontmatter compared field by field with the
  entry's ("Frontmatter Verification"). Content that fails a check raises
  :class:`SkillVerificationError` and is never returned;
- keeps the verified bytes of the files it read (the spec's "Hosts SHOULD cache what they
  do retrieve"): in memory, in the :class:`Skill`, never written anywhere.

The client declares the extension (``capabilities.extensions``) on its ``skills/*``
requests, in the request's ``_meta`` (2026-07-28 extensions overview, "Client
Capabilities"), and sends them only to a server that declared it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol import skills as _wire
from ..protocol.meta import CLIENT_CAPABILITIES
from ..protocol.skills import SKILLS_EXTENSION, SkillError, SkillVerificationError

if TYPE_CHECKING:
    from .client import Client

__all__ = [
    "SKILLS_EXTENSION",
    "Skill",
    "SkillError",
    "SkillFile",
    "SkillVerificationError",
    "SkillsPage",
    "SkillsUnsupported",
    "get_skill",
    "list_skills",
    "list_skills_page",
    "read_directory",
]

_SKILL_MD = _wire.SKILL_FILE
#: Pages of ``skills/list`` followed at most (a server that never stops paging is refused).
MAX_PAGES = 1000


class SkillsUnsupported(SkillError):
    """The server did not declare the skills extension: ``skills/*`` are not sent to it
    (ext-skills "Capability Negotiation": clients call them only after observing it)."""


def _refused(uri: str, message: str) -> SkillVerificationError:
    return SkillVerificationError(f"{uri}: {message}")


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill's manifest."""

    #: The file's resource URI.
    uri: str
    #: Its path relative to the skill's root (``SKILL.md``, ``references/FORMS.md``).
    path: str
    #: ``sha256:`` and 64 lowercase hex digits: the digest of its raw bytes.
    digest: str
    #: Its length in bytes.
    size: int


class Skill:
    """A skill's entry (from ``skills/list`` or ``skills/get``), held to read and verify
    its files: :meth:`read` fetches one file with ``resources/read`` and returns its
    bytes only once they match the entry.

    ``problem`` is set when the entry itself is invalid (no ``resources``, a file outside
    the skill, a file listed twice, a malformed digest, no ``SKILL.md`` entry, a URI whose
    last segment is not the frontmatter's ``name``, more than the extension's limits):
    such a skill must not be loaded (ext-skills "Resources", "Limits"), and :meth:`read`
    refuses it.
    """

    def __init__(self, client: Client | None, entry: Mapping[str, Any]) -> None:
        self._client = client
        #: The entry exactly as the server sent it.
        self.entry: dict[str, Any] = dict(entry)
        uri = entry.get("uri")
        frontmatter = entry.get("frontmatter")
        #: The ``SKILL.md`` URI: the skill's identity on its server.
        self.uri: str = uri if isinstance(uri, str) else ""
        #: The frontmatter as listed (a JSON object, verbatim).
        self.frontmatter: dict[str, Any] = dict(frontmatter) if isinstance(frontmatter, Mapping) else {}
        name = self.frontmatter.get("name")
        description = self.frontmatter.get("description")
        self.name: str = name if isinstance(name, str) else ""
        self.description: str = description if isinstance(description, str) else ""
        #: The skill's root directory URI (the ``SKILL.md`` URI without ``/SKILL.md``).
        self.root: str = self.uri[: -len(_SKILL_MD) - 1] if self.uri.endswith("/" + _SKILL_MD) else ""
        #: ``resources`` is ``"dynamic"``: no digests, no integrity (ext-skills "Resources").
        self.dynamic: bool = entry.get("resources") == _wire.DYNAMIC
        #: The manifest, by URI (empty for a dynamic skill or an invalid entry).
        self.files: dict[str, SkillFile] = {}
        #: Why the entry is invalid (None: it is valid).
        self.problem: str | None = None
        self._wire: _wire.Skill | None = None
        self._verified: dict[str, bytes] = {}
        try:
            self._check_entry()
        except (ValueError, msgspec.ValidationError) as exc:
            self.problem = str(exc)
            self.files = {}

    def __repr__(self) -> str:
        return f"<Skill {self.name!r} {self.uri}>"

    def _check_entry(self) -> None:
        # Scheme-agnostic on purpose: skill:// is conventional, not required (ext-skills
        # "Resource Mapping": "No scheme is privileged").
        if not self.root:
            raise ValueError(f"the entry's uri {self.uri!r} does not end in /{_SKILL_MD}")
        if not self.name or not isinstance(self.frontmatter.get("description"), str):
            raise ValueError("the entry's frontmatter lacks a name or description")
        if self.root.rsplit("/", 1)[-1] != self.name:
            raise ValueError(f"the uri's last segment is not the frontmatter's name {self.name!r}")
        self._wire = msgspec.convert(self.entry, _wire.Skill)
        resources = self._wire.resources
        if isinstance(resources, str):
            return  # "dynamic"
        for item in resources:
            if item.uri in self.files:
                raise ValueError(f"{item.uri} is listed twice")
            if not item.uri.startswith(self.root + "/"):
                raise ValueError(f"{item.uri} is not within the skill ({self.root})")
            if not _wire.is_digest(item.digest):
                raise ValueError(f"{item.uri}: digest {item.digest!r} is not sha256: and 64 lowercase hex")
            if item.size < 0:
                raise ValueError(f"{item.uri}: negative size")
            self.files[item.uri] = SkillFile(item.uri, item.uri[len(self.root) + 1 :], item.digest, item.size)
        if self.uri not in self.files:
            raise ValueError(f"the manifest does not list {self.uri}")
        if len(self.files) > _wire.MAX_SKILL_RESOURCES or self.total_size > _wire.MAX_SKILL_BYTES:
            raise ValueError(
                f"{len(self.files)} files, {self.total_size} bytes: over the extension's limits "
                f"({_wire.MAX_SKILL_RESOURCES} files, {_wire.MAX_SKILL_BYTES} bytes)"
            )

    @property
    def total_size(self) -> int:
        """The sum of the manifest's sizes (0 for a dynamic skill)."""
        return sum(f.size for f in self.files.values())

    def file(self, path: str) -> SkillFile:
        """The manifest entry of ``path`` (relative to the skill's root, or a full URI).

        Raises :class:`SkillVerificationError` for a file the manifest does not list:
        while acting on a skill, an unlisted file is a verification failure (ext-skills
        "The Acting Window and the Held Entry"); refresh the entry with
        :meth:`Client.get_skill` to see the server's current files.
        """
        self._usable()
        uri = self.resolve(path)
        found = self.files.get(uri)
        if found is None:
            raise _refused(uri, f"not in the manifest of skill {self.name!r} (refresh it with get_skill)")
        return found

    def resolve(self, path: str) -> str:
        """The URI of ``path``: a full URI as is, a relative path against the skill's root
        (ext-skills "Relative References"); a path that climbs out of the skill raises
        :class:`SkillVerificationError`."""
        if "://" in path:
            return path
        parts: list[str] = []
        for part in path.replace("\\", "/").split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise _refused(f"{self.root}/{path}", "the path leaves the skill's directory")
                parts.pop()
                continue
            parts.append(part)
        if not parts:
            raise _refused(f"{self.root}/{path}", "the path names no file")
        return f"{self.root}/{'/'.join(parts)}"

    def _usable(self) -> None:
        if self.problem is not None:
            raise _refused(self.uri or "(no uri)", f"invalid skill entry: {self.problem}")

    async def read(self, path: str = _SKILL_MD, *, allow_unverified: bool = False) -> bytes:
        """The verified bytes of one file of the skill (``SKILL.md`` by default).

        Fetched with ``resources/read`` when first asked for (never before), checked
        against the manifest's ``size``, then its ``digest``; a ``SKILL.md`` also has its
        frontmatter compared field by field with the entry's. Verified bytes are kept: a
        second read is served from memory. Any failure raises
        :class:`SkillVerificationError` and nothing is kept or returned.

        A dynamic skill (``resources: "dynamic"``) has nothing to verify files against:
        reading it raises unless ``allow_unverified`` (its ``SKILL.md`` frontmatter is
        still compared, as the spec requires).
        """
        self._usable()
        if self.dynamic:
            if not allow_unverified:
                raise _refused(
                    self.uri,
                    'the skill\'s resources are "dynamic": its content cannot be verified '
                    "(pass allow_unverified=True to read it anyway)",
                )
            uri = self.resolve(path)
            data = await self._fetch(uri)
            if uri == self.uri:
                self._check_frontmatter(data)
            return data
        entry = self.file(path)
        cached = self._verified.get(entry.uri)
        if cached is not None:
            return cached
        data = await self._fetch(entry.uri)
        _wire.verify(data, _wire.SkillResource(uri=entry.uri, digest=entry.digest, size=entry.size))
        if entry.uri == self.uri:
            self._check_frontmatter(data)
        self._verified[entry.uri] = data
        return data

    async def read_text(self, path: str = _SKILL_MD, *, allow_unverified: bool = False) -> str:
        """:meth:`read`, decoded as UTF-8 (a file that is not UTF-8 raises ``UnicodeDecodeError``)."""
        return (await self.read(path, allow_unverified=allow_unverified)).decode("utf-8")

    async def read_all(self) -> dict[str, bytes]:
        """Every file of the manifest, verified, by path (for an export; a host loading a
        skill reads files as they are needed, with :meth:`read`)."""
        self._usable()
        if self.dynamic:
            raise _refused(self.uri, 'the skill\'s resources are "dynamic": it cannot be verified')
        return {f.path: await self.read(f.uri) for f in self.files.values()}

    async def _fetch(self, uri: str) -> bytes:
        if self._client is None:
            raise RuntimeError("this Skill is not bound to a client")
        result = await self._client.read_resource(uri)
        return content_bytes(uri, result.contents)

    def _check_frontmatter(self, data: bytes) -> None:
        """ext-skills "Frontmatter Verification": parse the fetched ``SKILL.md``'s frontmatter
        and compare it field by field with the entry's; any difference refuses it."""
        assert self._wire is not None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _refused(self.uri, "SKILL.md is not UTF-8 text") from None
        parsed = _wire.verify_frontmatter(text, self._wire)
        # Python's == takes true for 1 and false for 0: compare as JSON values do, too.
        differing = sorted(
            k
            for k in parsed.keys() | self.frontmatter.keys()
            if not _same(parsed.get(k), self.frontmatter.get(k))
        )
        if differing:
            raise _refused(
                self.uri, f"frontmatter differs from the entry's in {', '.join(map(repr, differing))}"
            )


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: a boolean is never a number, numbers compare by value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def content_bytes(uri: str, contents: list[Any]) -> bytes:
    """The raw bytes of ``uri`` in a ``resources/read`` answer: its text as UTF-8, or its
    blob base64-decoded (the bytes the manifest's digest covers)."""
    chosen = next((c for c in contents if c.uri == uri), None)
    if chosen is None and len(contents) == 1:
        chosen = contents[0]
    if chosen is None:
        raise _refused(uri, "the server's answer holds no content for this URI")
    if isinstance(chosen.text, str):
        return bytes(chosen.text.encode("utf-8"))
    if isinstance(chosen.blob, str):
        try:
            return base64.b64decode(chosen.blob, validate=True)
        except (binascii.Error, ValueError):
            raise _refused(uri, "the blob is not valid base64") from None
    raise _refused(uri, "the content has neither text nor blob")


# -- requests -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillsPage:
    """One page of ``skills/list``."""

    skills: list[Skill]
    next_cursor: str | None


class _ListResult(msgspec.Struct, rename="camel"):
    skills: list[dict[str, Any]]
    next_cursor: str | None = None


class _GetResult(msgspec.Struct):
    skill: dict[str, Any]


def declared(client: Client) -> bool:
    """Whether the server declared the skills extension."""
    caps = client.server_capabilities
    extensions = getattr(caps, "extensions", None)
    return isinstance(extensions, dict) and SKILLS_EXTENSION in extensions


async def _request(client: Client, method: str, params: dict[str, Any], result_type: type[Any]) -> Any:
    if not declared(client):
        raise SkillsUnsupported(f"the server does not declare the {SKILLS_EXTENSION} extension")
    session = client._session
    if session is None:
        raise RuntimeError("client is not connected")
    wire = client._params(params)
    meta = wire.get("_meta")
    if isinstance(meta, dict):
        # Declared on the requests that use it (extensions overview, "Client Capabilities").
        capabilities = dict(meta.get(CLIENT_CAPABILITIES) or {})
        capabilities["extensions"] = {**(capabilities.get("extensions") or {}), SKILLS_EXTENSION: {}}
        wire["_meta"] = {**meta, CLIENT_CAPABILITIES: capabilities}
    raw = await client._send(session, method, wire, client.timeout)
    return msgspec.json.decode(raw, type=result_type)


async def list_skills_page(client: Client, cursor: str | None = None) -> SkillsPage:
    """One page of ``skills/list`` (``cursor`` from the previous page's ``next_cursor``)."""
    result = await _request(client, "skills/list", {} if cursor is None else {"cursor": cursor}, _ListResult)
    return SkillsPage([Skill(client, entry) for entry in result.skills], result.next_cursor or None)


async def list_skills(client: Client) -> list[Skill]:
    """Every skill the server lists, following ``nextCursor`` (a cursor seen twice ends it)."""
    skills: list[Skill] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await list_skills_page(client, cursor)
        skills.extend(page.skills)
        if page.next_cursor is None or page.next_cursor in seen:
            return skills
        seen.add(page.next_cursor)
        cursor = page.next_cursor
    raise SkillError(f"skills/list: still more pages after {MAX_PAGES}")


def directory_read_declared(client: Client) -> bool:
    """Whether the server declared ``directoryRead: true`` in its skills extension settings."""
    extensions = getattr(client.server_capabilities, "extensions", None)
    settings = extensions.get(SKILLS_EXTENSION) if isinstance(extensions, dict) else None
    return isinstance(settings, dict) and settings.get("directoryRead") is True


async def read_directory(client: Client, uri: str) -> list[Any]:
    """The direct children of a directory resource (``resources/directory/read``, every
    page): files as ordinary resources, subdirectories with ``mime_type`` ``inode/directory``.

    Sent only to a server that declared ``directoryRead: true`` (ext-skills "Capability
    Negotiation": clients MUST NOT call it otherwise). A directory listing is a live view of
    the server, not part of any skill's manifest: a file it shows that a held entry does not
    list is still refused by :meth:`Skill.read` (ext-skills "Directory Reads and the Held Entry").
    """
    if not directory_read_declared(client):
        raise SkillsUnsupported(f"the server does not declare directoryRead in {SKILLS_EXTENSION}")
    children: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params: dict[str, Any] = {"uri": uri} if cursor is None else {"uri": uri, "cursor": cursor}
        page = await _request(client, "resources/directory/read", params, _wire.ReadDirectoryResult)
        children.extend(page.resources)
        nxt = page.next_cursor
        if not isinstance(nxt, str) or not nxt or nxt in seen:
            return children
        seen.add(nxt)
        cursor = nxt
    raise SkillError(f"resources/directory/read: still more pages after {MAX_PAGES}")


async def get_skill(client: Client, name_or_uri: str) -> Skill:
    """The entry of one skill (``skills/get``), named by its ``SKILL.md`` URI, by its root
    URI, or by name.

    A name is looked up in the listing: several skills of that name is an error naming
    their URIs (names are labels, not identifiers: ext-skills "Names"); a name the
    listing lacks (listings may be partial) is asked for as ``skill://NAME/SKILL.md``.
    A skill path (``acme/billing/refunds``) is asked for as ``skill://PATH/SKILL.md``.
    """
    if "://" in name_or_uri:
        uri = name_or_uri
        if not uri.endswith("/" + _SKILL_MD):
            uri = uri.rstrip("/") + "/" + _SKILL_MD
    elif "/" in name_or_uri.strip("/"):
        uri = f"skill://{name_or_uri.strip('/')}/{_SKILL_MD}"
    else:
        matches = [s for s in await list_skills(client) if s.name == name_or_uri]
        if len(matches) > 1:
            uris = ", ".join(s.uri for s in matches)
            raise SkillError(f"{len(matches)} skills are named {name_or_uri!r}: {uris}; name one by its URI")
        uri = matches[0].uri if matches else f"skill://{name_or_uri}/{_SKILL_MD}"
    result = await _request(client, "skills/get", {"uri": uri}, _GetResult)
    return Skill(client, result.skill)

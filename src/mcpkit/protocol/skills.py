"""The skills extension (``io.modelcontextprotocol/skills``, SEP-2640), sans I/O.

A server serves Agent Skills (a directory with a ``SKILL.md`` whose YAML
frontmatter names and describes it, plus supporting files) as resources under
``skill://<skill-path>/<file-path>``, and answers ``skills/list`` and
``skills/get`` with :class:`Skill` entries: the verbatim frontmatter and a
complete manifest of the skill's files with their sizes and ``sha256:`` digests.
With ``directoryRead`` it also answers ``resources/directory/read``.

This module holds what both sides need: the wire shapes, ``skill://`` URI
helpers (building, and parsing with traversal refused), frontmatter parsing
and validation (the Agent Skills naming rules), digests, and the checks a
client runs on what it reads (:func:`verify`, :func:`verify_frontmatter`,
:func:`check_limits`). Serving skills is :mod:`mcpkit.server.skills`.

Frontmatter is parsed with PyYAML (the ``skills`` extra) under the YAML 1.2
core schema, as JavaScript hosts parse it: ``yes`` stays a string, ``2026-01-02``
stays a string, ``010`` is ten. A YAML 1.1 reading would render the same file
differently from a host's and fail its field-by-field frontmatter comparison.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote, unquote

from msgspec import UNSET, UnsetType

from .errors import INVALID_PARAMS, MCPError
from .types.base import WireStruct
from .types.features import CacheScope, PaginatedResult, Resource, Result
from .types.params import PaginatedParams, Params

__all__ = [
    "DIRECTORY_MIME",
    "DYNAMIC",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_RESOURCES",
    "META_PREFIX",
    "SKILLS_EXTENSION",
    "SKILL_FILE",
    "SKILL_METHODS",
    "SKILL_MIME",
    "GetSkillParams",
    "GetSkillResult",
    "ListSkillsResult",
    "ReadDirectoryParams",
    "ReadDirectoryResult",
    "Skill",
    "SkillError",
    "SkillFormatError",
    "SkillResource",
    "SkillVerificationError",
    "check_limits",
    "digest",
    "file_uri",
    "frontmatter_problems",
    "is_digest",
    "parse_frontmatter",
    "resolve_reference",
    "skill_name",
    "skill_root",
    "skill_uri",
    "split_frontmatter",
    "split_uri",
    "unknown_skill",
    "valid_name",
    "verify",
    "verify_frontmatter",
]

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
#: The methods the extension adds (``resources/directory/read`` only with ``directoryRead``).
SKILL_METHODS = frozenset({"skills/list", "skills/get", "resources/directory/read"})
SKILL_FILE = "SKILL.md"
#: ``mimeType`` of a ``SKILL.md`` resource (SEP-2640 "Resource Metadata": SHOULD).
SKILL_MIME = "text/markdown"
#: ``mimeType`` of a directory resource (SEP-2640 "Directory Resources").
DIRECTORY_MIME = "inode/directory"
#: ``resources`` of a skill whose content is generated, so it has no stable digests.
DYNAMIC = "dynamic"
#: Per-skill limits every host accepts (SEP-2640 "Limits"): entries, and bytes summed.
MAX_SKILL_RESOURCES = 512
MAX_SKILL_BYTES = 16 * 1024 * 1024
#: ``_meta`` key prefix this extension reserves on skill resources.
META_PREFIX = "io.modelcontextprotocol.skills/"

_SCHEME = "skill://"


class SkillError(ValueError):
    """A skill, URI or entry that breaks the extension's rules."""


class SkillFormatError(SkillError):
    """A ``SKILL.md`` whose frontmatter is missing, unparsable or breaks the Agent Skills rules."""


class SkillVerificationError(SkillError):
    """Content that does not match its entry (size, digest or frontmatter): never use it."""


# -- wire shapes -----------------------------------------------------------------


class SkillResource(WireStruct, kw_only=True):
    """One file of a skill: its URI and the size and digest of its raw bytes."""

    uri: str
    #: ``sha256:`` and 64 lowercase hex digits.
    digest: str
    size: int


class Skill(WireStruct, kw_only=True):
    """The entry of one skill, the same in ``skills/list`` and ``skills/get``."""

    #: URI of the skill's ``SKILL.md``.
    uri: str
    #: The ``SKILL.md`` frontmatter, verbatim as a JSON object (``name``, ``description``, ...).
    frontmatter: dict[str, Any]
    #: Every file of the skill (``SKILL.md`` included), or ``"dynamic"``.
    resources: list[SkillResource] | Literal["dynamic"]


class GetSkillParams(Params, kw_only=True):
    """``skills/get``: the URI of the skill's ``SKILL.md``."""

    uri: str


class ReadDirectoryParams(PaginatedParams, kw_only=True):
    """``resources/directory/read``: the directory resource's URI (no trailing slash)."""

    uri: str


class ListSkillsResult(PaginatedResult, kw_only=True):
    skills: list[Skill]


class GetSkillResult(Result, kw_only=True):
    skill: Skill
    # CacheableResult (2026-07-28): required there, absent before.
    ttl_ms: int | UnsetType = UNSET
    cache_scope: CacheScope | UnsetType = UNSET


class ReadDirectoryResult(Result, kw_only=True):
    """The directory's direct children: files as ordinary resources, subdirectories
    with ``mimeType: inode/directory``."""

    resources: list[Resource]
    next_cursor: str | UnsetType = UNSET


def unknown_skill(uri: str) -> MCPError:
    """The error for ``skills/get`` of a URI that names no served skill (-32602, SEP-2640)."""
    return MCPError(INVALID_PARAMS, f"No skill is served at {uri}", {"uri": uri})


# -- URIs ------------------------------------------------------------------------

_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?\Z")
# Characters left as they are in a path segment (RFC 3986 pchar, "%" aside).
_SAFE = "-._~!$&'()*+,;=:@"
_SAFE_AUTHORITY = "-._~!$&'()*+,;="


def valid_name(name: object) -> bool:
    """Whether ``name`` is a valid skill name (Agent Skills: 1-64 characters, lowercase
    letters, digits and hyphens, no leading, trailing or doubled hyphen)."""
    return isinstance(name, str) and _NAME.match(name) is not None


def _check_segment(segment: str, uri: str) -> str:
    # Decoded, a segment must still be one plain name: "%2e%2e", "%2F" and friends
    # are how a traversal hides in a URI.
    if segment in ("", ".", "..") or any(c in segment for c in "/\\\x00"):
        raise SkillError(f"{uri!r} is not a valid skill URI: bad path segment {segment!r}")
    return segment


def split_uri(uri: str) -> tuple[str, ...]:
    """The decoded path segments of a ``skill://`` URI (authority first).

    Raises :class:`SkillError` for another scheme, a query or fragment, an empty
    segment, a trailing slash, or a segment that decodes to ``.``, ``..`` or
    something with a ``/``, ``\\`` or NUL in it."""
    if not isinstance(uri, str) or not uri.startswith(_SCHEME):
        raise SkillError(f"{uri!r} is not a skill:// URI")
    rest = uri[len(_SCHEME) :]
    if "?" in rest or "#" in rest:
        raise SkillError(f"{uri!r} is not a valid skill URI: no query or fragment allowed")
    try:
        return tuple(_check_segment(unquote(s, errors="strict"), uri) for s in rest.split("/"))
    except UnicodeDecodeError:
        raise SkillError(f"{uri!r} is not a valid skill URI: a %-escape that is not UTF-8") from None


def _join(segments: tuple[str, ...] | list[str]) -> str:
    # The first segment is the URI's authority, where ":" and "@" would mean a port and
    # user info (RFC 3986 reg-name): those are escaped there.
    first, *rest = segments
    return _SCHEME + "/".join([quote(first, safe=_SAFE_AUTHORITY), *(quote(s, safe=_SAFE) for s in rest)])


def skill_uri(skill_path: str) -> str:
    """The URI of the ``SKILL.md`` of the skill at ``skill_path`` (``"git-workflow"``,
    ``"acme/billing/refunds"``)."""
    return file_uri(skill_path, SKILL_FILE)


def file_uri(skill_path: str, file_path: str = "") -> str:
    """The URI of ``file_path`` (``/``-separated) in the skill at ``skill_path``; the skill's
    directory resource when ``file_path`` is empty. Segments are percent-encoded."""
    segments = [s for s in skill_path.split("/")] + ([s for s in file_path.split("/")] if file_path else [])
    for s in segments:
        _check_segment(s, f"{skill_path}/{file_path}")
    return _join(segments)


def skill_root(uri: str) -> str:
    """The skill's directory URI for the URI of its ``SKILL.md`` (SEP-2640: no trailing slash)."""
    segments = split_uri(uri)
    if len(segments) < 2 or segments[-1] != SKILL_FILE:
        raise SkillError(f"{uri!r} is not the URI of a SKILL.md")
    return _join(segments[:-1])


def skill_name(uri: str) -> str:
    """The skill name a ``SKILL.md`` URI carries: its final ``<skill-path>`` segment."""
    segments = split_uri(uri)
    if len(segments) < 2 or segments[-1] != SKILL_FILE:
        raise SkillError(f"{uri!r} is not the URI of a SKILL.md")
    return segments[-2]


def resolve_reference(skill: str, reference: str) -> str:
    """Resolve a relative reference inside ``SKILL.md`` (``references/GUIDE.md``) against
    the skill's root (SEP-2640 "Relative References"); one that climbs out of the skill,
    is absolute or names another scheme raises :class:`SkillError`."""
    root = split_uri(skill_root(skill))
    if reference.startswith("/") or "://" in reference or "\\" in reference:
        raise SkillError(f"{reference!r} is not a relative reference inside the skill")
    out: list[str] = []
    for part in reference.split("/"):
        part = unquote(part)
        if part in ("", "."):
            continue
        if part == ".." or "/" in part or "\x00" in part:
            raise SkillError(f"{reference!r} leaves the skill's directory")
        out.append(part)
    if not out:
        raise SkillError(f"{reference!r} names no file")
    return _join(root + tuple(out))


# -- frontmatter -----------------------------------------------------------------

_FRONTMATTER = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


def split_frontmatter(text: str) -> tuple[str, str]:
    """``(yaml, body)`` of a ``SKILL.md``; :class:`SkillFormatError` when it does not begin
    with a ``---`` delimited block (a leading byte-order mark is allowed)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    m = _FRONTMATTER.match(text)
    if m is None:
        raise SkillFormatError("SKILL.md does not begin with '---' delimited YAML frontmatter")
    return m.group(1), text[m.end() :]


def _loader() -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - the extra is installed in development
        raise SkillFormatError(
            "parsing SKILL.md frontmatter needs PyYAML: pip install 'mcpkit[skills]'"
        ) from None
    global _LOADER
    if _LOADER is None:
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        class Core12Loader(base):  # type: ignore[misc,valid-type]
            """SafeLoader with the YAML 1.2 core schema's implicit types only."""

        Core12Loader.yaml_implicit_resolvers = {}
        resolvers = [
            ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
            ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
            ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
            (
                "float",
                r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
                "-+.0123456789",
            ),
        ]
        for tag, pattern, first in resolvers:
            Core12Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern), list(first))

        def construct_int(loader: Any, node: Any) -> int:
            value = loader.construct_scalar(node)
            if value.startswith("0o"):
                return int(value[2:], 8)
            if value.startswith("0x"):
                return int(value[2:], 16)
            return int(value, 10)  # "010" is ten in YAML 1.2, not eight

        Core12Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
        _LOADER = Core12Loader
    return _LOADER


_LOADER: Any = None


def _json_safe(value: Any, where: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SkillFormatError(f"frontmatter {where} is {value}, which JSON cannot carry")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _json_safe(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SkillFormatError(f"frontmatter {where} has a non-string key {key!r}")
            _json_safe(item, f"{where}.{key}" if where else key)
        return
    raise SkillFormatError(f"frontmatter {where or 'value'} is a {type(value).__name__}, not JSON data")


def parse_frontmatter(text: str) -> dict[str, Any]:
    """The frontmatter of a ``SKILL.md`` as a JSON-ready dict, verbatim (every field the
    author wrote). Raises :class:`SkillFormatError` when there is none, it is not valid
    YAML, not a mapping, or holds values JSON cannot carry (binary, timestamps by tag)."""
    import yaml

    source, _ = split_frontmatter(text)
    try:
        data = yaml.load(source, Loader=_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"SKILL.md frontmatter is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SkillFormatError("SKILL.md frontmatter is not a mapping of fields")
    _json_safe(data, "")
    return data


def frontmatter_problems(frontmatter: Mapping[str, Any], expected_name: str | None = None) -> list[str]:
    """What breaks the Agent Skills rules in ``frontmatter`` (empty when nothing does):
    ``name`` (and that it equals ``expected_name``, the skill's directory), ``description``
    (1-1024 characters), ``compatibility`` (at most 500), ``metadata`` (a mapping)."""
    problems: list[str] = []
    name = frontmatter.get("name")
    if not isinstance(name, str) or not name:
        problems.append("'name' is missing or not a string")
    elif not valid_name(name):
        problems.append(
            f"'name' {name!r} breaks the naming rules (1-64 characters: lowercase letters, digits "
            "and hyphens, no leading, trailing or doubled hyphen)"
        )
    elif expected_name is not None and name != expected_name:
        problems.append(f"'name' {name!r} does not match its directory {expected_name!r}")
    description = frontmatter.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("'description' is missing, empty or not a string")
    elif len(description) > 1024:
        problems.append(f"'description' is {len(description)} characters long (at most 1024)")
    compatibility = frontmatter.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > 500):
        problems.append("'compatibility' must be a string of at most 500 characters")
    metadata = frontmatter.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        problems.append("'metadata' must be a mapping")
    return problems


# -- digests and verification ----------------------------------------------------

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")


def digest(data: bytes) -> str:
    """The digest of ``data`` as the extension writes it: ``sha256:`` + 64 lowercase hex."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(value: object) -> bool:
    return isinstance(value, str) and _DIGEST.match(value) is not None


def verify(data: bytes, entry: SkillResource) -> None:
    """Check a file's raw bytes against its manifest entry (SEP-2640 "Verification on
    Read"): a size or digest mismatch raises :class:`SkillVerificationError`, and the
    bytes must then not be used."""
    if not is_digest(entry.digest):
        raise SkillVerificationError(f"{entry.uri}: the entry's digest {entry.digest!r} is malformed")
    if len(data) != entry.size:
        raise SkillVerificationError(
            f"{entry.uri}: read {len(data)} bytes, the entry says {entry.size} (content changed or tampered)"
        )
    if not hmac.compare_digest(digest(data), entry.digest):
        raise SkillVerificationError(f"{entry.uri}: content does not match the entry's digest")


def verify_frontmatter(text: str, entry: Skill) -> dict[str, Any]:
    """Parse a fetched ``SKILL.md`` and compare its frontmatter field by field with the
    entry's (SEP-2640 "Frontmatter Verification"); any difference raises
    :class:`SkillVerificationError`. Returns the parsed frontmatter."""
    try:
        parsed = parse_frontmatter(text)
    except SkillFormatError as exc:
        raise SkillVerificationError(f"{entry.uri}: {exc}") from None
    differing = sorted(
        k for k in parsed.keys() | entry.frontmatter.keys() if parsed.get(k) != entry.frontmatter.get(k)
    )
    if differing:
        raise SkillVerificationError(
            f"{entry.uri}: frontmatter differs from the entry's in {', '.join(map(repr, differing))}"
        )
    return parsed


def check_limits(
    entry: Skill, max_resources: int = MAX_SKILL_RESOURCES, max_bytes: int = MAX_SKILL_BYTES
) -> list[str]:
    """What in ``entry`` breaks the extension's rules or limits (empty when nothing does):
    the URI and name agreeing, the manifest being complete, inside the skill, each file
    once, well-formed digests and sizes, at most ``max_resources`` entries and
    ``max_bytes`` in total. A ``"dynamic"`` entry has nothing to count."""
    problems: list[str] = []
    try:
        name = skill_name(entry.uri)
        root = skill_root(entry.uri)
    except SkillError as exc:
        return [str(exc)]
    if entry.frontmatter.get("name") != name:
        problems.append(f"{entry.uri}: frontmatter name {entry.frontmatter.get('name')!r} != {name!r}")
    if entry.resources == DYNAMIC or isinstance(entry.resources, str):
        return problems
    seen: set[str] = set()
    for item in entry.resources:
        if item.uri in seen:
            problems.append(f"{item.uri} is listed more than once")
        seen.add(item.uri)
        if item.uri != entry.uri and not item.uri.startswith(root + "/"):
            problems.append(f"{item.uri} is outside the skill's directory {root}")
        if not is_digest(item.digest):
            problems.append(f"{item.uri}: digest {item.digest!r} is not sha256:<64 lowercase hex>")
        if item.size < 0:
            problems.append(f"{item.uri}: negative size")
    if entry.uri not in seen:
        problems.append(f"{entry.uri}: the manifest has no entry for SKILL.md itself")
    if len(entry.resources) > max_resources:
        problems.append(f"{entry.uri}: {len(entry.resources)} files (at most {max_resources})")
    total = sum(item.size for item in entry.resources)
    if total > max_bytes:
        problems.append(f"{entry.uri}: {total} bytes in all (at most {max_bytes})")
    return problems

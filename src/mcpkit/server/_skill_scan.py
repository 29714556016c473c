"""Finding skills on disk (or in a package's resources) and reading their files safely.

Blocking file I/O, run by :mod:`mcpkit.server.skills` in a worker thread (reads of
files up to 64 KiB excepted: those are quicker than the thread hop).

What is served is what a scan found: a read resolves a URI to a file only
through the manifest of the skill it names, never by joining the URI onto a
directory, so ``..`` (plain or percent-encoded), absolute paths and names a
scan skipped cannot reach anything. The file is then opened by its real path
only if that path is still inside the skill's real directory (a symlink
swapped in after the scan, or one that pointed out of the skill, is refused),
one component at a time, following no symlink (:func:`_open_beneath`).
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import mimetypes
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ..protocol.skills import (
    SKILL_FILE,
    SKILL_MIME,
    Skill,
    SkillError,
    SkillFormatError,
    SkillResource,
    digest,
    file_uri,
    frontmatter_problems,
    parse_frontmatter,
)

__all__ = ["FileInfo", "ScannedSkill", "SkillLimits", "read_file", "scan_source"]

logger = logging.getLogger("mcpkit.skills")

# Types a text editor opens that mimetypes does not always know.
_TEXT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".py": "text/x-python",
    ".sh": "text/x-shellscript",
    ".txt": "text/plain",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".csv": "text/csv",
    ".html": "text/html",
    ".js": "text/javascript",
    ".ts": "text/x-typescript",
}


@dataclass(frozen=True, slots=True)
class SkillLimits:
    """The limits a scan enforces (see :class:`mcpkit.server.skills.SkillSettings`)."""

    max_file_bytes: int
    max_skill_bytes: int
    max_files: int
    max_depth: int
    include_hidden: bool
    exclude: tuple[str, ...]

    def skipped(self, name: str) -> bool:
        if not self.include_hidden and name.startswith("."):
            return True
        return bool(self.exclude) and _excluder(self.exclude).match(name) is not None


@functools.lru_cache(maxsize=16)
def _excluder(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # One regex for all the patterns: names are checked for every file on every refresh.
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One file of a skill as last seen: what the manifest says of it."""

    size: int
    #: ``(st_mtime_ns, st_ctime_ns, st_ino)`` when it came from disk: a change is a new stamp.
    stamp: tuple[int, int, int] | None
    digest: str
    mime_type: str
    #: Whether its bytes are UTF-8 text (served as ``text``, else as a base64 ``blob``).
    text: bool


@dataclass(slots=True)
class ScannedSkill:
    """A skill as a scan found it."""

    #: Its ``<skill-path>`` segments: organizational prefix, then its name.
    path: tuple[str, ...]
    frontmatter: dict[str, Any]
    #: ``/``-separated path within the skill -> what the manifest says of it.
    files: dict[str, FileInfo]
    #: Its directory on disk; None for a skill read from a package's resources.
    root: Path | None = None
    #: The bytes of every file, for a skill not on disk (package resources do not change).
    blobs: dict[str, bytes] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return file_uri("/".join(self.path), SKILL_FILE)

    def file_uri(self, rel: str) -> str:
        return file_uri("/".join(self.path), rel)

    def entry(self) -> Skill:
        """Its ``Skill`` entry: verbatim frontmatter and the complete manifest."""
        return Skill(
            uri=self.uri,
            frontmatter=self.frontmatter,
            resources=[
                SkillResource(uri=self.file_uri(rel), digest=info.digest, size=info.size)
                for rel, info in sorted(self.files.items())
            ],
        )


def _describe(rel: str, data: bytes) -> tuple[str, bool]:
    """``(mimeType, is_text)`` of a file from its name and content."""
    if rel == SKILL_FILE or rel.endswith("/" + SKILL_FILE):
        mime: str | None = SKILL_MIME
    else:
        suffix = os.path.splitext(rel)[1].lower()
        mime = _TEXT_TYPES.get(suffix) or mimetypes.guess_type(rel, strict=False)[0]
    try:
        data.decode("utf-8")
        text = b"\x00" not in data
    except UnicodeDecodeError:
        text = False
    if mime is None:
        mime = "text/plain" if text else "application/octet-stream"
    return mime, text


def _info(rel: str, data: bytes, stamp: tuple[int, int, int] | None) -> FileInfo:
    mime, text = _describe(rel, data)
    return FileInfo(len(data), stamp, digest(data), mime, text)


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    # ctime too: unlike mtime, no one can set it back (utime), and it moves on every write.
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _list_files(skill_dir: Path, limits: SkillLimits) -> dict[str, os.stat_result]:
    """Every file of the skill at ``skill_dir`` (relative path -> stat), with what a scan
    skips left out: hidden and excluded names, and symlinks that lead out of the skill."""
    real_root = os.path.realpath(skill_dir)
    found: dict[str, os.stat_result] = {}

    def walk(directory: str, rel: str, depth: int) -> None:
        if depth > limits.max_depth:
            raise SkillError(f"{skill_dir}: directories nest deeper than {limits.max_depth} levels")
        with os.scandir(directory) as entries:
            for item in sorted(entries, key=lambda e: e.name):
                if limits.skipped(item.name):
                    continue
                child = f"{rel}/{item.name}" if rel else item.name
                if item.is_symlink():
                    target = os.path.realpath(item.path)
                    if not _inside(target, real_root):
                        logger.warning("skills: not serving %s: a symlink out of the skill", item.path)
                        continue
                if item.is_dir():
                    walk(item.path, child, depth + 1)
                elif item.is_file():
                    found[child] = item.stat()
                    if len(found) > limits.max_files:
                        raise SkillError(f"{skill_dir}: more than {limits.max_files} files in one skill")

    walk(str(skill_dir), "", 0)
    return found


def _load_skill_md(where: object, data: bytes, name: str) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError(f"{where}: SKILL.md is not UTF-8 text") from None
    try:
        frontmatter = parse_frontmatter(text)
    except SkillFormatError as exc:
        raise SkillFormatError(f"{where}: {exc}") from None
    problems = frontmatter_problems(frontmatter, expected_name=name)
    if problems:
        raise SkillFormatError(f"{where}: " + "; ".join(problems))
    return frontmatter


def _check_totals(where: object, files: dict[str, FileInfo], limits: SkillLimits) -> None:
    total = sum(f.size for f in files.values())
    if total > limits.max_skill_bytes:
        raise SkillError(f"{where}: {total} bytes in all, more than the {limits.max_skill_bytes} allowed")


def scan_dir_skill(
    skill_dir: Path, path: tuple[str, ...], limits: SkillLimits, previous: ScannedSkill | None = None
) -> ScannedSkill:
    """The skill at ``skill_dir``, published at ``path``; digests of files unchanged since
    ``previous`` (same size, mtime and inode) are reused, not recomputed."""
    stats = _list_files(skill_dir, limits)
    if SKILL_FILE not in stats:
        raise SkillFormatError(f"{skill_dir}: no SKILL.md")
    old = previous.files if previous is not None else {}
    files: dict[str, FileInfo] = {}
    frontmatter: dict[str, Any] | None = None
    for rel, st in stats.items():
        if st.st_size > limits.max_file_bytes:
            raise SkillError(
                f"{skill_dir / rel}: {st.st_size} bytes, "
                f"more than the {limits.max_file_bytes} allowed per file"
            )
        known = old.get(rel)
        if known is not None and known.stamp == _stamp(st) and known.size == st.st_size:
            files[rel] = known  # unchanged: neither read nor hashed again
            continue
        data = read_file(skill_dir, rel, limits.max_file_bytes)
        files[rel] = _info(rel, data, _stamp(st))
        if rel == SKILL_FILE:
            frontmatter = _load_skill_md(skill_dir / SKILL_FILE, data, path[-1])
    if frontmatter is None:  # SKILL.md unchanged: its frontmatter too
        assert previous is not None
        frontmatter = previous.frontmatter
    _check_totals(skill_dir, files, limits)
    return ScannedSkill(path, frontmatter, files, root=skill_dir)


def _scan_traversable(node: Traversable, path: tuple[str, ...], limits: SkillLimits) -> ScannedSkill:
    blobs: dict[str, bytes] = {}

    def walk(directory: Traversable, rel: str, depth: int) -> None:
        if depth > limits.max_depth:
            raise SkillError(f"{node}: directories nest deeper than {limits.max_depth} levels")
        for item in sorted(directory.iterdir(), key=lambda e: e.name):
            if limits.skipped(item.name):
                continue
            child = f"{rel}/{item.name}" if rel else item.name
            if item.is_dir():
                walk(item, child, depth + 1)
            elif item.is_file():
                data = item.read_bytes()
                if len(data) > limits.max_file_bytes:
                    raise SkillError(f"{node}/{child}: more than {limits.max_file_bytes} bytes")
                blobs[child] = data
                if len(blobs) > limits.max_files:
                    raise SkillError(f"{node}: more than {limits.max_files} files in one skill")

    walk(node, "", 0)
    if SKILL_FILE not in blobs:
        raise SkillFormatError(f"{node}: no SKILL.md")
    frontmatter = _load_skill_md(f"{node}/{SKILL_FILE}", blobs[SKILL_FILE], path[-1])
    files = {rel: _info(rel, data, None) for rel, data in blobs.items()}
    _check_totals(node, files, limits)
    return ScannedSkill(path, frontmatter, files, blobs=blobs)


def _segment(name: str, where: object) -> str:
    if not name or name in (".", "..") or any(c in name for c in "/\\\x00?#"):
        raise SkillError(f"{where}: {name!r} cannot be a skill path segment")
    return name


def scan_source(
    source: Path | Traversable,
    prefix: tuple[str, ...],
    limits: SkillLimits,
    previous: dict[str, ScannedSkill] | None = None,
    on_error: Callable[[SkillError], None] | None = None,
) -> list[ScannedSkill]:
    """The skills of one source: ``source`` itself when it holds a ``SKILL.md`` (a single
    skill, named by its directory), else every directory below it that holds one, published
    under its path relative to ``source`` (``acme/billing/refunds``). Skills nest: a
    ``SKILL.md`` deeper inside a skill is a skill of its own too (SEP-2640 "Nested Skills").
    A skill that breaks the rules raises :class:`SkillError` naming it (or, with
    ``on_error``, is reported there and left out)."""
    previous = previous or {}
    if not isinstance(source, Path):
        if not source.is_dir():
            raise SkillError(f"{source}: not a directory")
        return _scan_traversable_tree(source, prefix, limits)
    if not source.is_dir():
        raise SkillError(f"{source}: not a directory")
    found: list[ScannedSkill] = []

    def visit(directory: Path, path: tuple[str, ...], depth: int) -> None:
        if (directory / SKILL_FILE).is_file() and not (directory / SKILL_FILE).is_symlink():
            prior = previous.get(file_uri("/".join(path), SKILL_FILE))
            try:
                found.append(scan_dir_skill(directory, path, limits, prior))
            except (SkillError, OSError) as exc:
                if on_error is None:
                    raise
                on_error(exc if isinstance(exc, SkillError) else SkillError(f"{directory}: {exc}"))
        if depth >= limits.max_depth:
            return
        for name in _subdirectories(directory, limits):
            visit(directory / name, (*path, _segment(name, directory / name)), depth + 1)

    if (source / SKILL_FILE).is_file():
        visit(source, (*prefix, _segment(source.resolve().name, source)), 0)
    else:
        for name in _subdirectories(source, limits):
            visit(source / name, (*prefix, _segment(name, source / name)), 1)
    return found


def _subdirectories(directory: Path, limits: SkillLimits) -> list[str]:
    """The names of the directories in ``directory`` a search enters (not through symlinks)."""
    with os.scandir(directory) as entries:
        return sorted(
            e.name for e in entries if e.is_dir(follow_symlinks=False) and not limits.skipped(e.name)
        )


def _scan_traversable_tree(
    source: Traversable, prefix: tuple[str, ...], limits: SkillLimits
) -> list[ScannedSkill]:
    found: list[ScannedSkill] = []

    def visit(directory: Traversable, path: tuple[str, ...], depth: int) -> None:
        if (directory / SKILL_FILE).is_file():
            found.append(_scan_traversable(directory, path, limits))
        if depth >= limits.max_depth:
            return
        for child in sorted(directory.iterdir(), key=lambda p: p.name):
            if child.is_dir() and not limits.skipped(child.name):
                visit(child, (*path, _segment(child.name, child)), depth + 1)

    if (source / SKILL_FILE).is_file():
        visit(source, (*prefix, _segment(source.name, source)), 0)
    else:
        for child in sorted(source.iterdir(), key=lambda p: p.name):
            if child.is_dir() and not limits.skipped(child.name):
                visit(child, (*prefix, _segment(child.name, child)), 1)
    return found


def read_file(skill_dir: Path, rel: str, max_bytes: int) -> bytes:
    """The bytes of ``rel`` (a manifest path) in the skill at ``skill_dir``.

    Refuses (:class:`SkillError`) a path whose real location is outside the skill's
    real directory, a symlink as its last component, anything but a regular file, and
    more than ``max_bytes``."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or os.path.isabs(rel) or "\\" in rel or "\x00" in rel:
        raise SkillError(f"{rel!r} is not a path inside the skill")
    root = os.path.realpath(skill_dir)
    candidate = os.path.join(skill_dir, *parts)
    real = os.path.realpath(candidate)
    if not _inside(real, root) or real == root:
        raise SkillError(f"{rel!r} leads out of the skill")
    fd = _open_beneath(root, os.path.relpath(real, root).split(os.sep))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SkillError(f"{rel!r} is not a regular file")
        if st.st_size > max_bytes:
            raise SkillError(f"{rel!r}: {st.st_size} bytes, more than the {max_bytes} allowed per file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise SkillError(f"{rel!r}: more than the {max_bytes} bytes allowed per file")
    return data


# O_NONBLOCK: a FIFO swapped in for a file must not hang the read (it is then refused as
# not a regular file); it changes nothing for regular files.
_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
)
_DIR_FLAGS = (
    os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)


def _open_beneath(root: str, parts: list[str]) -> int:
    """Open ``root/parts...`` (a path just resolved, so free of symlinks) one component at a
    time, following no symlink: a directory swapped for a symlink between the resolution
    and the open fails here instead of being followed out of the skill."""
    if os.open not in os.supports_dir_fd:  # (Windows) the resolved path, last component unfollowed
        return os.open(os.path.join(root, *parts), _OPEN_FLAGS)
    directory = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(parts[-1], _OPEN_FLAGS, dir_fd=directory)
    finally:
        os.close(directory)

"""Exporting a server's skills (the ``io.modelcontextprotocol/skills`` extension) into a
local skills directory, verified.

:func:`export_skills` writes each skill as ``DIR/<name>/`` with its files at their paths
in the manifest, the layout of the Agent Skills specification (a skill's directory is
named after it). Every file is read with :meth:`~mcpkit.client.skills.Skill.read`, so
its size, digest and (for ``SKILL.md``) frontmatter are checked against the server's
entry first; a skill any file of which fails is refused whole, and nothing of it is
written. What is written is safe by construction:

- the directory name is the skill's name, which must follow the Agent Skills naming
  rules (lowercase letters, digits and single hyphens, at most 64): no ``..``, no ``/``;
- a file's path comes from the manifest and each of its segments must be a plain name
  (no empty, ``.`` or ``..`` segment, no backslash, no NUL): nothing lands outside
  ``DIR/<name>``;
- a skill is written into a fresh temporary directory inside ``DIR`` and renamed into
  place once complete, so a failure leaves no half-written skill, and no existing file,
  symlink or directory is followed or written through; an existing ``DIR/<name>`` is
  replaced only when asked (``replace=True``), and a symlink there never.

Exported skills become ordinary local files, outside the server's control: exporting
is the user's decision to trust them as local skills (ext-skills "Security
Considerations": hosts must not do so on their own).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..client.skills import Skill, SkillError
from ..protocol.errors import MCPError

if TYPE_CHECKING:
    from ..client import Client

__all__ = [
    "ExportReport",
    "ExportedSkill",
    "RefusedSkill",
    "SkillExportError",
    "export_skill",
    "export_skills",
]

#: Agent Skills "name" field: 1-64 lowercase letters, digits and hyphens, no leading,
#: trailing or doubled hyphen.
_NAME = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?\Z")


class SkillExportError(SkillError):
    """A skill that cannot be written where asked (its name, a path, an existing directory)."""


@dataclass(frozen=True, slots=True)
class ExportedSkill:
    """A skill written to disk."""

    name: str
    uri: str
    path: Path
    files: int
    size: int


@dataclass(frozen=True, slots=True)
class RefusedSkill:
    """A skill not written, and why."""

    name: str
    uri: str
    reason: str


@dataclass
class ExportReport:
    """What :func:`export_skills` did."""

    exported: list[ExportedSkill] = field(default_factory=list)
    refused: list[RefusedSkill] = field(default_factory=list)


def _safe_parts(path: str) -> list[str]:
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", "..") or "\\" in part or "\x00" in part or ":" in part:
            raise SkillExportError(f"unsafe file path in the manifest: {path!r}")
    return parts


def _plan(skill: Skill, dest: Path, replace: bool) -> Path:
    """Where ``skill`` goes; refuses what cannot be written safely, before anything is read."""
    if skill.problem is not None:
        raise SkillExportError(f"invalid skill entry: {skill.problem}")
    if skill.dynamic:
        raise SkillExportError('its resources are "dynamic": no digests to verify its files against')
    if not _NAME.match(skill.name):
        raise SkillExportError(f"{skill.name!r} is not a valid skill name for a directory")
    for entry in skill.files.values():
        _safe_parts(entry.path)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / skill.name
    if target.is_symlink():
        raise SkillExportError(f"{target} is a symbolic link: not replaced")
    if target.exists() and not replace:
        raise SkillExportError(f"{target} already exists (replace it with --force / replace=True)")
    if target.exists() and not target.is_dir():
        raise SkillExportError(f"{target} exists and is not a directory")
    return target


async def export_skill(skill: Skill, dest: str | os.PathLike[str], *, replace: bool = False) -> ExportedSkill:
    """Write ``skill``'s files, verified, to ``dest/<name>/``; raises :class:`SkillError`
    (:class:`~mcpkit.client.skills.SkillVerificationError` for content that fails its
    checks, :class:`SkillExportError` for what cannot be written) with nothing written."""
    root = Path(dest)
    target = _plan(skill, root, replace)
    files = await skill.read_all()  # every file verified before anything is written
    await asyncio.to_thread(_write, root, target, skill.name, files)
    return ExportedSkill(skill.name, skill.uri, target, len(files), sum(map(len, files.values())))


def _write(root: Path, target: Path, name: str, files: dict[str, bytes]) -> None:
    """Write ``files`` into a fresh directory, then rename it to ``target``."""
    staging = root / f".{name}.partial-{secrets.token_hex(6)}"
    staging.mkdir(mode=0o755)
    try:
        for path, data in sorted(files.items()):
            parts = _safe_parts(path)
            folder = staging.joinpath(*parts[:-1])
            folder.mkdir(parents=True, exist_ok=True)
            # "xb": a fresh file, never one that exists (nor a symlink's target).
            with open(folder / parts[-1], "xb") as out:
                out.write(data)
        old: Path | None = None
        if target.is_symlink():
            raise SkillExportError(f"{target} is a symbolic link: not replaced")
        if target.exists():
            old = root / f".{name}.old-{secrets.token_hex(6)}"
            os.rename(target, old)
        os.rename(staging, target)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


async def export_skills(
    client: Client,
    dest: str | os.PathLike[str],
    *,
    names: Sequence[str] | None = None,
    replace: bool = False,
) -> ExportReport:
    """Export the server's skills to ``dest`` (every listed skill, or those ``names``: names,
    skill paths or URIs, as :meth:`Client.get_skill` takes them), each verified.

    A skill that fails (tampered content, an invalid entry, an existing directory without
    ``replace``, two listed skills of one name) is refused and reported, and the others
    are still exported.
    """
    report = ExportReport()
    skills: list[Skill] = []
    if names is None:
        skills = await client.list_skills()
    else:
        for name in names:
            try:
                skills.append(await client.get_skill(name))
            except (SkillError, MCPError) as exc:
                # (-32602: the server serves no skill by that name or URI.)
                report.refused.append(RefusedSkill(name, "", str(exc)))
    by_name: dict[str, list[Skill]] = {}
    for skill in skills:
        by_name.setdefault(skill.name, []).append(skill)
    for skill in skills:
        same = by_name[skill.name]
        if len(same) > 1:
            # ext-skills "Names": colliding names are disambiguated, never one silently kept.
            others = ", ".join(s.uri for s in same if s is not skill)
            report.refused.append(
                RefusedSkill(skill.name, skill.uri, f"another skill has the same name ({others})")
            )
            continue
        try:
            report.exported.append(await export_skill(skill, dest, replace=replace))
        except SkillError as exc:
            report.refused.append(RefusedSkill(skill.name, skill.uri, str(exc)))
    return report

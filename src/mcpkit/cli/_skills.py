"""Skills from the command line (the ``io.modelcontextprotocol/skills`` extension):
``mcpkit skills list TARGET`` and ``mcpkit skills get TARGET NAME [--file PATH] [--out DIR]``
(or ``--all --out DIR``).

Everything goes through the client's public API (:meth:`Client.list_skills`,
:meth:`Client.get_skill`, :meth:`Skill.read`) and the host's export
(:func:`mcpkit.host.skills.export_skills`): listing and getting fetch no file; a file is
fetched only by ``--file`` or ``--out``, and shown or written only once verified against
the server's entry (size, digest, frontmatter). A file that fails exits with
:data:`EXIT_PROTOCOL` and nothing of it is printed or written.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from typing import TYPE_CHECKING, Any

from ..transports.loop import run as run_loop
from ._connect import connected, request_error
from ._output import EXIT_OK, EXIT_PROTOCOL, EXIT_USAGE, CLIError, Console, Spinner

if TYPE_CHECKING:
    from ..client import Client
    from ..client.skills import Skill
    from ._target import Target

__all__ = ["cmd_skills_get", "cmd_skills_list"]

_USAGE = {
    "skills list": "mcpkit skills list TARGET",
    "skills get": "mcpkit skills get TARGET NAME [--file PATH | --out DIR]   or   "
    "mcpkit skills get TARGET --all --out DIR",
}


def _words(args: argparse.Namespace, needed: int, names: str) -> tuple[Target, list[str]]:
    from ._use import split_words

    try:
        return split_words(args, needed, names)
    except CLIError as err:
        err.hint = err.hint or _USAGE.get(args.cmd)
        raise


def _skill_error(exc: BaseException, what: str) -> CLIError:
    """A refused skill (verification, an invalid entry, no extension) or a request's failure."""
    from ..client.skills import SkillError, SkillsUnsupported

    if isinstance(exc, SkillsUnsupported):
        return CLIError(
            f"{what}: {exc}",
            EXIT_PROTOCOL,
            hint="the server serves no skills (mcpkit list TARGET shows what it serves)",
        )
    if isinstance(exc, SkillError):
        return CLIError(f"{what}: {exc}", EXIT_PROTOCOL)
    return request_error(exc, what)


async def _attempt(what: str, work: Any) -> Any:
    try:
        return await work
    except (CLIError, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise _skill_error(exc, what) from None


def _entry_json(skill: Skill) -> dict[str, Any]:
    out = dict(skill.entry)
    if skill.problem is not None:
        out["problem"] = skill.problem
    return out


# -- list -------------------------------------------------------------------------------


def cmd_skills_list(args: argparse.Namespace, console: Console) -> int:
    target, words = _words(args, 0, "")
    if words:
        raise CLIError(f"unexpected arguments: {' '.join(words)}", EXIT_USAGE, hint=_USAGE[args.cmd])
    return run_loop(_list(target, args, console))


async def _list(target: Target, args: argparse.Namespace, console: Console) -> int:
    async with (
        connected(target, console, timeout=args.timeout, verbose=args.verbose) as client,
        Spinner(console, "listing skills"),
    ):
        skills = await _attempt("skills list", client.list_skills())
    if console.json_mode:
        console.emit_json({"skills": [_entry_json(s) for s in skills]})
        return EXIT_OK
    if not skills:
        console.info("no skills listed (a server may serve skills it does not list: skills get TARGET URI)")
        return EXIT_OK
    rows = [[s.name or "?", s.uri, _files(s), _one_line(s.problem or s.description)] for s in skills]
    console.table(rows, styles=[("cyan",), ("dim",), ("yellow",), ()])
    return EXIT_OK


def _files(skill: Skill) -> str:
    if skill.problem is not None:
        return "invalid"
    if skill.dynamic:
        return "dynamic"
    count = len(skill.files)
    return f"{count} file{'s' if count != 1 else ''}, {_size(skill.total_size)}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# -- get --------------------------------------------------------------------------------


def cmd_skills_get(args: argparse.Namespace, console: Console) -> int:
    if args.all:
        target, words = _words(args, 0, "")
        if words:
            raise CLIError("--all exports every skill: give no NAME", EXIT_USAGE, hint=_USAGE[args.cmd])
        if not args.out or args.file:
            raise CLIError("--all needs --out DIR (and no --file)", EXIT_USAGE, hint=_USAGE[args.cmd])
        return run_loop(_export(target, None, args, console))
    target, words = _words(args, 1, "NAME")
    if len(words) > 1:
        raise CLIError(f"unexpected arguments: {' '.join(words[1:])}", EXIT_USAGE, hint=_USAGE[args.cmd])
    if args.file and args.out:
        raise CLIError("give --file or --out, not both", EXIT_USAGE, hint=_USAGE[args.cmd])
    if args.out:
        return run_loop(_export(target, words[0], args, console))
    return run_loop(_get(target, words[0], args, console))


async def _get(target: Target, name: str, args: argparse.Namespace, console: Console) -> int:
    async with connected(target, console, timeout=args.timeout, verbose=args.verbose) as client:
        async with Spinner(console, f"getting skill {name}"):
            skill: Skill = await _attempt(f"skills get {name}", client.get_skill(name))
        if args.file:
            async with Spinner(console, f"reading {args.file}"):
                return await _show_file(client, skill, args.file, console)
    if console.json_mode:
        console.emit_json(_entry_json(skill))
        return EXIT_OK
    _show_entry(console, skill)
    if skill.problem is not None:
        raise CLIError(f"skill {skill.uri}: invalid entry: {skill.problem}", EXIT_PROTOCOL)
    return EXIT_OK


def _show_entry(console: Console, skill: Skill) -> None:
    import json

    rows = [["name", skill.name], ["uri", skill.uri], ["description", _one_line(skill.description)]]
    for key, value in skill.frontmatter.items():
        if key not in ("name", "description"):
            rows.append([key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)])
    console.table(rows, styles=[("dim",), ()], indent=0)
    if skill.dynamic:
        console.print('files: "dynamic" (generated content, no digests: it cannot be verified)')
        return
    console.print()
    console.table(
        [[f.path, str(f.size), f.digest] for f in skill.files.values()],
        styles=[("cyan",), ("yellow",), ("dim",)],
        indent=0,
    )


async def _show_file(client: Client, skill: Skill, path: str, console: Console) -> int:
    data: bytes = await _attempt(f"skills get {skill.name} --file {path}", skill.read(path))
    entry = skill.files.get(skill.resolve(path))
    if console.json_mode:
        out: dict[str, Any] = {"uri": skill.resolve(path), "verified": entry is not None}
        if entry is not None:
            out.update(path=entry.path, size=entry.size, digest=entry.digest)
        try:
            out["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            out["blob"] = base64.b64encode(data).decode("ascii")
        console.emit_json(out)
        return EXIT_OK
    if console.tty and b"\x00" in data:
        raise CLIError(
            f"{path} is binary ({len(data)} bytes, verified): not printed on a terminal",
            EXIT_USAGE,
            hint="redirect stdout to a file, use --json (base64), or --out DIR",
        )
    console.out.flush()
    stream = getattr(console.out, "buffer", None)
    if stream is None or console.out is not sys.stdout:
        console.out.write(data.decode("utf-8", errors="replace"))
    else:
        stream.write(data)
        stream.flush()
    return EXIT_OK


async def _export(target: Target, name: str | None, args: argparse.Namespace, console: Console) -> int:
    from ..host.skills import export_skills

    async with (
        connected(target, console, timeout=args.timeout, verbose=args.verbose) as client,
        Spinner(console, f"exporting {'every skill' if name is None else name} to {args.out}"),
    ):
        report = await _attempt(
            "skills get",
            export_skills(client, args.out, names=None if name is None else [name], replace=args.force),
        )
    if console.json_mode:
        console.emit_json(
            {
                "exported": [
                    {"name": e.name, "uri": e.uri, "path": str(e.path), "files": e.files, "size": e.size}
                    for e in report.exported
                ],
                "refused": [{"name": r.name, "uri": r.uri, "reason": r.reason} for r in report.refused],
            }
        )
    else:
        for e in report.exported:
            console.print(f"{e.path}\t{e.files} files, {_size(e.size)}\t{e.uri}")
        for r in report.refused:
            console.warn(f"skill {r.uri or r.name} not exported: {r.reason}")
        if not report.exported and not report.refused:
            console.info("no skills listed: nothing exported")
    if report.refused:
        err = CLIError(f"{len(report.refused)} skill(s) not exported", EXIT_PROTOCOL)
        err.result_written = console.json_mode
        raise err
    return EXIT_OK

"""The tools, with the names and arguments of ``@modelcontextprotocol/server-filesystem``.

Text tools answer a text block and, as the community server does, the same text as
``structuredContent: {"content": ...}``. Every tool runs its filesystem work in a worker
thread (:class:`~._sandbox.Sandbox` methods block) after :class:`~._access.Access` has
said which directories the call may use.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from ...protocol import _binary as binary
from ...protocol import types as t
from ...server import Context, MCPServer
from ._access import Access
from ._edit import EditOperation, apply_edits, fenced_diff, unified_diff
from ._glob import compile_glob, exclusion
from ._sandbox import Entry, FsError, LimitReached, Sandbox

__all__ = ["READ_TOOLS", "WRITE_TOOLS", "register_tools"]

#: The tools every server lists, and those only a server without ``--read-only`` lists.
READ_TOOLS = (
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
)
WRITE_TOOLS = ("write_file", "edit_file", "create_directory", "move_file")

# The community server's annotations (its README's table); openWorldHint false throughout:
# only the local filesystem, inside the allowed directories, is reached.
_READ = t.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_CREATE = t.ToolAnnotations(
    read_only_hint=False, idempotent_hint=True, destructive_hint=False, open_world_hint=False
)
_OVERWRITE = t.ToolAnnotations(
    read_only_hint=False, idempotent_hint=True, destructive_hint=True, open_world_hint=False
)
_CHANGE = t.ToolAnnotations(
    read_only_hint=False, idempotent_hint=False, destructive_hint=True, open_world_hint=False
)

#: Types an extension names reliably (the system's table, which mimetypes reads, varies).
_MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".avif": "image/avif",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".opus": "audio/opus",
    ".flac": "audio/flac",
    ".m4a": "audio/mp4",
    ".aac": "audio/aac",
    ".weba": "audio/webm",
    ".pdf": "application/pdf",
    ".zip": "application/zip",
    ".json": "application/json",
}

PathArg = Annotated[
    str,
    msgspec.Meta(description="A path inside an allowed directory (absolute, or relative to the first one)"),
]
Patterns = Annotated[
    list[str],
    msgspec.Meta(description="Glob patterns of paths (relative to the starting directory) to leave out"),
]
T = TypeVar("T")


def register_tools(server: MCPServer, access: Access) -> None:
    """Register the filesystem tools on ``server`` (the write tools unless read-only)."""

    async def run(ctx: Context, work: Callable[[Sandbox], T]) -> T:
        # Roots first (in the modern era this may end the call with input_required), then
        # the blocking filesystem work off the event loop.
        box = await access.sandbox(ctx)
        try:
            return await asyncio.to_thread(work, box)
        except FsError:
            raise
        except (OSError, UnicodeError, ValueError) as exc:
            raise FsError(str(exc)) from None

    async def read_text(ctx: Context, path: str, tail: int | None, head: int | None) -> t.CallToolResult:
        # 0 counts as "not given", as in the community server (it tests them for truth).
        if (head or 0) < 0 or (tail or 0) < 0:
            raise FsError("head and tail must not be negative")
        if head and tail:
            raise FsError("Give head or tail, not both")

        def work(box: Sandbox) -> str:
            r = box.resolve(path)
            if tail:
                data = box.read_tail(r, tail)
            elif head:
                data = box.read_head(r, head)
            else:
                data = box.read_bytes(r)
            return _decode(data, strip_final_newline=bool(head or tail))

        return _text(await run(ctx, work))

    @server.tool(title="Read File (deprecated)", annotations=_READ)
    async def read_file(
        path: PathArg,
        ctx: Context,
        tail: Annotated[int | None, "Only the last N lines"] = None,
        head: Annotated[int | None, "Only the first N lines"] = None,
    ) -> t.CallToolResult:
        """Read a file as text. Deprecated: the same as read_text_file, kept for prompts
        written for older versions of the community filesystem server."""
        return await read_text(ctx, path, tail, head)

    @server.tool(title="Read Text File", annotations=_READ)
    async def read_text_file(
        path: PathArg,
        ctx: Context,
        tail: Annotated[int | None, "Only the last N lines"] = None,
        head: Annotated[int | None, "Only the first N lines"] = None,
    ) -> t.CallToolResult:
        """Read a file as UTF-8 text, whatever its extension. Pass head to get only its first
        N lines, or tail for its last N (not both). Larger files than the server's read
        limit must be read with head or tail. Only inside the allowed directories."""
        return await read_text(ctx, path, tail, head)

    @server.tool(title="Read Media File", annotations=_READ)
    async def read_media_file(path: PathArg, ctx: Context) -> t.CallToolResult:
        """Read an image or audio file and return it as an image or audio content block with
        its MIME type; any other file comes back as an embedded binary resource (base64).
        Only inside the allowed directories."""

        def work(box: Sandbox) -> t.ContentBlock:
            r = box.resolve(path)
            # Kept as bytes: base64 is written straight into the answer (no text copy, issue 18).
            data = box.read_bytes(r)
            mime = _media_type(r.real)
            if mime.startswith("image/"):
                return binary.image(data, mime)
            if mime.startswith("audio/"):
                return binary.audio(data, mime)
            uri = PurePosixPath(r.real).as_uri()
            return t.EmbeddedResource(resource=binary.blob(uri, data, mime))

        return t.CallToolResult(content=[await run(ctx, work)])

    @server.tool(title="Read Multiple Files", annotations=_READ)
    async def read_multiple_files(
        paths: Annotated[
            list[str],
            msgspec.Meta(min_length=1, description="The files to read, each inside an allowed directory"),
        ],
        ctx: Context,
    ) -> t.CallToolResult:
        """Read several files at once, each as text headed by its path. A file that cannot
        be read gets an error line and the others are still read. All of them together
        may not pass the server's read limit. Only inside the allowed directories."""

        def work(box: Sandbox) -> str:
            budget = box.max_read_bytes
            parts: list[str] = []
            for path in paths:
                try:
                    r = box.resolve(path)
                    data = box.read_bytes(r, limit=budget)
                except FsError as exc:
                    if budget < box.max_read_bytes and "--max-read-bytes" in str(exc):
                        exc = FsError(
                            f"not read: the files before it used up this call's limit of "
                            f"{box.max_read_bytes} bytes (--max-read-bytes)"
                        )
                    parts.append(f"{path}: Error - {exc}")
                    continue
                budget -= len(data)
                parts.append(f"{path}:\n{_decode(data)}\n")
            return "\n---\n".join(parts)

        return _text(await run(ctx, work))

    @server.tool(title="List Directory", annotations=_READ)
    async def list_directory(path: PathArg, ctx: Context) -> t.CallToolResult:
        """List a directory: one entry per line, marked [DIR] or [FILE] (a symbolic link is
        listed as a file). Only inside the allowed directories."""

        def work(box: Sandbox) -> str:
            entries = box.listdir(box.resolve(path))
            return "\n".join(f"{_mark(e)} {e.name}" for e in entries)

        return _text(await run(ctx, work))

    @server.tool(title="List Directory with Sizes", annotations=_READ)
    async def list_directory_with_sizes(
        path: PathArg,
        ctx: Context,
        sortBy: Annotated[
            Literal["name", "size"], "Sort entries by name or by size (largest first)"
        ] = "name",
    ) -> t.CallToolResult:
        """List a directory with the size of each file, marked [DIR] or [FILE], followed by
        the number of files and directories and their combined size. Only inside the
        allowed directories."""

        def work(box: Sandbox) -> str:
            entries = box.listdir(box.resolve(path))
            if sortBy == "size":
                entries.sort(key=lambda e: -_size(e))
            lines = [
                f"{_mark(e)} {e.name.ljust(30)} "
                + ("" if e.kind == "directory" else _format_size(e.size).rjust(10))
                for e in entries
            ]
            files = [e for e in entries if e.kind != "directory"]
            lines += [
                "",
                f"Total: {len(files)} files, {len(entries) - len(files)} directories",
                f"Combined size: {_format_size(sum(e.size for e in files))}",
            ]
            return "\n".join(lines)

        return _text(await run(ctx, work))

    @server.tool(title="Directory Tree", annotations=_READ)
    async def directory_tree(
        path: PathArg, ctx: Context, excludePatterns: Patterns | None = None
    ) -> t.CallToolResult:
        """A recursive tree of a directory as JSON (2-space indented): each entry has a name
        and a type ("file" or "directory"); directories also have children (possibly
        empty). Symbolic links are listed as files and not entered. excludePatterns leaves
        out matching paths: a pattern without "*" leaves out that name at any depth. Only
        inside the allowed directories."""
        skip = exclusion(excludePatterns or [], bare_names=True)

        def work(box: Sandbox) -> str:
            r = box.resolve(path)
            top: list[dict[str, Any]] = []
            children: dict[str, list[dict[str, Any]]] = {"": top}
            try:
                for rel, is_dir in box.walk(r, lambda rel, is_dir: skip(rel)):
                    parent, _, name = rel.rpartition("/")
                    node: dict[str, Any] = {"name": name, "type": "directory" if is_dir else "file"}
                    if is_dir:
                        node["children"] = children[rel] = []
                    children[parent].append(node)
            except LimitReached as exc:
                raise FsError(
                    f"The tree of {path} is too large: {exc}; use a deeper path or excludePatterns"
                ) from None
            return json.dumps(top, indent=2, ensure_ascii=False)

        return _text(await run(ctx, work))

    @server.tool(title="Search Files", annotations=_READ)
    async def search_files(
        path: PathArg,
        pattern: Annotated[
            str,
            "A glob matched against paths relative to path: '*.py' in path itself, '**/*.py' at any depth",
        ],
        ctx: Context,
        excludePatterns: Patterns | None = None,
    ) -> t.CallToolResult:
        """Find files and directories below a directory whose path (relative to it) matches
        a glob pattern; returns their full paths, one per line. Excluded paths are not
        entered. Symbolic links are not followed. Only inside the allowed directories."""
        matches = compile_glob(pattern)
        skip = exclusion(excludePatterns or [], bare_names=False)

        def work(box: Sandbox) -> str:
            r = box.resolve(path)
            found: list[str] = []
            note = ""
            try:
                for rel, _ in box.walk(r, lambda rel, is_dir: skip(rel)):
                    if matches(rel):
                        found.append(os.path.join(r.real, rel))
            except LimitReached as exc:
                note = f"\n(search stopped: {exc}; narrow the path or add excludePatterns)"
            return ("\n".join(found) if found else "No matches found") + note

        return _text(await run(ctx, work))

    @server.tool(title="Get File Info", annotations=_READ)
    async def get_file_info(path: PathArg, ctx: Context) -> t.CallToolResult:
        """Metadata of a file or directory, one "key: value" per line: size, times
        (ISO 8601, UTC), type, permissions and number of hard links. Only inside the
        allowed directories."""

        def work(box: Sandbox) -> str:
            st = box.status(box.resolve(path))
            info: dict[str, object] = {"size": st.st_size}
            birth = getattr(st, "st_birthtime", None)
            if birth is not None:
                info["created"] = _time(birth)
            info.update(
                modified=_time(st.st_mtime),
                accessed=_time(st.st_atime),
                changed=_time(st.st_ctime),
                isDirectory=str(stat.S_ISDIR(st.st_mode)).lower(),
                isFile=str(stat.S_ISREG(st.st_mode)).lower(),
                isSymbolicLink=str(stat.S_ISLNK(st.st_mode)).lower(),
                permissions=f"{stat.S_IMODE(st.st_mode):03o}",
                links=st.st_nlink,
            )
            return "\n".join(f"{key}: {value}" for key, value in info.items())

        return _text(await run(ctx, work))

    @server.tool(title="List Allowed Directories", annotations=_READ)
    async def list_allowed_directories(ctx: Context) -> t.CallToolResult:
        """The directories this server may use for this client (their subdirectories too).
        Call it first to learn where paths may point."""
        box = await access.sandbox(ctx)
        return _text("Allowed directories:\n" + "\n".join(d.path for d in box.dirs))

    if access.settings.read_only:
        return

    @server.tool(title="Write File", annotations=_OVERWRITE)
    async def write_file(
        path: PathArg, content: Annotated[str, "The whole new content (UTF-8 text)"], ctx: Context
    ) -> t.CallToolResult:
        """Create a file, or replace an existing one entirely, with the given text (UTF-8).
        Overwrites without asking. The parent directory must exist. Only inside the allowed
        directories."""
        data = content.encode("utf-8")  # a lone surrogate is refused, not written as invalid UTF-8

        def work(box: Sandbox) -> str:
            box.write_bytes(box.resolve(path), data)
            return f"Successfully wrote to {path}"

        return _text(await run(ctx, work))

    @server.tool(title="Edit File", annotations=_CHANGE)
    async def edit_file(
        path: PathArg,
        edits: Annotated[list[EditOperation], "Replacements, applied in order"],
        ctx: Context,
        dryRun: Annotated[bool, "Only show the diff; change nothing"] = False,
    ) -> t.CallToolResult:
        """Edit a UTF-8 text file: each edit replaces the first occurrence of oldText with
        newText (lines are also matched ignoring their indentation). Returns a git-style
        diff of the change; with dryRun the file is left as it is. Only inside the allowed
        directories."""

        def work(box: Sandbox) -> str:
            r = box.resolve(path)
            shown: list[str] = []

            def change(data: bytes) -> bytes | None:
                try:
                    before = data.decode("utf-8")
                except UnicodeDecodeError:
                    raise FsError(f"{path} is not UTF-8 text; edit_file edits text only") from None
                crlf = "\r\n" in before and "\n" not in before.replace("\r\n", "")
                before = before.replace("\r\n", "\n")
                after = apply_edits(before, edits)
                shown.append(fenced_diff(unified_diff(before, after, r.real)))
                if dryRun:
                    return None
                return (after.replace("\n", "\r\n") if crlf else after).encode("utf-8")

            box.update(r, change)
            return shown[0]

        return _text(await run(ctx, work))

    @server.tool(title="Create Directory", annotations=_CREATE)
    async def create_directory(path: PathArg, ctx: Context) -> t.CallToolResult:
        """Create a directory, and any missing parent directories; nothing happens if it
        already exists. Only inside the allowed directories."""

        def work(box: Sandbox) -> str:
            box.make_directory(box.resolve(path))
            return f"Successfully created directory {path}"

        return _text(await run(ctx, work))

    @server.tool(title="Move File", annotations=_CHANGE)
    async def move_file(
        source: Annotated[str, "The file or directory to move"],
        destination: Annotated[str, "Its new path (must not exist yet)"],
        ctx: Context,
    ) -> t.CallToolResult:
        """Move or rename a file or directory. Fails when the destination exists. Both paths
        must be inside the allowed directories."""

        def work(box: Sandbox) -> str:
            box.move(box.resolve(source), box.resolve(destination))
            return f"Successfully moved {source} to {destination}"

        return _text(await run(ctx, work))


# -- formatting ------------------------------------------------------------------


def _text(text: str) -> t.CallToolResult:
    return t.CallToolResult(content=[t.TextContent(text=text)], structured_content={"content": text})


def _decode(data: bytes, *, strip_final_newline: bool = False) -> str:
    text = data.decode("utf-8", "replace")
    if strip_final_newline and text.endswith("\n"):
        text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
    return text


def _media_type(path: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    known = _MEDIA_TYPES.get(suffix)
    if known is not None:
        return known
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def _mark(entry: Entry) -> str:
    return "[DIR]" if entry.kind == "directory" else "[FILE]"


def _size(entry: Entry) -> int:
    return 0 if entry.kind == "directory" else entry.size


def _format_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1024
        if value < 1024 or unit == "TB":
            break
    return f"{value:.2f} {unit}"


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()

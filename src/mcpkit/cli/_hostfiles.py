"""Host config files: where each host keeps its server list, and editing one safely.

Default locations (``*`` marks a host's default scope):

- claude-desktop, user*: ``claude_desktop_config.json`` in ``~/Library/Application Support/Claude/``
  (macOS), ``%APPDATA%\\Claude\\`` (Windows), ``$XDG_CONFIG_HOME/Claude/`` or ``~/.config/Claude/``
  (Linux); ``mcpServers``, stdio entries only.
- claude-code, project*: ``./.mcp.json``; user: ``~/.claude.json`` (top-level ``mcpServers``);
  entries carry ``"type"``.
- cursor, user*: ``~/.cursor/mcp.json``; project: ``./.cursor/mcp.json``; ``mcpServers``.
- vscode, project*: ``./.vscode/mcp.json``; user: ``Code/User/mcp.json`` in the same per-OS
  folder as Claude Desktop's; ``servers`` with ``"type"``.

Editing changes only the text of the entry concerned: every other key, entry,
comment and their order and formatting stay as they were. The original is copied
to ``<file>.<timestamp>.bak`` first, and the new text replaces the file
atomically (through a symlink, to its target).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ._output import EXIT_ERROR, EXIT_USAGE, CLIError

__all__ = ["HOSTS", "ConfigDocument", "HostKind", "known_config_files"]


@dataclass(frozen=True)
class HostKind:
    key: str
    title: str
    list_key: str  # "mcpServers" or "servers"
    scopes: tuple[str, ...]  # the first is the default
    #: Write ``"type": "stdio"`` on command entries.
    typed_stdio: bool
    #: The file may hold http/sse servers.
    remote: bool

    @property
    def default_scope(self) -> str:
        return self.scopes[0]

    def path(
        self,
        scope: str | None = None,
        *,
        cwd: Path | None = None,
        home: Path | None = None,
        platform: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Path:
        """The default config file for ``scope`` on this machine."""
        scope = scope or self.default_scope
        if scope not in self.scopes:
            raise CLIError(
                f"{self.title} has no {scope} scope (scopes: {', '.join(self.scopes)})", EXIT_USAGE
            )
        cwd = cwd or Path.cwd()
        home = home or Path.home()
        platform = platform or sys.platform
        env = os.environ if environ is None else environ
        if self.key == "claude-desktop":
            return app_data(home, platform, env) / "Claude" / "claude_desktop_config.json"
        if self.key == "claude-code":
            return cwd / ".mcp.json" if scope == "project" else home / ".claude.json"
        if self.key == "cursor":
            return (cwd if scope == "project" else home) / ".cursor" / "mcp.json"
        if scope == "project":
            return cwd / ".vscode" / "mcp.json"
        return app_data(home, platform, env) / "Code" / "User" / "mcp.json"

    def entry(
        self,
        *,
        command: str | None = None,
        args: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A server entry in this host's own shape."""
        if url is not None:
            if not self.remote:
                raise CLIError(
                    f"{self.title}'s config file takes stdio servers only",
                    EXIT_USAGE,
                    hint="add remote servers in Claude Desktop under Settings → Connectors",
                )
            entry: dict[str, Any] = {"type": "http"} if self.list_key == "servers" or self.typed_stdio else {}
            entry["url"] = url
            if headers:
                entry["headers"] = dict(headers)
            return entry
        entry = {"type": "stdio"} if self.typed_stdio else {}
        entry["command"] = command
        entry["args"] = list(args or [])
        if env:
            entry["env"] = dict(env)
        return entry


HOSTS: dict[str, HostKind] = {
    h.key: h
    for h in (
        HostKind("claude-desktop", "Claude Desktop", "mcpServers", ("user",), False, False),
        HostKind("claude-code", "Claude Code", "mcpServers", ("project", "user"), True, True),
        HostKind("cursor", "Cursor", "mcpServers", ("user", "project"), False, True),
        HostKind("vscode", "VS Code", "servers", ("project", "user"), True, True),
    )
}


def app_data(home: Path, platform: str, environ: Mapping[str, str]) -> Path:
    """The per-user application data folder (where Claude Desktop and VS Code keep settings)."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        appdata = environ.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    xdg = environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def known_config_files(
    *, cwd: Path | None = None, home: Path | None = None, platform: str | None = None
) -> list[tuple[str, Path]]:
    """(label, path) of every known host config location, project files first."""
    found: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for scope in ("project", "user"):
        for host in HOSTS.values():
            if scope not in host.scopes:
                continue
            path = host.path(scope, cwd=cwd, home=home, platform=platform)
            if path in seen:
                continue
            seen.add(path)
            found.append((f"{host.title} ({scope})", path))
    return found


# -- editing -------------------------------------------------------------------------

_INDENT = re.compile(r"^[{\[][ \t]*\r?\n(?:[ \t]*(?://[^\n]*)?\r?\n)*([ \t]+)\S", re.MULTILINE)


@dataclass
class ConfigDocument:
    """A host config file loaded for editing.

    Changes are made twice: to :attr:`data`, and as a minimal splice of the
    original text (so formatting, comments and untouched entries stay exactly
    as they were). The splice is checked by parsing it back; if it does not
    give :attr:`data`, the file is rewritten from :attr:`data` instead.
    """

    path: Path
    data: dict[str, Any]
    existed: bool
    had_comments: bool
    indent: str | int
    text: str | None = None
    bom: bool = False

    @classmethod
    def load(cls, path: Path) -> ConfigDocument:
        from ..host.config import strip_jsonc

        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, {}, existed=False, had_comments=False, indent=2)
        except OSError as exc:
            raise CLIError(f"cannot read {path}: {exc.strerror or exc}", EXIT_ERROR) from None
        try:
            # Bytes decoded as they are: line endings (CRLF) and a BOM are kept.
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise CLIError(f"{path} is not UTF-8 ({exc}); not touching it", EXIT_ERROR) from None
        bom = raw.startswith(codecs.BOM_UTF8)
        if not text.strip():
            return cls(path, {}, existed=True, had_comments=False, indent=2)
        plain = strip_jsonc(text)
        try:
            data = json.loads(plain)
        except ValueError as exc:
            raise CLIError(
                f"{path} is not valid JSON ({exc}); not touching it", EXIT_ERROR, hint="fix or move the file"
            ) from None
        if not isinstance(data, dict):
            raise CLIError(f"{path}: expected a JSON object at the top, not touching it", EXIT_ERROR)
        match = _INDENT.search(text)
        indent: str | int = 2
        if match:
            found = match.group(1)
            indent = found if "\t" in found else len(found)
        return cls(path, data, existed=True, had_comments=plain != text, indent=indent, text=text, bom=bom)

    def _list_path(self, host: HostKind) -> list[str]:
        key = host.list_key
        if key == "servers" and "servers" not in self.data and isinstance(self.data.get("mcp"), dict):
            return ["mcp", "servers"]  # a VS Code settings.json: {"mcp": {"servers": {...}}}
        return [key]

    def servers(self, host: HostKind) -> dict[str, Any] | None:
        """The server list object (None when the file has none)."""
        node: Any = self.data
        for key in self._list_path(host):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict):
            raise CLIError(f"{self.path}: {host.list_key!r} is not an object; not touching it", EXIT_ERROR)
        return node

    def set_server(self, host: HostKind, name: str, entry: dict[str, Any]) -> None:
        path = self._list_path(host)
        servers = self.servers(host)
        if servers is None:
            parent: dict[str, Any] = self.data
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = {name: entry}
            self._splice(lambda ed: ed.add_member(path[:-1], path[-1], {name: entry}))
        elif name in servers:
            servers[name] = entry
            self._splice(lambda ed: ed.replace_value([*path, name], entry))
        else:
            servers[name] = entry
            self._splice(lambda ed: ed.add_member(path, name, entry))

    def remove_server(self, host: HostKind, name: str) -> Any:
        path = self._list_path(host)
        servers = self.servers(host)
        assert servers is not None and name in servers
        removed = servers.pop(name)
        self._splice(lambda ed: ed.remove_member(path, name))
        return removed

    def _splice(self, edit: Any) -> None:
        if self.text is None:
            return
        try:
            editor = _TextEditor(self.text, self.indent)
            edit(editor)
            new_text = editor.text
            from ..host.config import strip_jsonc

            if json.loads(strip_jsonc(new_text)) != self.data:
                raise ValueError("the splice does not give the intended document")
        except (ValueError, KeyError, IndexError):
            self.text = None  # render from the data instead
            return
        self.text = new_text

    @property
    def comments_lost(self) -> bool:
        return self.had_comments and self.text is None

    def render(self) -> str:
        if self.text is not None:
            return self.text
        return json.dumps(self.data, indent=self.indent, ensure_ascii=False) + "\n"

    def save(self) -> Path | None:
        """Back the original up, then replace the file atomically; returns the backup."""
        target = Path(os.path.realpath(self.path))
        backup: Path | None = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            mode: int | None = None
            if self.existed and target.exists():
                backup = _backup_name(target)
                shutil.copy2(target, backup)
                mode = stat.S_IMODE(target.stat().st_mode)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write((codecs.BOM_UTF8 if self.bom else b"") + self.render().encode("utf-8"))
                    handle.flush()
                    os.fsync(handle.fileno())
                os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise CLIError(f"cannot write {target}: {exc.strerror or exc}", EXIT_ERROR) from None
        return backup


def _backup_name(path: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{stamp}-{n}.bak")
        n += 1
    return candidate


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- minimal text edits of JSON (with comments) ---------------------------------------


@dataclass
class _Member:
    key: str
    key_start: int
    value_start: int
    value_end: int


class _TextEditor:
    """Splices members into, out of and over objects of a JSON(C) text in place."""

    def __init__(self, text: str, indent: str | int) -> None:
        self.text = text
        self.unit = indent if isinstance(indent, str) else " " * indent
        self.newline = "\r\n" if "\r\n" in text else "\n"

    # scanning

    def _skip(self, i: int) -> int:
        """Past whitespace and comments."""
        text = self.text
        while i < len(text):
            if text[i] in " \t\r\n":
                i += 1
            elif text.startswith("//", i):
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            elif text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise ValueError("unterminated comment")
                i = end + 2
            else:
                break
        return i

    def _string_end(self, i: int) -> int:
        text = self.text
        if text[i] != '"':
            raise ValueError("expected a string")
        i += 1
        while i < len(text):
            if text[i] == "\\":
                i += 2
            elif text[i] == '"':
                return i + 1
            else:
                i += 1
        raise ValueError("unterminated string")

    def _value_end(self, i: int) -> int:
        text = self.text
        ch = text[i]
        if ch == '"':
            return self._string_end(i)
        if ch in "{[":
            close = "}" if ch == "{" else "]"
            i = self._skip(i + 1)
            if text[i] == close:
                return i + 1
            while True:
                if ch == "{":
                    i = self._skip(self._string_end(i))
                    if text[i] != ":":
                        raise ValueError("expected ':'")
                    i = self._skip(i + 1)
                i = self._skip(self._value_end(i))
                if text[i] == ",":
                    i = self._skip(i + 1)
                    if text[i] == close:
                        return i + 1
                elif text[i] == close:
                    return i + 1
                else:
                    raise ValueError("expected ',' or a closing bracket")
        j = i
        while j < len(text) and text[j] not in ",]} \t\r\n/":
            j += 1
        if j == i:
            raise ValueError("expected a value")
        return j

    def _members(self, start: int) -> tuple[list[_Member], int]:
        """The members of the object opening at ``start``, and its closing brace's index."""
        text = self.text
        if text[start] != "{":
            raise ValueError("expected an object")
        members: list[_Member] = []
        i = self._skip(start + 1)
        while text[i] != "}":
            key_end = self._string_end(i)
            key = json.loads(text[i:key_end])
            colon = self._skip(key_end)
            if text[colon] != ":":
                raise ValueError("expected ':'")
            value_start = self._skip(colon + 1)
            value_end = self._value_end(value_start)
            members.append(_Member(key, i, value_start, value_end))
            i = self._skip(value_end)
            if text[i] == ",":
                i = self._skip(i + 1)
            elif text[i] != "}":
                raise ValueError("expected ',' or '}'")
        return members, i

    def _object(self, path: list[str]) -> tuple[int, list[_Member], int]:
        """(opening brace, members, closing brace) of the object at ``path``."""
        start = self._skip(0)
        for key in path:
            members, _ = self._members(start)
            found = [m for m in members if m.key == key]
            if len(found) != 1:
                raise KeyError(key)
            start = found[0].value_start
        members, close = self._members(start)
        return start, members, close

    def _line_indent(self, i: int) -> str:
        line_start = self.text.rfind("\n", 0, i) + 1
        prefix = self.text[line_start:i]
        return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]

    def _render(self, value: Any, indent: str) -> str:
        text = json.dumps(value, indent=self.unit, ensure_ascii=False)
        return text.replace("\n", self.newline + indent)

    def _inline(self, value: Any, around: str) -> str:
        """``value`` on one line, spaced like ``around`` (the one-line text it goes into)."""
        spaced = '": ' in around or ", " in around
        separators = (", ", ": ") if spaced else (",", ":")
        return json.dumps(value, separators=separators, ensure_ascii=False)

    # edits

    def add_member(self, path: list[str], key: str, value: Any) -> None:
        start, members, close = self._object(path)
        name = json.dumps(key, ensure_ascii=False)
        if members:
            at = members[-1].value_end
            body = self.text[start : close + 1]
            if "\n" not in body:  # a one-line object stays on one line
                colon = ": " if '": ' in body else ":"
                comma = ", " if ", " in body or colon == ": " else ","
                insert = f"{comma}{name}{colon}{self._inline(value, body)}"
            else:
                indent = self._line_indent(members[0].key_start)
                insert = f",{self.newline}{indent}{name}: {self._render(value, indent)}"
            self.text = self.text[:at] + insert + self.text[at:]
            return
        outer = self._line_indent(start)
        indent = outer + self.unit
        member = f"{name}: {self._render(value, indent)}"
        inner = self.text[start + 1 : close]
        if inner.strip():
            insert = f"{self.newline}{indent}{member}"  # keep the comments that were there
            self.text = self.text[: start + 1] + insert + self.text[start + 1 :]
        else:
            body = f"{self.newline}{indent}{member}{self.newline}{outer}"
            self.text = self.text[: start + 1] + body + self.text[close:]

    def replace_value(self, path: list[str], value: Any) -> None:
        _, members, _ = self._object(path[:-1])
        found = [m for m in members if m.key == path[-1]]
        if len(found) != 1:
            raise KeyError(path[-1])
        member = found[0]
        old = self.text[member.value_start : member.value_end]
        if "\n" in old:
            rendered = self._render(value, self._line_indent(member.key_start))
        else:
            rendered = self._inline(value, old)
        self.text = self.text[: member.value_start] + rendered + self.text[member.value_end :]

    def remove_member(self, path: list[str], key: str) -> None:
        start, members, close = self._object(path)
        index = [i for i, m in enumerate(members) if m.key == key]
        if len(index) != 1:
            raise KeyError(key)
        k = index[0]
        member = members[k]
        text = self.text
        if len(members) == 1:
            # The only member: the object becomes {} (comments inside go with it).
            self.text = text[: start + 1] + text[close:]
            return
        if k == len(members) - 1:
            previous = members[k - 1]
            between = text[previous.value_end : member.key_start]
            if "//" not in between and "/*" not in between:
                # The last one: from the end of the previous value (its comma goes too).
                self.text = text[: previous.value_end] + text[member.value_end :]
                return
            # Comments in between stay: drop the previous comma and this member's own line.
            comma = previous.value_end
            while text[comma] != ",":
                comma = max(self._skip(comma), comma + 1)
            begin, end = self._own_lines(member)
            self.text = text[:comma] + text[comma + 1 : begin] + text[end:]
            return
        # Otherwise: this member's line(s), up to just past its comma and the line end.
        begin, end = self._own_lines(member)
        self.text = text[:begin] + text[end:]

    def _own_lines(self, member: _Member) -> tuple[int, int]:
        """The span to delete for ``member``: key to value and a comma after it, plus its
        indentation and line end when it has the line(s) to itself."""
        text = self.text
        end = member.value_end
        after = end
        while after < len(text) and text[after] in " \t":
            after += 1
        if after < len(text) and text[after] == ",":
            end = after + 1
        stop = end
        while stop < len(text) and text[stop] in " \t":
            stop += 1
        line_start = text.rfind("\n", 0, member.key_start) + 1
        own_line = not text[line_start : member.key_start].strip()
        if own_line and text.startswith("\r\n", stop):
            return line_start, stop + 2
        if own_line and stop < len(text) and text[stop] == "\n":
            return line_start, stop + 1
        return member.key_start, end

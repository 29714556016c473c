"""Tool-definition pinning: a tool the user approved stays approved only as it was.

A *rug pull* is a server that changes a tool after the user approved it: the
description grows instructions for the model, a schema grows a parameter that
carries a secret out, an annotation turns ``readOnlyHint`` into a lie. The host
defends by pinning each approved tool's definition by a hash and treating any
later difference as a new, unapproved tool (see docs/host-security.md).

What is hashed is the whole tool definition as the server sent it — ``name``,
``title``, ``description``, ``inputSchema``, ``outputSchema``, ``annotations``,
``execution``, ``icons`` and ``_meta`` — in canonical JSON (keys sorted, no
insignificant whitespace, UTF-8), by SHA-256. ``_meta`` is included whole: it
carries what hosts act on (UI resources of the apps extension, vendor hints),
and a server that rewrites it between two listings is exactly what a user
should be asked about. Nothing else (the server's name, the exposed
``mcp__server__tool`` name) is part of the hash, so renaming a server in the
config keeps nothing: pins are stored per server name.

A :class:`PinStore` keeps the pins in a JSON file (owner-only, replaced
atomically, re-read when another process — ``mcpkit pins accept`` — changed
it), or only in memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import hashlib
import json
import os
import tempfile
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..protocol import types as t

__all__ = [
    "Pin",
    "PinChange",
    "PinStatus",
    "PinStore",
    "canonical_json",
    "default_pins_path",
    "definition_of",
    "diff_definitions",
    "pin_hash",
    "visible",
]

PinStatus = Literal["pinned", "new", "changed", "restored"]
_VERSION = 1


def definition_of(tool: msgspec.Struct | Mapping[str, Any]) -> dict[str, Any]:
    """The tool (or prompt, resource…) as wire JSON (camelCase keys, unset fields left out)."""
    if isinstance(tool, Mapping):
        return dict(tool)
    data = msgspec.to_builtins(tool)
    assert isinstance(data, dict)
    return data


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, non-ASCII kept as UTF-8: the same definition, the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def pin_hash(tool: t.Tool | Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the tool's canonical JSON."""
    text = canonical_json(definition_of(tool))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# Characters a terminal or a reader does not show: zero-width, bidi controls,
# tag characters (U+E0000–U+E007F, "ASCII smuggling"), other format characters
# and C0/C1 controls but newline and tab.
def _hidden(char: str) -> bool:
    if char in "\n\t":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Co", "Cn", "Zl", "Zp") or (
        0xE0000 <= ord(char) <= 0xE007F
    )


def visible(text: str) -> str:
    """``text`` with every invisible or control character shown as ``\\u200b``-style escapes."""
    if not any(_hidden(c) for c in text):
        return text
    return "".join(
        (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}") if _hidden(c) else c for c in text
    )


def diff_definitions(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    """A unified diff of two definitions as indented JSON, hidden characters escaped."""

    def lines(value: Mapping[str, Any] | None) -> list[str]:
        if value is None:
            return []
        text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)
        return [visible(line) for line in text.splitlines()]

    out = difflib.unified_diff(lines(old), lines(new), "approved", "now", lineterm="", n=2)
    return "\n".join(out)


@dataclass(frozen=True, slots=True)
class Pin:
    """One approved definition."""

    server: str
    tool: str
    hash: str
    definition: dict[str, Any]
    pinned_at: str
    #: When the server stopped listing the tool (None: listed when last seen).
    removed_at: str | None = None
    #: A changed definition the host saw and did not approve yet: ``{"hash", "definition", "seen_at"}``.
    pending: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PinChange:
    """A tool whose definition differs from its pin: what was approved and what is there now."""

    server: str
    tool: str
    old_hash: str
    new_hash: str
    old: dict[str, Any]
    new: dict[str, Any]

    def diff(self) -> str:
        """The readable difference (unified diff of the JSON definitions)."""
        return diff_definitions(self.old, self.new)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def default_pins_path(config: str | os.PathLike[str]) -> Path:
    """Where the pins for a config file live by default.

    ``$MCPKIT_STATE_DIR``, else ``$XDG_STATE_HOME/mcpkit``, else
    ``~/.local/state/mcpkit``; then ``pins/<config name>-<hash of its full
    path>.json``, so two configs never share pins.
    """
    base = os.environ.get("MCPKIT_STATE_DIR")
    if not base:
        xdg = os.environ.get("XDG_STATE_HOME")
        base = str(Path(xdg) / "mcpkit") if xdg else str(Path.home() / ".local" / "state" / "mcpkit")
    full = str(Path(config).resolve())
    digest = hashlib.sha256(full.encode("utf-8")).hexdigest()[:12]
    # "mcp.json-<hash>.json" for ".mcp.json": listed by a plain ls.
    return Path(base) / "pins" / f"{Path(config).name.lstrip('.')}-{digest}.json"


class PinStore:
    """Approved tool definitions by server and tool name, in a JSON file or in memory.

    Each change is written at once (to a temporary file, then renamed over the
    old one, mode 0600). Before each read the file is re-read if another
    process changed it, so a running gateway sees ``mcpkit pins accept``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._servers: dict[str, dict[str, Pin]] = {}
        self._stamp: tuple[int, int] | None = None
        self._load()

    # -- reading -----------------------------------------------------------------

    def _file_stamp(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = self.path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return (st.st_mtime_ns, st.st_size)

    def _load(self) -> None:
        stamp = self._file_stamp()
        if self.path is None or stamp is None or stamp == self._stamp:
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the pins file {self.path}: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError(f"the pins file {self.path} is not a version {_VERSION} pins file")
        servers: dict[str, dict[str, Pin]] = {}
        for server, tools in (data.get("servers") or {}).items():
            servers[server] = {
                name: Pin(
                    server,
                    name,
                    entry["hash"],
                    entry["definition"],
                    entry.get("pinned_at", ""),
                    entry.get("removed_at"),
                    entry.get("pending"),
                )
                for name, entry in (tools.get("tools") or {}).items()
            }
        self._servers = servers
        self._stamp = stamp

    def refresh(self) -> bool:
        """Re-read the file if it changed on disk; whether it did."""
        before = self._stamp
        self._load()
        return self._stamp != before

    def get(self, server: str, tool: str) -> Pin | None:
        """The pin of ``server``'s ``tool``, if there is one."""
        self._load()
        return self._servers.get(server, {}).get(tool)

    def pins(self, server: str | None = None) -> list[Pin]:
        """Every pin (of one server), in server then tool order."""
        self._load()
        names = [server] if server is not None else sorted(self._servers)
        return [pin for s in names for _, pin in sorted(self._servers.get(s, {}).items())]

    def check(self, server: str, tool: t.Tool | Mapping[str, Any]) -> tuple[PinStatus, Pin | None]:
        """``pinned`` (same hash; ``restored`` if it was marked removed), ``new`` or ``changed``."""
        name = definition_of(tool).get("name", "")
        pin = self.get(server, str(name))
        if pin is None:
            return "new", None
        if pin.hash == pin_hash(tool):
            return ("restored" if pin.removed_at else "pinned"), pin
        return "changed", pin

    def change(self, server: str, tool: t.Tool | Mapping[str, Any]) -> PinChange | None:
        """The :class:`PinChange` when ``tool`` differs from its pin, else None."""
        status, pin = self.check(server, tool)
        if status != "changed" or pin is None:
            return None
        new = definition_of(tool)
        return PinChange(server, pin.tool, pin.hash, pin_hash(new), pin.definition, new)

    # -- writing -----------------------------------------------------------------

    def pin(self, server: str, tool: t.Tool | Mapping[str, Any]) -> Pin:
        """Approve ``tool`` as it is now (replacing any earlier pin)."""
        definition = definition_of(tool)
        name = str(definition.get("name", ""))
        with self._editing():
            pin = Pin(server, name, pin_hash(definition), definition, _now())
            self._servers.setdefault(server, {})[name] = pin
        return pin

    def mark_removed(self, server: str, tool: str) -> None:
        """Note that the server no longer lists ``tool`` (the pin stays, to compare a re-added one)."""
        with self._editing():
            pin = self._servers.get(server, {}).get(tool)
            if pin is not None and pin.removed_at is None:
                self._servers[server][tool] = dataclasses.replace(pin, removed_at=_now())

    def mark_present(self, server: str, tool: str) -> None:
        """Undo :meth:`mark_removed` (the tool is listed again, unchanged)."""
        with self._editing():
            pin = self._servers.get(server, {}).get(tool)
            if pin is not None and pin.removed_at is not None:
                self._servers[server][tool] = dataclasses.replace(pin, removed_at=None)

    def note_pending(self, server: str, tool: t.Tool | Mapping[str, Any]) -> None:
        """Remember a changed definition the host saw, for ``mcpkit pins accept`` to approve."""
        definition = definition_of(tool)
        name = str(definition.get("name", ""))
        digest = pin_hash(definition)
        with self._editing():
            pin = self._servers.get(server, {}).get(name)
            if pin is None or (pin.pending or {}).get("hash") == digest:
                return
            pending = {"hash": digest, "definition": definition, "seen_at": _now()}
            self._servers[server][name] = dataclasses.replace(pin, pending=pending)

    def accept_pending(self, server: str, tool: str) -> Pin | None:
        """Approve the pending definition of ``tool`` (None when there is none)."""
        with self._editing():
            pin = self._servers.get(server, {}).get(tool)
            if pin is None or not pin.pending:
                return None
            definition = pin.pending["definition"]
            new = Pin(server, tool, pin_hash(definition), definition, _now())
            self._servers[server][tool] = new
        return new

    def forget(self, server: str, tool: str | None = None) -> int:
        """Drop the pins of a server (or one tool); how many were dropped."""
        with self._editing():
            tools = self._servers.get(server, {})
            names = list(tools) if tool is None else [tool] if tool in tools else []
            for name in names:
                del tools[name]
            if not tools:
                self._servers.pop(server, None)
        return len(names)

    @contextlib.contextmanager
    def _editing(self) -> Iterator[None]:
        # Read what others wrote, change, write back: under a lock file where the
        # platform has one, so a gateway and `mcpkit pins accept` lose nothing.
        with self._locked():
            self._load()
            yield
            self._save()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.path is None:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                import fcntl
            except ImportError:  # Windows: the atomic replace alone
                yield
                return
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _save(self) -> None:
        if self.path is None:
            return
        data = {
            "version": _VERSION,
            "servers": {
                server: {"tools": {name: _entry(pin) for name, pin in sorted(tools.items())}}
                for server, tools in sorted(self._servers.items())
            },
        }
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pins-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, sort_keys=True, ensure_ascii=False)
                f.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._stamp = self._file_stamp()


def _entry(pin: Pin) -> dict[str, Any]:
    entry: dict[str, Any] = {"hash": pin.hash, "definition": pin.definition, "pinned_at": pin.pinned_at}
    if pin.removed_at is not None:
        entry["removed_at"] = pin.removed_at
    if pin.pending is not None:
        entry["pending"] = pin.pending
    return entry

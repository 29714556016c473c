"""Where tokens and client registrations live.

Tokens are keyed by ``(resource, issuer)``: a token is only ever presented to the
resource it was requested for and only after discovery named the same issuer
again. Client registrations are keyed by issuer alone (MCP "Authorization Server
Binding"). OAuth 2.1 §7.1 / MCP "Token Theft": storage must be protected — the
file store writes its JSON with mode 0600, atomically (temp file + rename).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .tokens import ClientRegistration, TokenSet

__all__ = ["FileTokenStore", "InMemoryTokenStore", "TokenStore"]

logger = logging.getLogger("mcpkit.auth.client")


@runtime_checkable
class TokenStore(Protocol):
    """Persistence for tokens (per resource and issuer) and client registrations (per issuer)."""

    async def load_tokens(self, resource: str, issuer: str) -> TokenSet | None:
        """The tokens stored for ``resource`` at ``issuer``, or None."""
        ...

    async def save_tokens(self, resource: str, issuer: str, tokens: TokenSet | None) -> None:
        """Store ``tokens``; None deletes."""
        ...

    async def load_client(self, issuer: str) -> ClientRegistration | None:
        """The client registration stored for ``issuer``, or None."""
        ...

    async def save_client(self, issuer: str, client: ClientRegistration | None) -> None:
        """Store ``client``; None deletes."""
        ...


def _key(resource: str, issuer: str) -> str:
    return json.dumps([resource, issuer])


class InMemoryTokenStore:
    """The default: nothing survives the process."""

    def __init__(self) -> None:
        self.tokens: dict[tuple[str, str], TokenSet] = {}
        self.clients: dict[str, ClientRegistration] = {}

    async def load_tokens(self, resource: str, issuer: str) -> TokenSet | None:
        """The tokens kept for ``resource`` at ``issuer``, or None."""
        return self.tokens.get((resource, issuer))

    async def save_tokens(self, resource: str, issuer: str, tokens: TokenSet | None) -> None:
        """Keep ``tokens`` for ``resource`` at ``issuer``; None deletes."""
        if tokens is None:
            self.tokens.pop((resource, issuer), None)
        else:
            self.tokens[(resource, issuer)] = tokens

    async def load_client(self, issuer: str) -> ClientRegistration | None:
        """The client registration kept for ``issuer``, or None."""
        return self.clients.get(issuer)

    async def save_client(self, issuer: str, client: ClientRegistration | None) -> None:
        """Keep ``client`` for ``issuer``; None deletes."""
        if client is None:
            self.clients.pop(issuer, None)
        else:
            self.clients[issuer] = client


class FileTokenStore:
    """A JSON file readable by its owner only (0600).

    Layout: ``{"version": 1, "tokens": {"[resource, issuer]": {...}}, "clients":
    {issuer: {...}}}``. Every save rewrites the file through a temporary sibling
    created with ``os.open(..., 0o600)`` and ``os.replace``, so the secret never
    exists with wider permissions, even briefly, and readers never see half a file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = asyncio.Lock()

    # -- file I/O (run in a thread) ------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"version": 1, "tokens": {}, "clients": {}}
        try:
            data = json.loads(text)
        except ValueError:
            logger.warning("token store %s is corrupt; starting empty", self.path)
            data = {}
        if not isinstance(data, dict):
            data = {}
        data.setdefault("version", 1)
        for section in ("tokens", "clients"):
            if not isinstance(data.get(section), dict):
                data[section] = {}
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=2, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise

    async def _update(self, section: str, key: str, value: dict[str, Any] | None) -> None:
        async with self._lock:
            data = await asyncio.to_thread(self._read)
            if value is None:
                data[section].pop(key, None)
            else:
                data[section][key] = value
            await asyncio.to_thread(self._write, data)

    async def _get(self, section: str, key: str) -> dict[str, Any] | None:
        async with self._lock:
            data = await asyncio.to_thread(self._read)
        entry = data[section].get(key)
        return entry if isinstance(entry, dict) else None

    # -- TokenStore ------------------------------------------------------------

    async def load_tokens(self, resource: str, issuer: str) -> TokenSet | None:
        """The tokens in the file for ``resource`` at ``issuer``; None if absent or unreadable."""
        entry = await self._get("tokens", _key(resource, issuer))
        try:
            return TokenSet.from_json(entry) if entry else None
        except TypeError:
            return None

    async def save_tokens(self, resource: str, issuer: str, tokens: TokenSet | None) -> None:
        """Write ``tokens`` for ``resource`` at ``issuer`` to the file; None deletes."""
        await self._update("tokens", _key(resource, issuer), tokens.to_json() if tokens else None)

    async def load_client(self, issuer: str) -> ClientRegistration | None:
        """The client registration in the file for ``issuer``; None if absent or unreadable."""
        entry = await self._get("clients", issuer)
        try:
            return ClientRegistration.from_json(entry) if entry else None
        except TypeError:
            return None

    async def save_client(self, issuer: str, client: ClientRegistration | None) -> None:
        """Write ``client`` for ``issuer`` to the file; None deletes."""
        await self._update("clients", issuer, client.to_json() if client else None)

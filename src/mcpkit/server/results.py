"""Turning what handlers return into MCP content, and media helpers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import msgspec

from ..protocol import _binary as binary
from ..protocol import types as t

__all__ = ["CONTENT_LIKE", "CONTENT_TYPES", "Audio", "File", "Image", "to_content"]

CONTENT_TYPES = (t.TextContent, t.ImageContent, t.AudioContent, t.ResourceLink, t.EmbeddedResource)
_json = msgspec.json.Encoder()


@dataclass(slots=True)
class _Media:
    """Binary media from a path or from bytes; ``format`` like "png" or a MIME type."""

    path: str | os.PathLike[str] | None = None
    data: bytes | None = None
    format: str | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.data is None):
            raise ValueError("give exactly one of path or data")

    def _bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None  # __post_init__ guarantees one of the two
        with open(self.path, "rb") as f:
            data: bytes = f.read()
        return data

    def _mime(self, kind: str, default: str) -> str:
        if self.format:
            return self.format if "/" in self.format else f"{kind}/{self.format.lower()}"
        if self.path is not None:
            import mimetypes  # only media from files need it: keep it off the start-up path

            guessed, _ = mimetypes.guess_type(os.fspath(self.path))
            if guessed:
                return guessed
        return default


class Image(_Media):
    """An image to return from a tool or prompt."""

    def to_content(self) -> t.ImageContent:
        """This image as an ``ImageContent`` block (base64 data and its MIME type)."""
        return binary.image(self._bytes(), self._mime("image", "image/png"))


class Audio(_Media):
    """Audio to return from a tool or prompt."""

    def to_content(self) -> t.AudioContent:
        """This audio as an ``AudioContent`` block (base64 data and its MIME type)."""
        return binary.audio(self._bytes(), self._mime("audio", "audio/wav"))


class File(_Media):
    """A file returned as an embedded resource."""

    def to_content(self) -> t.EmbeddedResource:
        """This file as an embedded resource (text for ``text/*`` types, else a base64 blob)."""
        mime = self._mime("application", "application/octet-stream")
        uri = f"file://{os.path.realpath(self.path)}" if self.path is not None else "data:"
        if mime.startswith("text/"):
            return t.EmbeddedResource(
                resource=t.ResourceContents(uri=uri, mime_type=mime, text=self._bytes().decode())
            )
        return t.EmbeddedResource(resource=binary.blob(uri, self._bytes(), mime))


#: What a handler may return as content: content blocks and the media helpers.
CONTENT_LIKE: tuple[type, ...] = (*CONTENT_TYPES, _Media)


def to_content(value: Any) -> list[t.ContentBlock]:
    """Content blocks for a handler's return value.

    Strings become text; content blocks and media helpers pass through; lists
    are flattened; None is no content; anything else is serialised as JSON text.
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [t.TextContent(text=value)]
    if isinstance(value, CONTENT_TYPES):
        return [value]
    if isinstance(value, _Media):
        return [value.to_content()]  # type: ignore[attr-defined]
    if isinstance(value, list | tuple):
        out: list[t.ContentBlock] = []
        for item in value:
            if isinstance(item, (*CONTENT_TYPES, _Media, str)):
                out.extend(to_content(item))
            else:
                out.append(t.TextContent(text=json_text(item)))
        return out
    return [t.TextContent(text=json_text(value))]


def json_text(value: Any) -> str:
    """JSON text of any value; objects msgspec cannot encode fall back to ``str``."""
    try:
        return _json.encode(value).decode()
    except TypeError:
        return _json.encode(msgspec.to_builtins(value, enc_hook=str)).decode()

"""Binary content that holds its raw bytes until it is encoded.

A blob or image mcpkit makes from bytes used to be base64-encoded into a ``str`` first
(1.33x the payload), and the JSON encoder then copied that text into the message (another
1.33x): with glibc keeping freed 16-21 MiB blocks resident, a 16 MiB blob cost 3.7x its size
in server RSS. msgspec writes a ``bytes`` value as base64 straight into its output buffer, so
these subclasses of the public Structs keep the raw bytes in the field's slot, which is what
the encoders (``msgspec.json.encode``, ``msgspec.to_builtins``) read: the wire bytes are the
same, and the intermediate text is never made.

For everyone else they are the public types: ``isinstance`` holds, and the field reads as
the base64 ``str`` (computed on each read: code that reads it pays for the text then) and
can be assigned a ``str``. What shows the raw bytes: ``repr``, ``msgspec.structs.asdict``,
``astuple`` and ``replace``. Nothing decodes into them: received content is always the
public type.
"""

from __future__ import annotations

from binascii import b2a_base64
from typing import Any, TypeVar

from msgspec import UNSET, UnsetType

from .types import AudioContent, ImageContent, ResourceContents

__all__ = ["BytesAudioContent", "BytesImageContent", "BytesResourceContents", "audio", "blob", "image"]

Binary = bytes | bytearray | memoryview
_S = TypeVar("_S")


def _base64_view(owner: type, name: str) -> Any:
    """A property over ``owner``'s slot ``name``: raw bytes read as base64 text, a str as itself."""
    slot = owner.__dict__[name]

    def get(self: object) -> Any:
        value = slot.__get__(self, owner)
        if value.__class__ is str or value is UNSET:
            return value
        return b2a_base64(value, newline=False).decode("ascii")

    def set_(self: object, value: Any) -> None:
        slot.__set__(self, value)

    return property(get, set_, doc=f"``{name}`` as base64 text (the slot may hold the raw bytes).")


def _public_eq(public: type[_S]) -> tuple[Any, Any]:
    """``__eq__`` and ``__ne__`` as the public type compares: equal field values (the bytes as text)."""
    fields: tuple[str, ...] = public.__struct_fields__  # type: ignore[attr-defined]

    def eq(self: object, other: object) -> Any:
        if not isinstance(other, public):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in fields)

    def ne(self: object, other: object) -> Any:
        same = eq(self, other)
        return same if same is NotImplemented else not same

    return eq, ne


class BytesResourceContents(ResourceContents, kw_only=True):
    """:class:`ResourceContents` whose ``blob`` slot holds raw bytes (see the module docstring)."""

    blob = _base64_view(ResourceContents, "blob")
    __eq__, __ne__ = _public_eq(ResourceContents)


class BytesImageContent(ImageContent, kw_only=True):
    """:class:`ImageContent` whose ``data`` slot holds raw bytes."""

    data = _base64_view(ImageContent, "data")
    __eq__, __ne__ = _public_eq(ImageContent)


class BytesAudioContent(AudioContent, kw_only=True):
    """:class:`AudioContent` whose ``data`` slot holds raw bytes."""

    data = _base64_view(AudioContent, "data")
    __eq__, __ne__ = _public_eq(AudioContent)


def _frozen(data: Binary) -> bytes | memoryview:
    # A bytearray (or writable view) could change between the return and the encoding, which
    # may come later (a task's result, a queued answer): freeze it as the old copy to text did.
    if data.__class__ is bytes:
        return data
    if isinstance(data, memoryview) and data.obj.__class__ is bytes and data.c_contiguous:
        return data
    return bytes(data)


def blob(uri: str, data: Binary, mime_type: str | UnsetType = UNSET) -> ResourceContents:
    """Binary resource contents for ``data``, encoded straight from the bytes."""
    out = BytesResourceContents(uri=uri, mime_type=mime_type)
    ResourceContents.__dict__["blob"].__set__(out, _frozen(data))
    return out


def image(data: Binary, mime_type: str) -> ImageContent:
    """An image content block for ``data``, encoded straight from the bytes."""
    out = BytesImageContent(data="", mime_type=mime_type)
    ImageContent.__dict__["data"].__set__(out, _frozen(data))
    return out


def audio(data: Binary, mime_type: str) -> AudioContent:
    """An audio content block for ``data``, encoded straight from the bytes."""
    out = BytesAudioContent(data="", mime_type=mime_type)
    AudioContent.__dict__["data"].__set__(out, _frozen(data))
    return out

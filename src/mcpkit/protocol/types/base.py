"""Shared building blocks: identity, icons, annotations, content blocks.

One set of msgspec Structs covers every revision (a superset); fields a
revision lacks are dropped on the way out by :mod:`mcpkit.protocol.wire`.
Optional fields default to ``UNSET`` so "absent" and ``null`` stay distinct,
and unknown input fields are ignored.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "ContentBlock",
    "EmbeddedResource",
    "Icon",
    "ImageContent",
    "Implementation",
    "Meta",
    "ResourceContents",
    "ResourceLink",
    "Role",
    "TextContent",
    "TextResourceContents",
    "ToolResultContent",
    "ToolUseContent",
    "WireStruct",
]

Meta: TypeAlias = dict[str, Any]
Role: TypeAlias = Literal["user", "assistant"]


class WireStruct(msgspec.Struct, rename="camel", kw_only=True):
    """Base of every wire type: camelCase on the wire, snake_case in Python."""


def meta_field() -> Any:
    return msgspec.field(default=UNSET, name="_meta")


class Icon(WireStruct, kw_only=True):
    src: str
    mime_type: str | UnsetType = UNSET
    sizes: list[str] | UnsetType = UNSET
    theme: Literal["light", "dark"] | UnsetType = UNSET


class Implementation(WireStruct, kw_only=True):
    """Name and version of a client or server (``clientInfo`` / ``serverInfo``)."""

    name: str
    version: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    website_url: str | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET


class Annotations(WireStruct, kw_only=True):
    audience: list[Role] | UnsetType = UNSET
    priority: float | UnsetType = UNSET
    last_modified: str | UnsetType = UNSET


class ResourceContents(WireStruct, kw_only=True):
    """Contents of a resource: ``text`` or base64 ``blob``.

    The spec's TextResourceContents and BlobResourceContents differ only in
    which of the two is present, so one Struct decodes both.
    """

    uri: str
    mime_type: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    blob: str | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


def TextResourceContents(uri: str, text: str, mime_type: str | UnsetType = UNSET) -> ResourceContents:
    """Build text contents (the spec's ``TextResourceContents``)."""
    return ResourceContents(uri=uri, text=text, mime_type=mime_type)


def BlobResourceContents(uri: str, blob: str, mime_type: str | UnsetType = UNSET) -> ResourceContents:
    """Build binary contents (the spec's ``BlobResourceContents``); ``blob`` is base64."""
    return ResourceContents(uri=uri, blob=blob, mime_type=mime_type)


class TextContent(WireStruct, tag_field="type", tag="text", kw_only=True):
    text: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class ImageContent(WireStruct, tag_field="type", tag="image", kw_only=True):
    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class AudioContent(WireStruct, tag_field="type", tag="audio", kw_only=True):
    data: str
    mime_type: str
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class ResourceLink(WireStruct, tag_field="type", tag="resource_link", kw_only=True):
    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class EmbeddedResource(WireStruct, tag_field="type", tag="resource", kw_only=True):
    resource: ResourceContents
    annotations: Annotations | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


ContentBlock: TypeAlias = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


class ToolUseContent(WireStruct, tag_field="type", tag="tool_use", kw_only=True):
    """A model's tool call inside sampling messages (2025-11-25 and later)."""

    id: str
    name: str
    input: dict[str, Any]
    meta: Meta | UnsetType = meta_field()


class ToolResultContent(WireStruct, tag_field="type", tag="tool_result", kw_only=True):
    tool_use_id: str
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()

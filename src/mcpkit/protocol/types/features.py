"""Tools, resources, prompts, completion and their results."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from msgspec import UNSET, UnsetType

from .base import (
    Annotations,
    ContentBlock,
    Icon,
    Meta,
    ResourceContents,
    Role,
    WireStruct,
    meta_field,
)

__all__ = [
    "CallToolResult",
    "CompleteResult",
    "Completion",
    "EmptyResult",
    "GetPromptResult",
    "InputRequiredResult",
    "ListPromptsResult",
    "ListResourceTemplatesResult",
    "ListResourcesResult",
    "ListToolsResult",
    "PaginatedResult",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "ReadResourceResult",
    "Resource",
    "ResourceTemplate",
    "Result",
    "Tool",
    "ToolAnnotations",
]

CacheScope: TypeAlias = Literal["public", "private"]


class Result(WireStruct, kw_only=True):
    """Common result fields. ``result_type`` is only sent in the modern era."""

    result_type: str | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class EmptyResult(Result, kw_only=True):
    pass


class InputRequiredResult(Result, kw_only=True):
    """More input is needed (2026-07-28 basic/patterns/mrtr); retry with the answers."""

    input_requests: dict[str, Any] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class PaginatedResult(Result, kw_only=True):
    next_cursor: str | UnsetType = UNSET
    # CacheableResult (2026-07-28): required there, absent before.
    ttl_ms: int | UnsetType = UNSET
    cache_scope: CacheScope | UnsetType = UNSET


class ToolAnnotations(WireStruct, kw_only=True):
    """Hints about a tool's behaviour; untrusted unless the server is."""

    title: str | UnsetType = UNSET
    read_only_hint: bool | UnsetType = UNSET
    destructive_hint: bool | UnsetType = UNSET
    idempotent_hint: bool | UnsetType = UNSET
    open_world_hint: bool | UnsetType = UNSET


class Tool(WireStruct, kw_only=True):
    name: str
    input_schema: dict[str, Any]
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    output_schema: dict[str, Any] | UnsetType = UNSET
    annotations: ToolAnnotations | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    execution: dict[str, Any] | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class ListToolsResult(PaginatedResult, kw_only=True):
    tools: list[Tool]


class CallToolResult(Result, kw_only=True):
    content: list[ContentBlock]
    structured_content: Any | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET


class Resource(WireStruct, kw_only=True):
    uri: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    size: int | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class ResourceTemplate(WireStruct, kw_only=True):
    uri_template: str
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    mime_type: str | UnsetType = UNSET
    annotations: Annotations | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class ListResourcesResult(PaginatedResult, kw_only=True):
    resources: list[Resource]


class ListResourceTemplatesResult(PaginatedResult, kw_only=True):
    resource_templates: list[ResourceTemplate]


class ReadResourceResult(Result, kw_only=True):
    contents: list[ResourceContents]
    ttl_ms: int | UnsetType = UNSET
    cache_scope: CacheScope | UnsetType = UNSET


class PromptArgument(WireStruct, kw_only=True):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    required: bool | UnsetType = UNSET


class Prompt(WireStruct, kw_only=True):
    name: str
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    arguments: list[PromptArgument] | UnsetType = UNSET
    icons: list[Icon] | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class PromptMessage(WireStruct, kw_only=True):
    role: Role
    content: ContentBlock


class ListPromptsResult(PaginatedResult, kw_only=True):
    prompts: list[Prompt]


class GetPromptResult(Result, kw_only=True):
    messages: list[PromptMessage]
    description: str | UnsetType = UNSET


class Completion(WireStruct, kw_only=True):
    values: list[str]
    total: int | UnsetType = UNSET
    has_more: bool | UnsetType = UNSET


class CompleteResult(Result, kw_only=True):
    completion: Completion

"""Request and notification params, decoded in the second phase by method."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from .base import Implementation, Meta, WireStruct, meta_field
from .client_features import ClientCapabilities, LoggingLevel, SamplingMessage

__all__ = [
    "CallToolParams",
    "CancelledParams",
    "CompleteParams",
    "CompletionArgument",
    "CompletionContext",
    "CompletionRef",
    "CreateMessageParams",
    "ElicitParams",
    "GetPromptParams",
    "InitializeRequestParams",
    "ListenParams",
    "LoggingMessageParams",
    "PaginatedParams",
    "Params",
    "ProgressParams",
    "ResourceUpdatedParams",
    "SetLevelParams",
    "UriParams",
]


class Params(WireStruct, kw_only=True):
    """Params with nothing but ``_meta``."""

    meta: Meta | UnsetType = meta_field()


class _MRTRParams(Params, kw_only=True):
    # Multi round-trip retries (2026-07-28 basic/patterns/mrtr).
    input_responses: dict[str, Any] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class PaginatedParams(Params, kw_only=True):
    cursor: str | UnsetType = UNSET


class CallToolParams(_MRTRParams, kw_only=True):
    name: str
    arguments: dict[str, Any] | UnsetType = UNSET
    task: dict[str, Any] | UnsetType = UNSET


class UriParams(_MRTRParams, kw_only=True):
    """``resources/read``, ``resources/subscribe`` and ``resources/unsubscribe``."""

    uri: str


class GetPromptParams(_MRTRParams, kw_only=True):
    name: str
    arguments: dict[str, str] | UnsetType = UNSET


class CompletionArgument(WireStruct, kw_only=True):
    name: str
    value: str


class CompletionContext(WireStruct, kw_only=True):
    arguments: dict[str, str] | UnsetType = UNSET


class CompletionRef(WireStruct, kw_only=True):
    type: Literal["ref/prompt", "ref/resource"]
    name: str | UnsetType = UNSET
    uri: str | UnsetType = UNSET
    title: str | UnsetType = UNSET


class CompleteParams(Params, kw_only=True):
    ref: CompletionRef
    argument: CompletionArgument
    context: CompletionContext | UnsetType = UNSET


class SetLevelParams(Params, kw_only=True):
    level: LoggingLevel


class InitializeRequestParams(Params, kw_only=True):
    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation


class ListenParams(Params, kw_only=True):
    """``subscriptions/listen`` (2026-07-28 basic/patterns/subscriptions)."""

    notifications: dict[str, Any]


class CancelledParams(Params, kw_only=True):
    request_id: int | str | UnsetType = UNSET
    reason: str | UnsetType = UNSET


class ProgressParams(Params, kw_only=True):
    progress_token: int | str
    progress: float
    total: float | UnsetType = UNSET
    message: str | UnsetType = UNSET


class LoggingMessageParams(Params, kw_only=True):
    level: LoggingLevel
    data: Any
    logger: str | UnsetType = UNSET


class ResourceUpdatedParams(Params, kw_only=True):
    uri: str


class CreateMessageParams(Params, kw_only=True):
    messages: list[SamplingMessage]
    max_tokens: int
    system_prompt: str | UnsetType = UNSET
    include_context: str | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    model_preferences: dict[str, Any] | UnsetType = UNSET
    tools: list[dict[str, Any]] | UnsetType = UNSET
    tool_choice: dict[str, Any] | UnsetType = UNSET


class ElicitParams(Params, kw_only=True):
    message: str
    mode: Literal["form", "url"] | UnsetType = UNSET
    requested_schema: dict[str, Any] | UnsetType = UNSET
    url: str | UnsetType = UNSET
    elicitation_id: str | UnsetType = UNSET

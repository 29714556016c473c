"""Capabilities, lifecycle (initialize / server/discover), and client features:
sampling, elicitation, roots, logging."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from msgspec import UNSET, UnsetType

from .base import Implementation, Meta, WireStruct, meta_field
from .features import Result

__all__ = [
    "LOG_LEVELS",
    "ClientCapabilities",
    "CreateMessageResult",
    "DiscoverResult",
    "ElicitResult",
    "InitializeParams",
    "InitializeResult",
    "ListRootsResult",
    "LoggingLevel",
    "Root",
    "SamplingMessage",
    "ServerCapabilities",
]

LoggingLevel: TypeAlias = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
LOG_LEVELS: tuple[LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


class ServerCapabilities(WireStruct, kw_only=True):
    experimental: dict[str, Any] | UnsetType = UNSET
    logging: dict[str, Any] | UnsetType = UNSET
    completions: dict[str, Any] | UnsetType = UNSET
    prompts: dict[str, Any] | UnsetType = UNSET
    resources: dict[str, Any] | UnsetType = UNSET
    tools: dict[str, Any] | UnsetType = UNSET
    tasks: dict[str, Any] | UnsetType = UNSET
    extensions: dict[str, Any] | UnsetType = UNSET


class ClientCapabilities(WireStruct, kw_only=True):
    experimental: dict[str, Any] | UnsetType = UNSET
    roots: dict[str, Any] | UnsetType = UNSET
    sampling: dict[str, Any] | UnsetType = UNSET
    elicitation: dict[str, Any] | UnsetType = UNSET
    tasks: dict[str, Any] | UnsetType = UNSET
    extensions: dict[str, Any] | UnsetType = UNSET


class InitializeParams(WireStruct, kw_only=True):
    protocol_version: str
    capabilities: ClientCapabilities
    client_info: Implementation
    meta: Meta | UnsetType = meta_field()


class InitializeResult(Result, kw_only=True):
    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | UnsetType = UNSET


class DiscoverResult(Result, kw_only=True):
    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | UnsetType = UNSET
    ttl_ms: int | UnsetType = UNSET
    cache_scope: Literal["public", "private"] | UnsetType = UNSET


class SamplingMessage(WireStruct, kw_only=True):
    role: Literal["user", "assistant"]
    content: Any
    meta: Meta | UnsetType = meta_field()


class CreateMessageResult(Result, kw_only=True):
    role: Literal["user", "assistant"]
    content: Any
    model: str
    stop_reason: str | UnsetType = UNSET


class ElicitResult(Result, kw_only=True):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | UnsetType = UNSET


class Root(WireStruct, kw_only=True):
    uri: str
    name: str | UnsetType = UNSET
    meta: Meta | UnsetType = meta_field()


class ListRootsResult(Result, kw_only=True):
    roots: list[Root]

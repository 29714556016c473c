"""What a :class:`~mcpkit.host.Host` shows: its aggregated tools, prompts, resources and
templates, its servers' status, and the events its listeners hear."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..protocol import types as t
from .backend import State

__all__ = [
    "HostEvent",
    "HostPrompt",
    "HostResource",
    "HostTemplate",
    "HostTool",
    "Listener",
    "ServerStatus",
    "UnknownName",
]


class UnknownName(LookupError):
    """No aggregated tool, prompt or resource has this name or URI."""


@dataclass(frozen=True, slots=True)
class HostTool:
    """An aggregated tool: ``definition`` is the server's tool under its exposed name."""

    name: str
    server: str
    tool: t.Tool
    definition: t.Tool


@dataclass(frozen=True, slots=True)
class HostPrompt:
    name: str
    server: str
    prompt: t.Prompt
    definition: t.Prompt


@dataclass(frozen=True, slots=True)
class HostResource:
    """An aggregated resource: ``resource`` as its server lists it, ``definition`` as the host shows it.

    Resources keep their URIs (clients and tool results refer to them as they
    are), unless two or more servers list the same URI: then each one's copy is
    shown as ``mcp://<server>/<uri>`` (:func:`~mcpkit.host.naming.qualify_uri`).
    """

    server: str
    resource: t.Resource
    definition: t.Resource

    @property
    def uri(self) -> str:
        """The URI the host lists it under."""
        return self.definition.uri


@dataclass(frozen=True, slots=True)
class HostTemplate:
    """An aggregated resource template; shared templates are qualified as shared URIs are."""

    server: str
    template: t.ResourceTemplate
    definition: t.ResourceTemplate

    @property
    def uri_template(self) -> str:
        """The URI template the host lists it under."""
        return self.definition.uri_template

    def server_uri(self, uri: str) -> str:
        """A URI this (possibly qualified) template matched, as its server knows it."""
        return uri[len(self.definition.uri_template) - len(self.template.uri_template) :]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    key: str
    transport: str
    state: State
    error: str | None
    restarts: int
    tools: int


@dataclass(frozen=True, slots=True)
class HostEvent:
    """Something changed on ``server``: ``kinds`` among tools, resources, prompts,
    state, resource_updated (then ``uri`` says which)."""

    server: str
    kinds: frozenset[str]
    uri: str | None = None


Listener = Callable[[HostEvent], Awaitable[None] | None]

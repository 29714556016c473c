"""Prompts: arguments from the signature, messages from the return value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, MCPError
from .context import Context
from .results import to_content
from .signature import split_docstring
from .sync import SyncRunner
from .textargs import RawArgs, TextArgs, TextArgumentError

__all__ = ["AssistantMessage", "PromptOptions", "PromptRegistry", "UserMessage"]


@dataclass(frozen=True, slots=True)
class PromptOptions:
    """How a function is published as a prompt: the options of :meth:`MCPServer.prompt`.

    Built once by the decorator and handed to :meth:`PromptRegistry.add`; a
    new per-prompt option is a field here plus a keyword of the decorator.
    """

    #: The prompt's name; the function's ``__name__`` when not given.
    name: str | None = None
    title: str | None = None
    #: The description; the docstring's summary when not given.
    description: str | None = None
    icons: list[t.Icon] | None = None
    meta: dict[str, Any] | None = None
    #: OAuth scopes a caller needs (HTTP with an authenticator).
    scopes: frozenset[str] = frozenset()


def UserMessage(content: Any) -> t.PromptMessage:
    """A user-role prompt message from a string, a content block or a media helper."""
    return t.PromptMessage(role="user", content=_one_block(content))


def AssistantMessage(content: Any) -> t.PromptMessage:
    """An assistant-role prompt message."""
    return t.PromptMessage(role="assistant", content=_one_block(content))


def _one_block(content: Any) -> t.ContentBlock:
    blocks = to_content(content)
    if len(blocks) != 1:
        raise ValueError("a prompt message holds exactly one content block")
    return blocks[0]


@dataclass(slots=True)
class _Entry:
    fn: Callable[..., Any]
    args: TextArgs
    definition: t.Prompt
    runner: SyncRunner | None
    scopes: frozenset[str] = frozenset()


class PromptRegistry:
    def __init__(self) -> None:
        self.prompts: dict[str, _Entry] = {}
        self.on_change: Callable[[], None] | None = None

    def add(self, fn: Callable[..., Any], options: PromptOptions = PromptOptions()) -> None:
        """Publish ``fn`` as a prompt, replacing any prompt of the same name."""
        args = TextArgs(fn, (Context,))
        summary, param_docs = split_docstring(fn)
        arguments = [
            t.PromptArgument(
                name=p.name,
                description=_u(p.description or param_docs.get(p.name)),
                required=p.required,
            )
            for p in args.params
        ]
        prompt_name = options.name or fn.__name__
        description = options.description
        definition = t.Prompt(
            name=prompt_name,
            title=_u(options.title),
            description=_u(description if description is not None else summary),
            arguments=arguments or UNSET,
            icons=_u(options.icons),
            meta=_u(options.meta),
        )
        runner = None if args.is_async else SyncRunner(fn)
        self.prompts[prompt_name] = _Entry(fn, args, definition, runner, options.scopes)
        if self.on_change is not None:
            self.on_change()

    def add_raw(
        self, definition: t.Prompt, handler: Callable[..., Any], *, scopes: frozenset[str] = frozenset()
    ) -> None:
        """Publish ``definition`` verbatim; ``handler(arguments=..., ctx=...)`` returns the result."""
        required = [a.name for a in (definition.arguments or []) if a.required is True]
        self.prompts[definition.name] = _Entry(handler, RawArgs(required), definition, None, scopes)  # type: ignore[arg-type]
        if self.on_change is not None:
            self.on_change()

    def remove(self, name: str) -> None:
        if self.prompts.pop(name, None) is None:
            raise KeyError(name)
        if self.on_change is not None:
            self.on_change()

    async def get(
        self, name: str, arguments: dict[str, str] | None, ctx: Context | None
    ) -> t.GetPromptResult:
        entry = self.prompts.get(name)
        if entry is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
        try:
            kwargs = entry.args.bind(arguments or {})
        except TextArgumentError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        if entry.args.context_param is not None:
            kwargs[entry.args.context_param] = ctx
        value = await (entry.fn(**kwargs) if entry.runner is None else entry.runner(kwargs))
        if isinstance(value, t.GetPromptResult):
            return value
        return t.GetPromptResult(messages=_messages(value), description=entry.definition.description)


def _messages(value: Any) -> list[t.PromptMessage]:
    items = value if isinstance(value, list | tuple) else [value]
    out: list[t.PromptMessage] = []
    for item in items:
        if isinstance(item, t.PromptMessage):
            out.append(item)
        elif isinstance(item, dict) and "role" in item:
            out.append(msgspec.convert(item, t.PromptMessage))
        else:
            out.append(UserMessage(item))
    return out


def _u(value: Any) -> Any:
    return UNSET if value is None else value

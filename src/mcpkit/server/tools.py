"""Tool registration and calling."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, MCPError
from .context import Context
from .mrtr import InputRequired
from .results import CONTENT_LIKE, json_text, to_content
from .signature import ArgumentError, FunctionSignature, inspect_function, raw_signature, split_docstring
from .sync import SyncRunner

__all__ = ["RegisteredTool", "ToolRegistry"]


@dataclass(slots=True)
class RegisteredTool:
    fn: Callable[..., Any]
    signature: FunctionSignature
    definition: t.Tool
    runner: SyncRunner | None = None
    #: ``x-mcp-header`` name (lower-case) -> argument path, for Mcp-Param-* checks.
    header_params: dict[str, tuple[str, ...]] | None = None
    #: OAuth scopes a caller needs (HTTP with an authenticator).
    scopes: frozenset[str] = frozenset()

    @property
    def runs_inline(self) -> bool:
        """True when a call completes on the event loop without awaiting anything."""
        runner = self.runner
        return runner is not None and runner.inline and self.signature.context_param is None

    async def call(self, arguments: dict[str, Any] | None, ctx: Context | None) -> t.CallToolResult:
        sig = self.signature
        try:
            kwargs = sig.bind(arguments)
        except ArgumentError as exc:
            return _invalid_arguments(exc)
        if sig.context_param is not None:
            kwargs[sig.context_param] = ctx
        try:
            if self.runner is None:
                value = await self.fn(**kwargs)
            else:
                value = await self.runner(kwargs)
        except (MCPError, InputRequired):
            raise
        except Exception as exc:
            return _failed(exc)
        return self._result(value)

    def call_inline(self, arguments: dict[str, Any] | None) -> t.CallToolResult:
        """:meth:`call` without a coroutine, for tools where :attr:`runs_inline` holds."""
        try:
            kwargs = self.signature.bind(arguments)
        except ArgumentError as exc:
            return _invalid_arguments(exc)
        try:
            value = self.runner.run_inline(kwargs)  # type: ignore[union-attr]
        except (MCPError, InputRequired):
            raise
        except Exception as exc:
            return _failed(exc)
        return self._result(value)

    def _result(self, value: Any) -> t.CallToolResult:
        if isinstance(value, t.CallToolResult):
            return value
        if self.signature.output_schema is None or _is_content(value):
            return t.CallToolResult(content=to_content(value), is_error=False)
        structured = self.signature.structured(value)
        # server/tools "Structured Content": also send the JSON as text for older
        # clients; a wrapped scalar reads as itself ("5", not {"result": 5}).
        shown = structured["result"] if self.signature.wraps_output else structured
        text = shown if isinstance(shown, str) else json_text(shown)
        return t.CallToolResult(
            content=[t.TextContent(text=text)], structured_content=structured, is_error=False
        )


def _is_content(value: Any) -> bool:
    """Content blocks (or a list of them) go out as content whatever the annotation says."""
    items = value if isinstance(value, list | tuple) else (value,)
    return bool(items) and all(isinstance(item, CONTENT_LIKE) for item in items)


def _invalid_arguments(exc: ArgumentError) -> t.CallToolResult:
    # 2025-11-25 server/tools "Error Handling": input validation errors are
    # tool execution errors, so the model can see them and correct itself.
    return t.CallToolResult(content=[t.TextContent(text=str(exc))], is_error=True)


def _failed(exc: Exception) -> t.CallToolResult:
    text = str(exc) or type(exc).__name__
    return t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)


class ToolRegistry:
    """The server's tools, in registration order (deterministic for caching)."""

    def __init__(self) -> None:
        self.tools: dict[str, RegisteredTool] = {}
        self.on_change: Callable[[], None] | None = None

    def add(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: t.ToolAnnotations | dict[str, Any] | None = None,
        icons: list[t.Icon] | None = None,
        structured_output: bool | None = None,
        meta: dict[str, Any] | None = None,
        threaded: bool | None = None,
        headers: dict[str, str] | None = None,
        input_schema: dict[str, Any] | None = None,
        scopes: frozenset[str] = frozenset(),
    ) -> RegisteredTool:
        sig = inspect_function(fn, context_types=(Context,), structured_output=structured_output)
        input_schema = _with_headers(input_schema or sig.input_schema, headers or {})
        header_params = None
        if headers or b"x-mcp-header" in msgspec.json.encode(input_schema):
            # Only schemas that mention it pay for the HTTP rules (start-up time).
            from ..protocol import http

            problem = http.invalid_x_mcp_headers(input_schema)
            if problem is not None:
                raise ValueError(f"tool {name or fn.__name__!r}: {problem}")
            header_params = http.header_params(input_schema) or None
        summary, _ = split_docstring(fn)
        tool_name = name or fn.__name__
        if isinstance(annotations, dict):
            # Accept the wire spelling (readOnlyHint) and the Python one (read_only_hint).
            annotations = msgspec.convert({_camel(k): v for k, v in annotations.items()}, t.ToolAnnotations)
        definition = t.Tool(
            name=tool_name,
            input_schema=input_schema,
            title=_set(title),
            description=_set(description if description is not None else summary),
            output_schema=_set(sig.output_schema),
            annotations=_set(annotations),
            icons=_set(icons),
            meta=_set(meta),
        )
        tool = RegisteredTool(
            fn,
            sig,
            definition,
            None if sig.is_async else SyncRunner(fn, threaded),
            header_params,
            scopes,
        )
        self.tools[tool_name] = tool
        self._changed()
        return tool

    def add_raw(
        self, definition: t.Tool, handler: Callable[..., Any], *, scopes: frozenset[str] = frozenset()
    ) -> RegisteredTool:
        """Publish ``definition`` verbatim (``outputSchema`` included); ``handler(arguments=...,
        ctx=...)`` receives the arguments unbound and returns a :class:`CallToolResult`."""
        header_params = None
        if b"x-mcp-header" in msgspec.json.encode(definition.input_schema):
            from ..protocol import http

            problem = http.invalid_x_mcp_headers(definition.input_schema)
            if problem is not None:
                raise ValueError(f"tool {definition.name!r}: {problem}")
            header_params = http.header_params(definition.input_schema) or None
        tool = RegisteredTool(
            handler, raw_signature(definition.input_schema), definition, None, header_params, scopes
        )
        self.tools[definition.name] = tool
        self._changed()
        return tool

    def remove(self, name: str) -> None:
        if self.tools.pop(name, None) is None:
            raise KeyError(name)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def get(self, name: str) -> RegisteredTool:
        tool = self.tools.get(name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        return tool


def _with_headers(schema: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """Mark parameters to be mirrored as ``Mcp-Param-{Name}`` headers (2026-07-28 x-mcp-header)."""
    if not headers:
        return schema
    props = dict(schema.get("properties", {}))
    for param, header in headers.items():
        if param not in props:
            raise ValueError(f"headers: no parameter named {param!r}")
        props[param] = {**props[param], "x-mcp-header": header}
    return {**schema, "properties": props}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _set(value: Any) -> Any:
    return UNSET if value is None else value

"""Tool registration and calling."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, MCPError
from ..protocol.tasks import CreateTaskResult
from ._memo import AnalysisMemo
from .context import Context
from .limiting import Limiter, Rate, ToolGuard
from .mrtr import InputRequired
from .results import CONTENT_LIKE, json_text, to_content
from .signature import ArgumentError, FunctionSignature, inspect_function, raw_signature, split_docstring
from .sync import SyncRunner

if TYPE_CHECKING:
    from .transforms import ToolTransform

__all__ = ["RegisteredTool", "ToolOptions", "ToolRegistry"]

logger = logging.getLogger("mcpkit.server")


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """How a function is published as a tool: the options of :meth:`MCPServer.tool`.

    Built once by the decorator and handed to :meth:`ToolRegistry.add`, and kept
    on the :class:`RegisteredTool`, so a new per-tool option is a field here
    plus a keyword of the decorator.
    """

    #: The tool's name; the function's ``__name__`` when not given.
    name: str | None = None
    title: str | None = None
    #: The description; the docstring's summary when not given.
    description: str | None = None
    #: Behaviour hints; a dict may use the wire (``readOnlyHint``) or Python spelling.
    annotations: t.ToolAnnotations | dict[str, Any] | None = None
    icons: list[t.Icon] | None = None
    #: Force (or suppress) an ``outputSchema`` whatever the return annotation says.
    structured_output: bool | None = None
    meta: dict[str, Any] | None = None
    #: Where a sync function runs (see :class:`SyncRunner`).
    threaded: bool | None = None
    #: Parameter -> HTTP header name, sent as ``Mcp-Param-{Name}`` (2026-07-28).
    headers: dict[str, str] | None = None
    #: A hand-written JSON Schema published instead of the one from the signature.
    input_schema: dict[str, Any] | None = None
    #: OAuth scopes a caller needs (HTTP with an authenticator).
    scopes: frozenset[str] = frozenset()
    #: A limit on this tool's calls (all callers together): ``"10/minute"``, a :class:`Rate`,
    #: or a :class:`Limiter` (to share one limit between tools, or choose its mode and Redis).
    rate_limit: str | Rate | Limiter | None = None
    #: Seconds a call may run before it is cancelled and answers ``isError`` "timed out".
    timeout: float | None = None
    #: Whether a call may be answered with a task handle (tasks extension): ``"optional"``
    #: (for clients that declared the extension), ``"required"`` (others get -32021), or None.
    task: Literal["optional", "required"] | None = None
    #: When a call becomes a task: at once (0), after that many seconds, or (None) only
    #: when the handler calls ``ctx.start_task()``.
    task_after: float | None = 0.0


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
    #: What it was registered with (a raw tool: its name and scopes only).
    options: ToolOptions = ToolOptions()
    #: Enforces ``rate_limit=`` and ``timeout=`` (None when the tool declares neither).
    guard: ToolGuard | None = None
    #: ``tools/list`` entries other than :attr:`definition`, made on first use (see :meth:`listed`).
    _listed: dict[str, t.Tool] = field(default_factory=dict)
    #: ``direct(dispatcher, request)``: the call of this tool, started without the dispatcher's
    #: middleware chain when the tool's owner can tell that nothing there applies to it (a
    #: proxied tool: :meth:`mcpkit.proxy.ProxyServer._direct`), else None (the ordinary way).
    direct: Callable[[Any, Any], Awaitable[t.CallToolResult] | None] | None = None

    def listed(self, *, modern: bool, tasks_everywhere: bool = False) -> t.Tool:
        """The tool as ``tools/list`` shows it: in 2025-11-25 with ``execution.taskSupport``
        when its calls may be tasks (server/tools "Tool-Level Negotiation"; absent means
        forbidden), in 2026-07-28 without ``execution``, which that revision's Tool lacks.
        ``tasks_everywhere``: a server-wide task policy makes every tool's tasks optional."""
        definition = self.definition
        if modern:
            if definition.execution is UNSET:
                return definition
            mode = "modern"
        else:
            task = self.options.task or ("optional" if tasks_everywhere else None)
            if task is None:
                return definition
            mode = task
        shown = self._listed.get(mode)
        if shown is None:
            if mode == "modern":
                shown = msgspec.structs.replace(definition, execution=UNSET)
            else:
                execution = definition.execution if definition.execution is not UNSET else {}
                shown = msgspec.structs.replace(definition, execution={**execution, "taskSupport": mode})
            self._listed[mode] = shown
        return shown

    @property
    def runs_inline(self) -> bool:
        """True when a call completes on the event loop without awaiting anything."""
        runner = self.runner
        if runner is None or self.guard is not None or self.options.task is not None:
            return False
        return runner.inline and self.signature.context_param is None

    async def call(
        self, arguments: dict[str, Any] | None, ctx: Context | None, *, guarded: bool = False
    ) -> t.CallToolResult:
        if self.guard is not None and not guarded:
            return await self.guard.run(self, arguments, ctx)
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
        except SystemExit as exc:
            return _failed(_exited(exc))
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
        except SystemExit as exc:
            return _failed(_exited(exc))
        return self._result(value)

    def _result(self, value: Any) -> t.CallToolResult:
        if isinstance(value, t.CallToolResult | CreateTaskResult | msgspec.Raw):
            # A proxied call its backend made a task of: the task goes back as it came;
            # a proxied result passed on undecoded (mcpkit.proxy.forward): as its bytes.
            return value  # type: ignore[return-value]
        if self.signature.output_schema is None or _is_content(value):
            return t.CallToolResult(content=to_content(value), is_error=False)
        try:
            structured = self.signature.structured(value)
        except (TypeError, ValueError) as exc:
            # A result that has no JSON form (an object msgspec and pydantic cannot convert) is
            # the tool's failure, as an exception it raised would be: an error result saying
            # why (the tool's author reads it in the client), never a bare "Internal error".
            logger.error("tool %r returned a result that cannot be sent", self.definition.name, exc_info=exc)
            return _failed(TypeError(f"The tool's result cannot be converted to JSON: {exc}"))
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


#: Set by middleware that handles tools' unexpected exceptions (``ErrorMasking``)
#: around ``call_next``: :func:`_failed` appends each exception with the result made
#: of it, so the middleware can tell that result from one a tool returned.
tool_failures: ContextVar[list[tuple[Exception, t.CallToolResult]] | None] = ContextVar(
    "mcpkit_tool_failures", default=None
)


def _exited(exc: SystemExit) -> Exception:
    # sys.exit() in a tool is most often a library's way to fail (argparse and click exit on
    # bad arguments): the call fails, as with any exception, and the server goes on serving.
    failure = RuntimeError(f"The tool called sys.exit({exc.code!r}); the call failed, the server runs on")
    failure.__cause__ = exc
    return failure


def _failed(exc: Exception) -> t.CallToolResult:
    text = str(exc) or type(exc).__name__
    result = t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)
    failures = tool_failures.get()
    if failures is not None:
        failures.append((exc, result))
    return result


class ToolRegistry:
    """The server's tools, in registration order (deterministic for caching)."""

    def __init__(self) -> None:
        #: The tools as served, by the name clients use.
        self.tools: dict[str, RegisteredTool] = {}
        self.on_change: Callable[[], None] | None = None
        #: Transforms by the name a tool is registered under (``MCPServer.transform_tool``).
        self.transforms: dict[str, ToolTransform] = {}
        #: Registered name -> served name, for the tools a transform renamed.
        self._served_as: dict[str, str] = {}
        self._analysed: AnalysisMemo[tuple[FunctionSignature, str | None]] = AnalysisMemo()

    def put(self, name: str, tool: RegisteredTool) -> None:
        """Serve ``tool``, registered as ``name``, as its transform (if any) shows it."""
        self.discard(name)
        transform = self.transforms.get(name)
        if transform is not None:
            tool = transform.apply(tool)
            served = tool.definition.name
            if served != name:
                if served in self.tools:
                    raise ValueError(f"tool {name!r} renamed {served!r} would shadow the tool of that name")
                self._served_as[name] = served
        self.tools[tool.definition.name] = tool

    def discard(self, name: str) -> bool:
        """Stop serving the tool registered as ``name``; whether there was one."""
        served = self._served_as.pop(name, name)
        return self.tools.pop(served, None) is not None

    def transform(self, name: str, transform: ToolTransform | None) -> None:
        """Apply ``transform`` to the tool registered as ``name``, now and whenever it is
        registered again (None removes it)."""
        current = self.tools.get(self._served_as.get(name, name))
        original = getattr(current, "inner", current)
        if transform is None:
            self.transforms.pop(name, None)
        else:
            if original is not None:
                transform.apply(original)  # refuse a bad transform before changing anything
                served = transform.name or name
                other = self.tools.get(served)
                if other is not None and other is not current:
                    raise ValueError(f"tool {name!r} renamed {served!r} would shadow the tool of that name")
            self.transforms[name] = transform
        if original is not None:
            self.put(name, original)
            self._changed()

    def add(self, fn: Callable[..., Any], options: ToolOptions = ToolOptions()) -> RegisteredTool:
        """Publish ``fn`` as a tool, replacing any tool of the same name."""
        sig, summary = self._analysed.get(fn, options.structured_output, lambda: _analyse(fn, options))
        tool_name = options.name or fn.__name__
        input_schema = _with_headers(options.input_schema or _own(sig.input_schema), options.headers or {})
        header_params = _header_params(tool_name, input_schema, force=bool(options.headers))
        annotations = options.annotations
        if isinstance(annotations, dict):
            # Accept the wire spelling (readOnlyHint) and the Python one (read_only_hint).
            annotations = msgspec.convert({_camel(k): v for k, v in annotations.items()}, t.ToolAnnotations)
        description = options.description
        definition = t.Tool(
            name=tool_name,
            input_schema=input_schema,
            title=_set(options.title),
            description=_set(description if description is not None else summary),
            output_schema=_set(sig.output_schema and _own(sig.output_schema)),
            annotations=_set(annotations),
            icons=_set(options.icons),
            meta=_set(options.meta),
        )
        if options.task not in (None, "optional", "required"):
            raise ValueError(f"task must be 'optional', 'required' or None, not {options.task!r}")
        if options.task_after is not None and options.task_after < 0:
            raise ValueError("task_after must be seconds >= 0 or None")
        guard = None
        threaded = options.threaded
        if options.task is not None and threaded is None:
            threaded = True  # a task runs in the background: a sync body must not block the loop
        if options.rate_limit is not None or options.timeout is not None:
            guard = ToolGuard(tool_name, options.rate_limit, options.timeout)
            if options.timeout is not None and threaded is None:
                threaded = True  # an inline call could not be interrupted by its timeout
        runner = None if sig.is_async else SyncRunner(fn, threaded)
        tool = RegisteredTool(fn, sig, definition, runner, header_params, options.scopes, options, guard)
        self.put(tool_name, tool)
        self._changed()
        return tool

    def add_raw(
        self, definition: t.Tool, handler: Callable[..., Any], *, scopes: frozenset[str] = frozenset()
    ) -> RegisteredTool:
        """Publish ``definition`` verbatim (``outputSchema`` included); ``handler(arguments=...,
        ctx=...)`` receives the arguments unbound and returns a :class:`CallToolResult`."""
        header_params = _header_params(definition.name, definition.input_schema, force=False)
        options = ToolOptions(name=definition.name, scopes=scopes)
        sig = raw_signature(definition.input_schema)
        tool = RegisteredTool(handler, sig, definition, None, header_params, scopes, options)
        self.put(definition.name, tool)
        self._changed()
        return tool

    def remove(self, name: str) -> None:
        """Remove the tool registered as ``name`` (or served as ``name``)."""
        registered = next((k for k, v in self._served_as.items() if v == name), name)
        if not self.discard(registered):
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


def _analyse(fn: Callable[..., Any], options: ToolOptions) -> tuple[FunctionSignature, str | None]:
    sig = inspect_function(fn, context_types=(Context,), structured_output=options.structured_output)
    return sig, split_docstring(fn)[0]


def _own(schema: Any) -> Any:
    """A copy of a schema the analysis memo may share between tools of one function: each
    tool's definition stays its own to change. Its dicts and lists are copied; the values in
    them (a default such as ``inf`` included) are kept as they are."""
    if isinstance(schema, dict):
        return {key: _own(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_own(value) for value in schema]
    return schema


def _header_params(
    tool_name: str, input_schema: dict[str, Any], *, force: bool
) -> dict[str, tuple[str, ...]] | None:
    """``x-mcp-header`` name -> argument path, checking the schema's header rules.

    Only schemas that mention ``x-mcp-header`` (or tools given ``headers=``) pay
    for the HTTP rules, which keeps start-up fast.
    """
    if not force and b"x-mcp-header" not in msgspec.json.encode(input_schema):
        return None
    from ..protocol import http

    problem = http.invalid_x_mcp_headers(input_schema)
    if problem is not None:
        raise ValueError(f"tool {tool_name!r}: {problem}")
    return http.header_params(input_schema) or None


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

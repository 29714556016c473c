"""Turn a Python function's signature into MCP tool schemas and validate tool-call arguments.

Everything expensive (type analysis, JSON Schema generation, building the msgspec ``Struct`` used
for conversion) happens once in :func:`inspect_function`; :meth:`FunctionSignature.bind` is the
per-call hot path and only runs precomputed closures.

pydantic is optional: it is never imported by this module.  A pydantic type can only appear in an
annotation if the user already imported pydantic, so we look it up in ``sys.modules``.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
import msgspec.inspect

from ._integral import ints_for_integral_floats
from ._pydantic import is_field_info, needs_pydantic, pydantic_schema, pydantic_validator, to_json
from ._schema_refs import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_ONE, inline_defs
from .docstrings import split_docstring, unwrap

__all__ = ["ArgumentError", "FunctionSignature", "inspect_function", "raw_signature", "split_docstring"]

_REF = "#/$defs/{name}"
_MISSING: Any = object()
_NONE_TYPE = type(None)
_FAST_TYPES = (str, int, float, bool)
_CONSTRAINTS = ("gt", "ge", "lt", "le", "multiple_of", "pattern", "min_length", "max_length")
_UNSTRUCTURED = (str, bytes, bytearray, None, _NONE_TYPE, Any, object, inspect.Parameter.empty)


class ArgumentError(Exception):
    """Arguments did not match the signature; ``str(exc)`` is a clear, user-facing message naming the
    parameter(s)."""


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    """The MCP view of a function: its schemas plus precompiled argument binding / result dumping."""

    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    wraps_output: bool
    context_param: str | None
    is_async: bool
    _bind: Callable[[Mapping[str, Any] | None], dict[str, Any]] = field(repr=False, compare=False)
    _dump: Callable[[Any], Any] = field(repr=False, compare=False)

    def bind(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate and convert JSON ``arguments`` into keyword arguments for the function.

        The context parameter is never included (the caller injects it).  Unknown argument names
        are ignored silently rather than rejected, because several MCP clients send extra keys
        (e.g. progress tokens or UI state); a client can never inject the context parameter this
        way.  Omitted optional parameters are filled with their defaults.  Strings are never
        coerced to numbers; JSON integers are accepted for ``float`` parameters, and numbers with a
        zero fractional part (``2.0``, an integer to JSON Schema) for ``int`` ones.

        Raises:
            ArgumentError: the arguments do not match the signature.
        """
        return self._bind(arguments)

    def structured(self, value: Any) -> Any:
        """Return JSON-able structured content for a return value, wrapped in ``{"result": ...}``
        when :attr:`wraps_output` is true.  Only meaningful when :attr:`output_schema` is not None."""
        return self._dump(value)


# --------------------------------------------------------------------------------------- pydantic


# ------------------------------------------------------------------------------------ parameters


@dataclass(slots=True)
class _Param:
    name: str
    annotation: Any  # original annotation, handed to pydantic when it owns the type
    mtype: Any  # msgspec type (base type plus constraint Meta); Any when pydantic converts
    description: str | None = None
    default: Any = _MISSING
    default_factory: Callable[[], Any] | None = None
    validate: Callable[[Any], Any] | None = None  # pydantic validator, run after msgspec
    fast: bool = False


def _analyze_param(param: inspect.Parameter) -> _Param:
    annotation = param.annotation
    if annotation is inspect.Parameter.empty or annotation is object:
        annotation = Any
    base, extras = annotation, []
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
    p = _Param(param.name, annotation, base)
    if param.default is not inspect.Parameter.empty:
        p.default = param.default
        if is_field_info(param.default):  # `x: int = Field(3, description=...)`
            extras.append(param.default)
            p.default = _MISSING
    metas: list[msgspec.Meta] = []
    constraints: dict[str, Any] = {}
    for extra in extras:
        if isinstance(extra, str):
            p.description = p.description or extra
        elif isinstance(extra, msgspec.Meta):
            metas.append(extra)
            p.description = p.description or extra.description
        elif is_field_info(extra):
            p.description = p.description or extra.description
            for item in extra.metadata:
                constraints.update(_constraints_of(item))
            if not extra.is_required():
                if extra.default_factory is not None:
                    p.default_factory = extra.default_factory
                else:
                    p.default = extra.default
        elif type(extra).__module__.startswith("annotated_types"):
            constraints.update(_constraints_of(extra))
    if constraints:
        metas.append(msgspec.Meta(**constraints))
    if needs_pydantic(annotation):
        p.mtype, p.validate = Any, pydantic_validator(param.name, annotation, base)
    elif base not in _FAST_TYPES and not _msgspec_supports(base):
        raise TypeError(f"Unsupported type for parameter {param.name!r}: {annotation!r}")
    else:
        p.mtype = Annotated[(base, *metas)] if metas else base
        p.fast = (
            base in _FAST_TYPES
            and p.default_factory is None
            and not any(getattr(m, key, None) is not None for m in metas for key in _CONSTRAINTS)
        )
    return p


def _constraints_of(obj: Any) -> dict[str, Any]:
    return {key: val for key in _CONSTRAINTS if (val := getattr(obj, key, None)) is not None}


@functools.cache
def _plain_schema(tp: type) -> dict[str, Any]:
    """msgspec's schema of ``str``, ``int``, ``float`` or ``bool``, asked once: generating it took
    ~25 µs per parameter, the largest share of registering a tool (10,000 tools: ~0.5 s)."""
    (schema,), _ = msgspec.json.schema_components([tp], ref_template=_REF)
    return dict(schema)


def _msgspec_supports(tp: Any) -> bool:
    try:
        msgspec.json.schema(tp)
    except TypeError:
        return False
    return True


def _is_context(annotation: Any, context_types: tuple[type, ...]) -> bool:
    if not context_types or annotation is inspect.Parameter.empty:
        return False
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not _NONE_TYPE]
        return len(members) == 1 and _is_context(members[0], context_types)
    cls = get_origin(annotation) or annotation  # generic contexts, e.g. Context[Session]
    return isinstance(cls, type) and issubclass(cls, context_types)


# ------------------------------------------------------------------------------------- binding


def _identity(value: Any) -> Any:
    return value


def _make_binder(name: str, params: list[_Param]) -> Callable[[Mapping[str, Any] | None], dict[str, Any]]:
    struct_fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for p in params:
        if p.default_factory is not None:
            struct_fields.append((p.name, p.mtype, msgspec.field(default_factory=p.default_factory)))
        elif p.default is _MISSING:
            struct_fields.append((p.name, p.mtype))
        elif isinstance(p.default, list | dict | set | bytearray):
            # msgspec refuses shared mutable defaults; hand out the very object Python would.
            factory: Callable[[], Any] = functools.partial(_identity, p.default)
            struct_fields.append((p.name, p.mtype, msgspec.field(default_factory=factory)))
        else:
            struct_fields.append((p.name, p.mtype, p.default))
    all_fast = all(p.fast for p in params)
    # Only the slow path converts through the Struct. For all-fast signatures (str/int/float/bool
    # without constraints: most tools) it serves only malformed arguments, so it is built on first
    # use: defstruct cost ~30 µs per tool at registration (10,000 tools: ~0.3 s of start-up).
    args_types: list[Any] = (
        [] if all_fast else [msgspec.defstruct(f"{name}_arguments", struct_fields, kw_only=True)]
    )
    required = [p.name for p in params if p.default is _MISSING and p.default_factory is None]
    post = [(p.name, p.validate) for p in params if p.validate is not None]
    convert, asdict, validation_error = msgspec.convert, msgspec.structs.asdict, msgspec.ValidationError

    def bind_slow(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        if arguments is None:
            arguments = {}
        elif type(arguments) is not dict and isinstance(arguments, Mapping):
            arguments = dict(arguments)
        if not args_types:
            args_types.append(msgspec.defstruct(f"{name}_arguments", struct_fields, kw_only=True))
        try:
            out: dict[str, Any] = asdict(convert(arguments, args_types[0], strict=True))
        except validation_error as exc:
            # 1.0 is an integer to JSON Schema, so to the inputSchema; see _integral (error path only)
            if len(args_types) == 1:
                args_types.append(msgspec.inspect.type_info(args_types[0]))
            fixed = ints_for_integral_floats(arguments, args_types[1])
            if fixed is arguments:
                raise _argument_error(str(exc), arguments, required) from exc
            try:
                out = asdict(convert(fixed, args_types[0], strict=True))
            except validation_error as exc2:
                raise _argument_error(str(exc2), arguments, required) from exc2
        for pname, validate in post:
            if pname in arguments:  # defaults are trusted, like in a plain Python call
                try:
                    out[pname] = validate(out[pname])
                except ValueError as exc:  # pydantic.ValidationError is a ValueError
                    raise _pydantic_error(pname, exc) from exc
        return out

    if not all_fast:
        return bind_slow
    spec = tuple((p.name, _strip_annotated(p.mtype), p.default) for p in params)

    # Exact type checks beat msgspec.convert (~150ns vs ~650ns for one str) and are sound because
    # JSON decoding only yields exact builtins; anything unusual falls back to the msgspec path,
    # which also produces the error message.
    def bind_fast(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        if arguments is None:
            arguments = {}
        elif type(arguments) is not dict:
            return bind_slow(arguments)
        out: dict[str, Any] = {}
        for pname, tp, default in spec:
            if pname in arguments:
                value = arguments[pname]
                if type(value) is tp:
                    out[pname] = value
                    continue
                if tp is float and type(value) is int:
                    try:
                        out[pname] = float(value)
                        continue
                    except OverflowError:
                        pass
                return bind_slow(arguments)
            if default is _MISSING:
                return bind_slow(arguments)
            out[pname] = default
        return out

    return bind_fast


_AT_PATH = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>.*)`)?$", re.DOTALL)
_TOP_KEY = re.compile(r"^\.(?P<name>\w+)(?P<rest>.*)$", re.DOTALL)


def _argument_error(message: str, arguments: Any, required: list[str]) -> ArgumentError:
    match = _AT_PATH.match(message)
    assert match is not None  # the pattern matches any string
    msg, path = match["msg"], match["path"]
    top = _TOP_KEY.match(path) if path else None
    if top is None:
        missing = [n for n in required if n not in arguments] if isinstance(arguments, Mapping) else []
        if msg.startswith("Object missing required field") and missing:
            quoted = ", ".join(f"'{n}'" for n in missing)
            return ArgumentError(f"Missing required argument{'s' if len(missing) > 1 else ''} {quoted}")
        return ArgumentError(f"Invalid arguments: {msg}")
    if top["rest"]:
        return ArgumentError(f"Invalid argument '{top['name']}': {msg} at `{path[1:]}`")
    return ArgumentError(f"Invalid argument '{top['name']}': {msg}")


def _pydantic_error(name: str, exc: ValueError) -> ArgumentError:
    errors: list[Any] = getattr(exc, "errors", list)()
    if not errors:
        return ArgumentError(f"Invalid argument '{name}': {exc}")
    first = errors[0]
    loc = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in first.get("loc", ()))
    where = f" at `{name}{loc}`" if loc else ""
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return ArgumentError(f"Invalid argument '{name}': {first['msg']}{where}{more}")


# -------------------------------------------------------------------------------------- schemas


def _clean(schema: Any) -> Any:
    """Drop titles (generated from class/field names, they only add noise for the model) and empty
    ``required`` lists, walking only real sub-schemas so a *property* named "title" survives."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "required" and not value):
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            value = {k: _clean(v) for k, v in value.items()}
        elif key in SCHEMA_LISTS and isinstance(value, list):
            value = [_clean(v) for v in value]
        elif key in SCHEMA_ONE:
            value = _clean(value)
        out[key] = value
    return out


def _merge_defs(target: dict[str, Any], new: dict[str, Any]) -> None:
    for name, schema in new.items():
        if name in target and target[name] != schema:
            raise TypeError(f"Two different types share the JSON Schema name {name!r}; rename one of them")
        target[name] = schema


def _type_schema(tp: Any, mode: str, defs: dict[str, Any]) -> dict[str, Any]:
    """Schema for one type (msgspec first, pydantic when it owns the type); components go to defs."""
    if needs_pydantic(tp):
        schema = pydantic_schema(tp, mode)
        _merge_defs(defs, schema.pop("$defs", {}))
        return schema
    (schema,), components = msgspec.json.schema_components([tp], ref_template=_REF)
    _merge_defs(defs, components)
    return schema


def _input_schema(params: list[_Param], doc_params: dict[str, str]) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    # Plain str/int/float/bool parameters (no constraints: mtype is the bare type) take msgspec's
    # schema from a cache; only the others go through schema generation.
    msgspec_params = [p for p in params if p.validate is None and p.mtype not in _FAST_TYPES]
    by_name: dict[str, Any] = {}
    if msgspec_params:
        schemas, components = msgspec.json.schema_components(
            [p.mtype for p in msgspec_params], ref_template=_REF
        )
        _merge_defs(defs, components)
        by_name = {p.name: s for p, s in zip(msgspec_params, schemas, strict=True)}
    properties: dict[str, Any] = {}
    for p in params:
        if p.validate is None:
            schema = dict(by_name[p.name]) if p.name in by_name else dict(_plain_schema(p.mtype))
        else:
            schema = _type_schema(p.annotation, "validation", defs)
        description = p.description or doc_params.get(p.name)
        if description:  # the parameter's own description beats a model's docstring
            schema["description"] = description
        if p.default is not _MISSING:
            try:
                schema["default"] = to_json(p.default)
            except (TypeError, ValueError):
                pass  # not representable in JSON; the parameter is still optional
        properties[p.name] = schema
    result: dict[str, Any] = {"type": "object", "properties": properties}
    required = [p.name for p in params if p.default is _MISSING and p.default_factory is None]
    if required:
        result["required"] = required
    if defs:
        # Self-contained, as many hosts need (see _schema_refs): only recursion keeps $defs.
        result = inline_defs(result, defs)
    cleaned: dict[str, Any] = _clean(result)
    return cleaned


def _strip_annotated(tp: Any) -> Any:
    return get_args(tp)[0] if get_origin(tp) is Annotated else tp


def _is_content(tp: Any) -> bool:
    """Return types mentioning MCP content (``TextContent``, ``list[ImageContent | str]``,
    ``CallToolResult``...) are turned into content by the caller, never into structure."""
    if isinstance(tp, type) and getattr(tp, "__module__", "").startswith("mcpkit."):
        return True
    return any(_is_content(arg) for arg in get_args(tp))


def _is_unstructured(tp: Any) -> bool:
    tp = _strip_annotated(tp)
    if get_origin(tp) in (Union, types.UnionType):
        return all(_is_unstructured(a) for a in get_args(tp))
    return any(tp is u for u in _UNSTRUCTURED)


def _output(ret: Any, structured_output: bool | None) -> tuple[dict[str, Any] | None, bool]:
    if structured_output is False or _is_content(ret):
        return None, False
    if structured_output is None and _is_unstructured(ret):
        return None, False
    defs: dict[str, Any] = {}
    try:
        schema = _type_schema(Any if ret is inspect.Parameter.empty else ret, "serialization", defs)
    except TypeError:
        if structured_output:
            raise
        return None, False  # unknown return types are rendered as text by the caller
    # Inlined as the input schema is; outputSchema's root is then the object itself, not a $ref.
    kept: dict[str, Any] = {}
    if defs:
        schema = inline_defs(schema, defs)
        kept = schema.pop("$defs", {})
    wraps = schema.get("type") != "object"
    if wraps:
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if kept:
        schema["$defs"] = kept
    cleaned: dict[str, Any] = _clean(schema)
    return cleaned, wraps


# ----------------------------------------------------------------------------------- inspection


def _is_async(fn: Any) -> bool:
    target = unwrap(fn)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target):
        return True
    call = None if inspect.isroutine(target) or isinstance(target, type) else type(target).__call__
    return call is not None and inspect.iscoroutinefunction(call)


def raw_signature(input_schema: dict[str, Any]) -> FunctionSignature:
    """A signature that publishes ``input_schema`` verbatim and passes arguments
    through unbound, as ``arguments=`` (with the context as ``ctx=``)."""
    return FunctionSignature(
        input_schema=input_schema,
        output_schema=None,
        wraps_output=False,
        context_param="ctx",
        is_async=True,
        _bind=lambda arguments: {"arguments": dict(arguments or {})},
        _dump=lambda value: value,
    )


def inspect_function(
    fn: Callable[..., Any],
    *,
    context_types: tuple[type, ...] = (),
    structured_output: bool | None = None,
) -> FunctionSignature:
    """Analyse ``fn`` once and return its schemas and a precompiled argument binder.

    Args:
        fn: a function, method, ``functools.partial`` or callable object, sync or async.
        context_types: a parameter annotated with one of these types (a subclass, or ``Optional``
            of it) is the context parameter; it is left out of the schema and of :meth:`bind`.
        structured_output: False never produces an output schema; True always does (wrapping
            non-object types as ``{"result": ...}``), except for MCP content types; None decides
            from the return annotation (no schema for str, bytes, None, Any, unannotated,
            unsupported types and MCP content types).

    Raises:
        TypeError: ``*args``/``**kwargs``, positional-only or underscore-prefixed parameters,
            unresolvable annotations, or parameter types that can't be converted from JSON.
    """
    name = getattr(unwrap(fn), "__name__", type(fn).__name__)
    try:
        sig = inspect.signature(fn, eval_str=True)
    except (NameError, SyntaxError) as exc:
        raise TypeError(f"Cannot resolve the type annotations of {name!r}: {exc}") from exc
    bound_by_partial = fn.keywords if isinstance(fn, functools.partial) else {}
    _, doc_params = split_docstring(fn)
    context_param: str | None = None
    params: list[_Param] = []
    for param in sig.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise TypeError(f"{name!r}: {star}{param.name} is not supported in tools; declare each parameter")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{name!r}: positional-only parameter {param.name!r} is not supported")
        if param.name in bound_by_partial:
            continue
        if _is_context(param.annotation, context_types):
            if context_param is not None:
                raise TypeError(f"{name!r} has two context parameters: {context_param!r} and {param.name!r}")
            context_param = param.name
            continue
        if param.name.startswith("_"):
            raise TypeError(f"{name!r}: parameter names may not start with an underscore ({param.name!r})")
        params.append(_analyze_param(param))
    output_schema, wraps = _output(sig.return_annotation, structured_output)
    dump: Callable[[Any], Any] = (lambda value: {"result": to_json(value)}) if wraps else to_json
    return FunctionSignature(
        input_schema=_input_schema(params, doc_params),
        output_schema=output_schema,
        wraps_output=wraps,
        context_param=context_param,
        is_async=_is_async(fn),
        _bind=_make_binder(name, params),
        _dump=dump,
    )

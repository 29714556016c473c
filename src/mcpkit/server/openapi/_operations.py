"""An OpenAPI operation, read once: where each argument goes in the HTTP request, and the
tool (or resource) definition it becomes."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from msgspec import UNSET

from ...protocol import types as t
from ._document import OpenAPIError, Resolver

__all__ = ["Argument", "Body", "Operation", "RouteMap", "read_operations"]

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: OpenAPI 3.x, Parameter Object: header parameters with these names "SHALL be ignored".
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
#: The spec's tool-name rule (2025-11-25 "Tool names"): 1-128 of these characters.
_TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
_JSON = re.compile(r"^application/(?:[\w.+-]+\+)?json\b")
_FORM = "application/x-www-form-urlencoded"

Location = Literal["path", "query", "header", "cookie", "body"]


@dataclass(frozen=True, slots=True)
class RouteMap:
    """Where the operations it matches go: ``"tool"`` (the default for everything),
    ``"resource"`` (a GET becomes a resource, or a resource template when its path has
    parameters) or ``"exclude"``. The first map that matches an operation decides.

    ``methods`` (``"*"`` or e.g. ``["GET"]``), ``pattern`` (a regular expression searched
    in the path template, e.g. ``r"^/admin/"``) and ``tags`` (all must be on the
    operation) must all match.
    """

    kind: Literal["tool", "resource", "exclude"] = "tool"
    methods: Collection[str] | Literal["*"] = "*"
    pattern: str = ""
    tags: Collection[str] = ()

    def matches(self, method: str, path: str, tags: Collection[str]) -> bool:
        if self.methods != "*" and method.upper() not in {m.upper() for m in self.methods}:
            return False
        if self.pattern and not re.search(self.pattern, path):
            return False
        return all(tag in tags for tag in self.tags)


@dataclass(frozen=True, slots=True)
class Argument:
    """One tool argument: ``prop`` in the arguments, ``name`` at ``location`` in the request."""

    prop: str
    name: str
    location: Location
    required: bool
    style: str = ""
    explode: bool = True


@dataclass(frozen=True, slots=True)
class Body:
    """The request body: sent as JSON or a form, whole (one ``body`` argument) or flattened."""

    content_type: str
    whole: bool
    required: bool


@dataclass(slots=True)
class Operation:
    method: str
    path: str
    name: str
    kind: Literal["tool", "resource"]
    title: str | None
    description: str | None
    arguments: list[Argument]
    body: Body | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    wraps_output: bool
    deprecated: bool = False
    tags: tuple[str, ...] = ()
    known: frozenset[str] = field(default_factory=frozenset)

    def tool(self) -> t.Tool:
        """The tool this operation is, with hints from its HTTP method."""
        method = self.method.upper()
        annotations = t.ToolAnnotations(
            title=self.title or UNSET,
            read_only_hint=method in ("GET", "HEAD", "OPTIONS"),
            destructive_hint=method == "DELETE",
            idempotent_hint=method in ("GET", "HEAD", "OPTIONS", "PUT", "DELETE"),
            open_world_hint=True,
        )
        return t.Tool(
            name=self.name,
            title=self.title or UNSET,
            description=self.description or UNSET,
            input_schema=self.input_schema,
            output_schema=self.output_schema if self.output_schema is not None else UNSET,
            annotations=annotations,
        )


def read_operations(
    resolver: Resolver,
    *,
    route_maps: Collection[RouteMap],
    names: Mapping[str, str],
    output_schemas: bool,
    configured_headers: Collection[str] = (),
) -> list[Operation]:
    """Every operation of the document that no route map excludes, in document order.

    Header parameters named in ``configured_headers`` are not arguments: configuration
    sends them (a model never supplies, nor sees, an API key a deployment holds).

    Raises :class:`OpenAPIError` on a name two operations would share (never silently
    shadowed) and on a non-GET routed to a resource.
    """
    ignored = _IGNORED_HEADERS | {h.lower() for h in configured_headers}
    found: list[Operation] = []
    owners: dict[str, str] = {}
    for path, item in resolver.document["paths"].items():
        item = resolver.deref(item)
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters", [])
        for method in HTTP_METHODS:
            spec = item.get(method)
            if not isinstance(spec, Mapping):
                continue
            tags = tuple(str(tag) for tag in spec.get("tags", ()))
            routed = next((m.kind for m in route_maps if m.matches(method, path, tags)), "tool")
            if routed == "exclude":
                continue
            kind: Literal["tool", "resource"] = "resource" if routed == "resource" else "tool"
            where = f"{method.upper()} {path}"
            if kind == "resource" and method != "get":
                raise OpenAPIError(f"only GET operations can be resources: {where}")
            op_id = spec.get("operationId")
            name = names.get(op_id, "") if isinstance(op_id, str) else ""
            name = tool_name(name or (op_id if isinstance(op_id, str) else f"{method}_{path}"))
            if name in owners:
                raise OpenAPIError(
                    f"{where} and {owners[name]} would both be named {name!r}; "
                    "rename one with names={operationId: name} or exclude it with a RouteMap"
                )
            owners[name] = where
            operation = _operation(resolver, method, path, spec, shared, name, kind, output_schemas, ignored)
            operation.tags = tags
            found.append(operation)
    return found


def tool_name(raw: str) -> str:
    """``raw`` within the spec's tool-name rule (letters, digits, ``_``, ``-``, ``.``; 1-128)."""
    name = _TOOL_NAME_BAD.sub("_", raw).strip("_") or "operation"
    return name[:128]


def _operation(
    resolver: Resolver,
    method: str,
    path: str,
    spec: Mapping[str, Any],
    shared: Any,
    name: str,
    kind: Literal["tool", "resource"],
    output_schemas: bool,
    ignored_headers: frozenset[str],
) -> Operation:
    where = f"{method.upper()} {path}"
    params: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in [*(shared or []), *spec.get("parameters", [])]:  # the operation's override the path's
        param = resolver.deref(raw)
        if isinstance(param, Mapping) and isinstance(param.get("name"), str):
            params[(str(param.get("in")), param["name"])] = param
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []

    def claim(wanted: str, location: str) -> str:
        prop = wanted if wanted not in properties else f"{wanted}__{location}"
        if prop in properties:
            raise OpenAPIError(f"{where}: two parameters would both be the argument {prop!r}")
        return prop

    for (location, pname), param in params.items():
        if location not in ("path", "query", "header", "cookie"):
            raise OpenAPIError(
                f"{where}: parameter {pname!r} is 'in: {location}', not path/query/header/cookie"
            )
        if location == "header" and pname.lower() in ignored_headers:
            continue
        schema = _param_schema(resolver, param)
        if param.get("description") and "description" not in schema:
            schema["description"] = param["description"]
        prop = claim(pname, location)
        properties[prop] = schema
        is_required = location == "path" or bool(param.get("required"))
        if is_required:
            required.append(prop)
        style = str(param.get("style") or ("simple" if location in ("path", "header") else "form"))
        explode = bool(param.get("explode", style == "form"))
        arguments.append(Argument(prop, pname, location, is_required, style, explode))  # type: ignore[arg-type]

    body = None
    request_body = resolver.deref(spec.get("requestBody")) if spec.get("requestBody") else None
    if isinstance(request_body, Mapping):
        body = _body(resolver, request_body, where, properties, required, arguments, claim)

    output_schema, wraps = (None, False)
    if output_schemas:
        output_schema, wraps = _output_schema(resolver, spec)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    # A recursive schema keeps "$ref": "#/$defs/..." pointing at the root: hoist its $defs there.
    defs: dict[str, Any] = {}
    for schema in properties.values():
        if isinstance(schema, dict) and "$defs" in schema:
            defs.update(schema.pop("$defs"))
    if defs:
        input_schema["$defs"] = defs
    if required:
        input_schema["required"] = required
    summary = spec.get("summary")
    description = "\n\n".join(str(p) for p in (summary, spec.get("description")) if p) or None
    return Operation(
        method=method,
        path=path,
        name=name,
        kind=kind,
        title=str(summary) if summary else None,
        description=description,
        arguments=arguments,
        body=body,
        input_schema=input_schema,
        output_schema=output_schema,
        wraps_output=wraps,
        deprecated=bool(spec.get("deprecated")),
        known=frozenset(properties),
    )


def _param_schema(resolver: Resolver, param: Mapping[str, Any]) -> dict[str, Any]:
    if "schema" in param:
        return resolver.schema(param["schema"])
    content = param.get("content")
    if isinstance(content, Mapping) and content:
        media = resolver.deref(next(iter(content.values())))
        if isinstance(media, Mapping) and "schema" in media:
            return resolver.schema(media["schema"])
    return {}


def _body(
    resolver: Resolver,
    request_body: Mapping[str, Any],
    where: str,
    properties: dict[str, Any],
    required: list[str],
    arguments: list[Argument],
    claim: Any,
) -> Body:
    content = request_body.get("content")
    if not isinstance(content, Mapping) or not content:
        raise OpenAPIError(f"{where}: the request body has no content")
    content_type = next((c for c in content if _JSON.match(c)), None)
    content_type = content_type or (_FORM if _FORM in content else next(iter(content)))
    media = resolver.deref(content[content_type]) or {}
    schema = resolver.schema(media.get("schema", {})) if isinstance(media, Mapping) else {}
    body_required = bool(request_body.get("required"))
    structured = _JSON.match(content_type) or content_type == _FORM
    fields = schema.get("properties")
    flat = (
        structured
        and isinstance(fields, Mapping)
        and bool(fields)
        and not any(k in schema for k in ("oneOf", "anyOf", "allOf", "additionalProperties", "$defs"))
    )
    if not flat:
        prop = claim("body", "body")
        if request_body.get("description") and "description" not in schema:
            schema = {**schema, "description": request_body["description"]}
        properties[prop] = schema if structured else {"type": "string", **schema}
        if body_required:
            required.append(prop)
        arguments.append(Argument(prop, "", "body", body_required))
        return Body(content_type, whole=True, required=body_required)
    inner_required = set(schema.get("required", ()))
    for fname, fschema in fields.items():  # type: ignore[union-attr]
        if isinstance(fschema, Mapping) and fschema.get("readOnly") is True:
            continue  # readOnly: "SHOULD NOT be sent as part of the request"
        prop = claim(fname, "body")
        properties[prop] = fschema
        is_required = body_required and fname in inner_required
        if is_required:
            required.append(prop)
        arguments.append(Argument(prop, fname, "body", is_required))
    return Body(content_type, whole=False, required=body_required)


def _output_schema(resolver: Resolver, spec: Mapping[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The JSON schema of the first 2xx response, as an object (wrapped in ``result`` when not)."""
    responses = spec.get("responses")
    if not isinstance(responses, Mapping):
        return None, False
    for code in sorted(str(c) for c in responses):
        if not (code.startswith("2") and len(code) == 3):
            continue
        response = resolver.deref(responses[code] if code in responses else responses[int(code)])
        content = response.get("content") if isinstance(response, Mapping) else None
        if not isinstance(content, Mapping):
            return None, False
        media_type = next((c for c in content if _JSON.match(c)), None)
        if media_type is None:
            return None, False
        media = resolver.deref(content[media_type])
        if not isinstance(media, Mapping) or "schema" not in media:
            return None, False
        schema = resolver.schema(media["schema"])
        if not schema:
            return None, False
        if schema.get("type") == "object" and not any(k in schema for k in ("oneOf", "anyOf")):
            return schema, False
        defs = schema.pop("$defs", None)
        wrapped: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        if defs:
            wrapped["$defs"] = defs
        return wrapped, True
    return None, False

"""An MCP server made from an HTTP API's OpenAPI 3.0/3.1 document.

::

    server = MCPServer.from_openapi("petstore.yaml", base_url="https://api.example.com/v1")
    server = MCPServer.from_asgi(fastapi_app)  # in process: no network, the app's lifespan runs

Every operation becomes a tool (named by its ``operationId``), unless a :class:`RouteMap`
makes a GET a resource (a template when its path has parameters) or excludes it. A
tool's arguments are the operation's path, query, header and cookie parameters and
its request body's properties; ``$ref`` s are inlined so hosts that drop ``$defs`` still
see every field. A 2xx answer is the result (structured when the operation documents a
JSON response); any other status is a tool error carrying the status and the body, so
the model reads why.

Credentials for the API come from configuration (``headers=``, or an ``httpx.AsyncClient``
of your own) or per call from the MCP caller (``auth=lambda principal: {...}``): the MCP
request's own token is never forwarded, since a token issued for this server must not be
replayed at another (MCP security best practices, "Token Passthrough").
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from msgspec import UNSET

from ...protocol import types as t
from ._asgi import asgi_lifespan
from ._calls import Backend, CallFailed, HeadersFor, build_request, resource_contents, tool_result
from ._document import OpenAPIError, Resolver, load_document
from ._operations import Operation, RouteMap, read_operations

if TYPE_CHECKING:
    from ..app import MCPServer
    from ..context import Context

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "HeadersFor",
    "OpenAPIError",
    "RouteMap",
    "from_asgi",
    "from_openapi",
]

#: The largest API response a call reads (decoded), before it fails as a tool error.
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024


def from_openapi(
    document: Mapping[str, Any] | str | Path,
    *,
    base_url: str | None = None,
    client: httpx.AsyncClient | None = None,
    name: str | None = None,
    route_maps: Collection[RouteMap] = (),
    names: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    auth: HeadersFor | None = None,
    timeout: float = 30.0,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    output_schemas: bool = True,
    uri_scheme: str = "api",
    **server_options: Any,
) -> MCPServer:
    """An :class:`MCPServer` whose tools and resources call the API ``document`` describes.

    Args:
        document: the OpenAPI document: a mapping, a file path, or JSON/YAML text.
        base_url: where the API is; defaults to the document's first absolute ``servers`` URL.
        client: an ``httpx.AsyncClient`` to call it with (your auth, proxies, TLS); it is
            never closed here. Without one, a client is made and closed with the server.
        name: the server's name (default: the document's ``info.title``).
        route_maps: the first that matches an operation decides tool, resource or exclude.
        names: tool (or resource) names by ``operationId``.
        headers: sent with every call (an API key, say); a header parameter of the same
            name is then not an argument of the tools.
        auth: headers per call from the caller's :class:`~mcpkit.protocol.auth.Principal`.
        timeout: seconds per API call.
        max_response_bytes: the largest answer read (decoded); larger ones are tool errors.
        output_schemas: publish each operation's 2xx JSON schema as the tool's output schema.
        uri_scheme: resources are ``<scheme>://<path>`` (``GET /users/{id}`` is ``api://users/{id}``).
        server_options: passed to :class:`MCPServer` (``lifespan=`` runs inside the API client's).

    Raises:
        OpenAPIError: the document is not OpenAPI 3.0/3.1, two operations would share a
            name, a ``$ref`` is not local or points nowhere, and so on.
    """
    return _build(
        load_document(document),
        base_url=base_url,
        client=client,
        transport=None,
        app=None,
        name=name,
        route_maps=route_maps,
        names=names or {},
        headers=headers or {},
        auth=auth,
        timeout=timeout,
        max_response_bytes=max_response_bytes,
        output_schemas=output_schemas,
        uri_scheme=uri_scheme,
        server_options=server_options,
    )


def from_asgi(
    app: Any,
    document: Mapping[str, Any] | str | Path | None = None,
    *,
    name: str | None = None,
    route_maps: Collection[RouteMap] = (),
    names: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    auth: HeadersFor | None = None,
    timeout: float = 30.0,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    output_schemas: bool = True,
    uri_scheme: str = "api",
    **server_options: Any,
) -> MCPServer:
    """:func:`from_openapi` for an ASGI application called in process (no network hop).

    ``document`` defaults to ``app.openapi()`` (FastAPI). The application's lifespan
    (startup and shutdown) runs with the server's, so its database pools and the like
    are ready before the first call.
    """
    if document is None:
        make = getattr(app, "openapi", None)
        if not callable(make):
            raise OpenAPIError("this ASGI app has no openapi() method: pass its OpenAPI document")
        document = make()
    return _build(
        load_document(document),
        base_url="http://asgi.local",
        client=None,
        transport=httpx.ASGITransport(app=app),
        app=app,
        name=name,
        route_maps=route_maps,
        names=names or {},
        headers=headers or {},
        auth=auth,
        timeout=timeout,
        max_response_bytes=max_response_bytes,
        output_schemas=output_schemas,
        uri_scheme=uri_scheme,
        server_options=server_options,
    )


def _build(
    document: dict[str, Any],
    *,
    base_url: str | None,
    client: httpx.AsyncClient | None,
    transport: httpx.AsyncBaseTransport | None,
    app: Any,
    name: str | None,
    route_maps: Collection[RouteMap],
    names: Mapping[str, str],
    headers: Mapping[str, str],
    auth: HeadersFor | None,
    timeout: float,
    max_response_bytes: int,
    output_schemas: bool,
    uri_scheme: str,
    server_options: dict[str, Any],
) -> MCPServer:
    from ..app import MCPServer

    if base_url is None and client is None:
        base_url = _document_base_url(document)
    resolver = Resolver(document)
    operations = read_operations(
        resolver,
        route_maps=route_maps,
        names=names,
        output_schemas=output_schemas,
        configured_headers=[*headers, *(client.headers if client is not None else ())],
    )
    backend = Backend(
        base_url=base_url,
        client=client,
        transport=transport,
        headers=headers,
        auth=auth,
        timeout=timeout,
        max_response_bytes=max_response_bytes,
    )
    user_lifespan = server_options.pop("lifespan", None)

    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[Any]:
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(backend.aclose)
            if app is not None:
                await stack.enter_async_context(asgi_lifespan(app))
            state = await stack.enter_async_context(user_lifespan(server)) if user_lifespan else None
            yield state

    info: Mapping[str, Any] = document["info"] if isinstance(document.get("info"), Mapping) else {}
    server = MCPServer(
        name or str(info.get("title") or "openapi"),
        str(info.get("version") or "0.1.0"),
        instructions=server_options.pop("instructions", None) or _instructions(info),
        lifespan=lifespan,
        **server_options,
    )
    for op in operations:
        if op.kind == "resource":
            _add_resource(server, op, backend, uri_scheme)
        else:
            _add_tool(server, op, backend)
    return server


def _document_base_url(document: Mapping[str, Any]) -> str:
    for entry in document.get("servers") or ():
        url = entry.get("url") if isinstance(entry, Mapping) else None
        if isinstance(url, str) and url.startswith(("http://", "https://")) and "{" not in url:
            return url
    raise OpenAPIError(
        "the document names no absolute server URL: pass base_url= (or an httpx client with one)"
    )


def _instructions(info: Mapping[str, Any]) -> str | None:
    description = info.get("description")
    return str(description) if description else None


def _add_tool(server: MCPServer, op: Operation, backend: Backend) -> None:
    async def call(arguments: dict[str, Any], ctx: Context) -> t.CallToolResult:
        try:
            request = build_request(op, arguments)
        except ValueError as exc:
            return t.CallToolResult(content=[t.TextContent(text=f"Invalid arguments: {exc}")], is_error=True)
        try:
            response, body = await backend.send(request, ctx.principal)
        except CallFailed as exc:
            return t.CallToolResult(content=[t.TextContent(text=str(exc))], is_error=True)
        return tool_result(op, response, body)

    server.add_raw_tool(op.tool(), call)


def _add_resource(server: MCPServer, op: Operation, backend: Backend, scheme: str) -> None:
    from ..resources import UriTemplate

    where = f"{op.method.upper()} {op.path}"
    blocking = [a.prop for a in op.arguments if a.required and a.location != "path"]
    if blocking or op.body is not None:
        raise OpenAPIError(
            f"{where} needs {blocking or 'a body'}, which a resource URI cannot carry: map it to a tool"
        )
    path_args = {a.name: a.prop for a in op.arguments if a.location == "path"}
    template = f"{scheme}://{op.path.lstrip('/')}"
    variables: dict[str, str] = {}  # template variable -> argument
    for pname, prop in path_args.items():
        var = "".join(c if c.isalnum() or c == "_" else "_" for c in pname)
        template = template.replace("{" + pname + "}", "{" + var + "}")
        variables[var] = prop
    title = op.title or UNSET
    description = op.description or UNSET
    if not variables:

        async def read(uri: str, ctx: Context) -> list[t.ResourceContents]:
            return await _read(op, backend, {}, uri, ctx)

        definition: t.Resource | t.ResourceTemplate = t.Resource(
            uri=template, name=op.name, title=title, description=description
        )
        server.add_raw_resource(definition, read)
        return
    try:
        matcher = UriTemplate(template)
    except ValueError as exc:
        raise OpenAPIError(f"{where} cannot be a resource template: {exc}") from None

    async def read_template(uri: str, ctx: Context) -> list[t.ResourceContents]:
        from urllib.parse import unquote

        values = matcher.match(uri) or {}
        return await _read(op, backend, {variables[k]: unquote(v) for k, v in values.items()}, uri, ctx)

    server.add_raw_resource(
        t.ResourceTemplate(uri_template=template, name=op.name, title=title, description=description),
        read_template,
    )


async def _read(
    op: Operation, backend: Backend, arguments: dict[str, Any], uri: str, ctx: Context
) -> list[t.ResourceContents]:
    from ...protocol.errors import INTERNAL_ERROR, MCPError
    from ..resources import ResourceNotFound

    try:
        response, body = await backend.send(build_request(op, arguments), ctx.principal)
    except CallFailed as exc:
        raise MCPError(INTERNAL_ERROR, str(exc)) from None
    if response.status_code in (404, 410):
        raise ResourceNotFound(uri)
    if not 200 <= response.status_code < 300:
        detail = body[:500].decode("utf-8", "replace")
        raise MCPError(
            INTERNAL_ERROR, f"{uri}: HTTP {response.status_code} {response.reason_phrase}: {detail}"
        )
    return resource_contents(uri, response, body)

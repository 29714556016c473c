"""MCP Apps on the server (``io.modelcontextprotocol/ui``, SEP-1865): UI resources and the
tools bound to them.

``server.add_ui_resource(uri, html=... | path=..., csp=..., permissions=...)`` (or the
``@server.ui_resource(uri, ...)`` decorator on a function returning the HTML) publishes a
``ui://`` resource served as ``text/html;profile=mcp-app`` with its ``_meta.ui`` in
``resources/list`` and in the ``resources/read`` contents, and declares the extension in the
capabilities (``server/discover`` and ``initialize`` alike).

``@server.tool(ui="ui://...")`` binds a tool to one: ``_meta.ui.resourceUri`` in
``tools/list`` (and ``visibility=["app"]`` for a tool only views may call). The resource must
be declared *before* the tool that names it: a tool bound to an unknown view is a
:class:`ValueError` at registration, so a typo never reaches a host (which "MUST use
``resources/read``" on that URI and would fail only when rendering).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from ..protocol import types as t
from ..protocol.apps import (
    APP_MIME_TYPE,
    APPS_EXTENSION,
    AppCsp,
    AppPermissions,
    UiResourceMeta,
    UiToolMeta,
    Visibility,
    check_csp_source,
    check_ui_uri,
)

if TYPE_CHECKING:
    from .app import MCPServer as Server

__all__ = ["CspInput", "PermissionsInput", "add_ui_resource", "remap_views", "tool_meta", "ui_resource"]

F = TypeVar("F", bound=Callable[..., Any])

#: ``csp=``: an :class:`AppCsp`, or its wire form (``{"connectDomains": [...], ...}``).
CspInput = AppCsp | Mapping[str, Sequence[str]]
#: ``permissions=``: an :class:`AppPermissions`, or feature names (``["camera", "clipboardWrite"]``).
PermissionsInput = AppPermissions | Iterable[str]

_PERMISSION_NAMES = {"camera", "microphone", "geolocation", "clipboardWrite"}


def _csp(value: CspInput | None) -> AppCsp | None:
    if value is None:
        return None
    if isinstance(value, AppCsp):
        csp = value
    else:
        if not isinstance(value, Mapping):
            raise TypeError(f"csp must be an AppCsp or a mapping, not {type(value).__name__}")
        try:
            csp = msgspec.convert(dict(value), AppCsp, strict=True, str_keys=True)
        except msgspec.ValidationError as exc:
            raise ValueError(f"csp: {exc}") from None
        unknown = set(value) - {"connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"}
        if unknown:
            raise ValueError(f"csp: unknown field(s) {sorted(unknown)} (SEP-1865 McpUiResourceCsp)")
    # A copy with every source checked: the caller's object is left as it was.
    checked: dict[str, Any] = {}
    for field in ("connect_domains", "resource_domains", "frame_domains", "base_uri_domains"):
        values = getattr(csp, field)
        if values is not msgspec.UNSET:
            checked[field] = [check_csp_source(v) for v in values]
    return msgspec.structs.replace(csp, **checked)


def _permissions(value: PermissionsInput | None) -> AppPermissions | None:
    if value is None:
        return None
    if isinstance(value, AppPermissions):
        return value
    if isinstance(value, str):
        raise TypeError("permissions: a list of feature names, not one string")
    names = list(value)
    unknown = [n for n in names if n not in _PERMISSION_NAMES]
    if unknown:
        raise ValueError(f"permissions: unknown feature(s) {unknown}; known: {sorted(_PERMISSION_NAMES)}")
    return AppPermissions(
        camera={} if "camera" in names else msgspec.UNSET,
        microphone={} if "microphone" in names else msgspec.UNSET,
        geolocation={} if "geolocation" in names else msgspec.UNSET,
        clipboard_write={} if "clipboardWrite" in names else msgspec.UNSET,
    )


def _ui_meta(
    csp: CspInput | None,
    permissions: PermissionsInput | None,
    domain: str | None,
    prefers_border: bool | None,
) -> dict[str, Any]:
    meta = UiResourceMeta(
        csp=_csp(csp) or msgspec.UNSET,
        permissions=_permissions(permissions) or msgspec.UNSET,
        domain=domain if domain is not None else msgspec.UNSET,
        prefers_border=prefers_border if prefers_border is not None else msgspec.UNSET,
    )
    if domain is not None and (not isinstance(domain, str) or not domain or any(c.isspace() for c in domain)):
        raise ValueError(f"domain must be a host name, not {domain!r}")
    ui: dict[str, Any] = msgspec.to_builtins(meta)
    return {"ui": ui} if ui else {}


def add_ui_resource(
    server: Server,
    uri: str,
    html: str | Callable[[], str | Awaitable[str]] | None = None,
    *,
    path: str | Path | None = None,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    csp: CspInput | None = None,
    permissions: PermissionsInput | None = None,
    domain: str | None = None,
    prefers_border: bool | None = None,
    meta: Mapping[str, Any] | None = None,
) -> None:
    """Publish the view at ``uri`` (``ui://...``): its HTML as a string, a function returning
    it (sync or async, called on every read) or a file ``path`` (read on every read, so an
    edited view shows without a restart; it must exist now). See :meth:`MCPServer.add_ui_resource`."""
    check_ui_uri(uri)
    if (html is None) == (path is None):
        raise ValueError(f"{uri}: give the view's HTML or its path, exactly one of them")
    source: Callable[[], Any]
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"{uri}: no such file {str(file)!r}")

        def source() -> str:
            return file.read_text(encoding="utf-8")

    elif isinstance(html, str):
        text = html

        def source() -> str:
            return text

    elif callable(html):
        source = html
    else:
        raise TypeError(f"{uri}: html is a string or a function returning one, not {type(html).__name__}")
    ui = _ui_meta(csp, permissions, domain, prefers_border)
    full_meta = {**(meta or {}), **ui} or None

    async def read(uri: str, ctx: Any = None) -> list[t.ResourceContents]:
        value = source()
        if inspect.isawaitable(value):
            value = await value
        if not isinstance(value, str):
            raise TypeError(f"the view {uri} must be HTML text, not {type(value).__name__}")
        # The read contents carry _meta.ui too: hosts take the policy from what they render.
        return [
            t.ResourceContents(uri=uri, text=value, mime_type=APP_MIME_TYPE, meta=full_meta or msgspec.UNSET)
        ]

    definition = t.Resource(
        uri=uri,
        name=name or uri[len("ui://") :],
        title=title if title is not None else msgspec.UNSET,
        description=description if description is not None else msgspec.UNSET,
        mime_type=APP_MIME_TYPE,
        meta=full_meta or msgspec.UNSET,
    )
    server.add_raw_resource(definition, read)
    if APPS_EXTENSION not in server.extensions:
        server.declare_extension(APPS_EXTENSION, {})


def ui_resource(server: Server, uri: str, **options: Any) -> Callable[[F], F]:
    """The decorator form of :func:`add_ui_resource`: the function returns the HTML."""

    def register(fn: F) -> F:
        if not options.get("description") and fn.__doc__:
            options["description"] = inspect.cleandoc(fn.__doc__)
        add_ui_resource(server, uri, fn, **options)
        return fn

    return register


def tool_meta(
    server: Server,
    tool: str | None,
    ui: str | UiToolMeta | None,
    visibility: Sequence[Visibility] | None,
    meta: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """``meta`` with ``_meta.ui`` for a tool bound to the view ``ui`` (which must be a UI
    resource declared on ``server``) and/or with ``visibility``."""
    if ui is None and visibility is None:
        return dict(meta) if meta is not None else None
    bound = msgspec.structs.replace(ui) if isinstance(ui, UiToolMeta) else UiToolMeta()
    if isinstance(ui, str):
        bound.resource_uri = ui
    elif ui is not None and not isinstance(ui, UiToolMeta):
        raise TypeError(f"ui is a ui:// URI, not {type(ui).__name__}")
    if visibility is not None:
        if isinstance(visibility, str):
            raise TypeError('visibility is a list, for example ["app"]')
        chosen = list(dict.fromkeys(visibility))
        if not chosen or any(v not in ("model", "app") for v in chosen):
            raise ValueError(f'visibility lists "model" and/or "app", not {list(visibility)!r}')
        bound.visibility = chosen
    label = f"tool {tool!r}" if tool else "a tool"
    if isinstance(bound.resource_uri, str):
        check_ui_uri(bound.resource_uri)
        listed = server.list_ui_resources()
        if bound.resource_uri not in listed:
            raise ValueError(
                f"{label} is bound to {bound.resource_uri}, which is not a declared UI resource: "
                "declare it first with server.add_ui_resource() or @server.ui_resource()"
                + (f" (declared: {', '.join(sorted(listed))})" if listed else "")
            )
    return {**(meta or {}), "ui": msgspec.to_builtins(bound)}


def remap_views(meta: Any, uri: Callable[[str], str]) -> Any:
    """A tool's ``_meta`` with the view it names (``_meta.ui.resourceUri``, and the deprecated
    flat key) passed through ``uri``: for a mounted server, whose resources the parent serves
    under other URIs (:mod:`mcpkit.server.mount`). Anything else is returned as it was."""
    if not isinstance(meta, Mapping):
        return meta
    out = dict(meta)
    ui = out.get("ui")
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        out["ui"] = {**ui, "resourceUri": uri(ui["resourceUri"])}
    legacy = out.get("ui/resourceUri")
    if isinstance(legacy, str):
        out["ui/resourceUri"] = uri(legacy)
    return out

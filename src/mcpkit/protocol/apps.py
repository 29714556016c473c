"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension, SEP-1865, stable 2026-01-26): the
names, the ``_meta.ui`` shapes of UI resources and of the tools bound to them, and the
host-side checks built from them (the Content-Security-Policy of a view, its iframe
``allow`` list).

Sans-IO: nothing here reads files or talks to anyone. The server side is
:mod:`mcpkit.server.apps`; the Inspector's host side is ``mcpkit.inspector._apps``.

What the extension says, in short (SEP-1865 "UI Resource Format", "Resource Discovery"):

- a UI resource has a ``ui://`` URI and the MIME type ``text/html;profile=mcp-app``, its
  ``_meta.ui`` carries ``csp`` (``connectDomains``, ``resourceDomains``, ``frameDomains``,
  ``baseUriDomains``), ``permissions`` (``camera``, ``microphone``, ``geolocation``,
  ``clipboardWrite``), ``domain`` and ``prefersBorder``;
- a tool points at it with ``_meta.ui.resourceUri`` (the flat ``_meta["ui/resourceUri"]`` is
  deprecated: read, never written here) and says who may call it with
  ``_meta.ui.visibility`` (``["model", "app"]`` when absent).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .types.base import WireStruct

__all__ = [
    "APPS_CLIENT_CAPABILITY",
    "APPS_EXTENSION",
    "APPS_PROTOCOL_VERSION",
    "APP_MIME_TYPE",
    "DEFAULT_VISIBILITY",
    "LEGACY_RESOURCE_URI_KEY",
    "UI_SCHEME",
    "AppCsp",
    "AppPermissions",
    "UiResourceMeta",
    "UiToolMeta",
    "Visibility",
    "allow_attribute",
    "check_csp_source",
    "check_ui_uri",
    "client_supports_apps",
    "content_security_policy",
    "is_ui_uri",
    "resource_meta",
    "tool_ui",
    "visible_to",
]

#: The extension's identifier, in ``capabilities.extensions`` (SEP-1865 "Extension Identifier").
APPS_EXTENSION = "io.modelcontextprotocol/ui"
#: The MIME type of an HTML view (the only content type of the 2026-01-26 revision).
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: The revision of the view <-> host ``postMessage`` dialect (``ui/initialize``'s ``protocolVersion``).
APPS_PROTOCOL_VERSION = "2026-01-26"
#: The URI scheme of UI resources ("URI MUST start with ``ui://``").
UI_SCHEME = "ui://"
#: The deprecated flat key a tool once used for its view ("will be removed before GA").
LEGACY_RESOURCE_URI_KEY = "ui/resourceUri"
#: What a host declares in ``capabilities.extensions[APPS_EXTENSION]`` (SEP-1865 "Client
#: Capabilities"): the view MIME types it renders, which must include :data:`APP_MIME_TYPE`.
APPS_CLIENT_CAPABILITY: dict[str, Any] = {"mimeTypes": [APP_MIME_TYPE]}

Visibility = Literal["model", "app"]
#: Who may see and call a tool when ``_meta.ui.visibility`` is absent.
DEFAULT_VISIBILITY: tuple[Visibility, ...] = ("model", "app")

_MAX_URI = 2048


class AppCsp(WireStruct, kw_only=True):
    """``_meta.ui.csp``: the origins a view needs. Empty or absent means none (deny)."""

    #: fetch/XHR/WebSocket targets (``connect-src``).
    connect_domains: list[str] | UnsetType = UNSET
    #: scripts, styles, images, fonts, media (``script-src``, ``style-src``, ``img-src``...).
    resource_domains: list[str] | UnsetType = UNSET
    #: nested iframes (``frame-src``).
    frame_domains: list[str] | UnsetType = UNSET
    #: ``<base href>`` targets (``base-uri``).
    base_uri_domains: list[str] | UnsetType = UNSET


class AppPermissions(WireStruct, kw_only=True):
    """``_meta.ui.permissions``: browser features a view asks for (each an empty object)."""

    camera: dict[str, Any] | UnsetType = UNSET
    microphone: dict[str, Any] | UnsetType = UNSET
    geolocation: dict[str, Any] | UnsetType = UNSET
    clipboard_write: dict[str, Any] | UnsetType = UNSET


class UiResourceMeta(WireStruct, kw_only=True):
    """``_meta.ui`` of a UI resource (in ``resources/list`` and in its ``resources/read`` contents)."""

    csp: AppCsp | UnsetType = UNSET
    permissions: AppPermissions | UnsetType = UNSET
    #: A dedicated sandbox origin; its format is the host's to define.
    domain: str | UnsetType = UNSET
    #: ``True``: the host draws a border and background; ``False``: it does not.
    prefers_border: bool | UnsetType = UNSET


class UiToolMeta(WireStruct, kw_only=True):
    """``_meta.ui`` of a tool: the view it renders with, and who may call it."""

    resource_uri: str | UnsetType = UNSET
    visibility: list[Visibility] | UnsetType = UNSET


def client_supports_apps(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a client's capabilities declare the apps extension with HTML views: its
    ``extensions[APPS_EXTENSION].mimeTypes`` includes :data:`APP_MIME_TYPE` (SEP-1865 "Client
    Capabilities": a host that renders views "MUST include" it; a declaration without it
    renders none of this revision's views)."""
    if not capabilities:
        return False
    extensions = capabilities.get("extensions")
    declared = extensions.get(APPS_EXTENSION) if isinstance(extensions, Mapping) else None
    if not isinstance(declared, Mapping):
        return False
    types = declared.get("mimeTypes")
    return isinstance(types, list) and APP_MIME_TYPE in types


def is_ui_uri(uri: object) -> bool:
    """Whether ``uri`` is a ``ui://`` URI with something after the scheme."""
    return isinstance(uri, str) and uri.startswith(UI_SCHEME) and len(uri) > len(UI_SCHEME)


def check_ui_uri(uri: object) -> str:
    """``uri`` if it is a usable UI resource URI, else :class:`ValueError` saying why."""
    if not isinstance(uri, str):
        raise ValueError(f"a UI resource URI is a string, not {type(uri).__name__}")
    if not is_ui_uri(uri):
        raise ValueError(f"a UI resource URI starts with 'ui://' (SEP-1865), not {uri!r}")
    if len(uri) > _MAX_URI or any(c.isspace() or ord(c) < 0x20 or c in "{}" for c in uri):
        raise ValueError(f"{uri!r}: a UI resource URI has no whitespace, control characters or '{{}}'")
    return uri


# -- CSP sources ------------------------------------------------------------------

# One origin: scheme, host (optionally a leading "*." wildcard), optional port. Nothing
# else is accepted: no keywords ('unsafe-eval', 'self'), no bare "*" or scheme-only
# sources, no paths, and never ';' or ',' (which would inject directives into the policy).
_SOURCE = re.compile(
    r"^(?P<scheme>https|http|wss|ws)://"
    r"(?P<host>(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
    r"|\[[0-9a-f:.]+\])"
    r"(?P<port>:(\d{1,5}|\*))?/?$",
    re.IGNORECASE,
)


def check_csp_source(source: object) -> str:
    """``source`` as a CSP source expression if it is one origin (``https://api.example.com``,
    ``https://*.example.com``, ``wss://host:8443``), else :class:`ValueError`."""
    if not isinstance(source, str) or not _SOURCE.match(source):
        raise ValueError(
            f"{source!r} is not an origin a view may be allowed (scheme://host[:port], "
            "http(s) or ws(s), optionally 'https://*.example.com')"
        )
    return source.rstrip("/").lower()


def _sources(values: Iterable[str] | UnsetType, problems: list[str], field: str) -> list[str]:
    out: list[str] = []
    if isinstance(values, UnsetType):
        return out
    for value in values:
        try:
            source = check_csp_source(value)
        except ValueError as exc:
            problems.append(f"csp.{field}: {exc}")
            continue
        if source not in out:
            out.append(source)
    return out


def content_security_policy(
    csp: AppCsp | None, *, sandbox: str | None = "allow-scripts"
) -> tuple[str, list[str]]:
    """The Content-Security-Policy a host serves a view with, and what it refused.

    Built per SEP-1865 "Content Security Policy Enforcement", further restricted (hosts
    "MAY further restrict but MUST NOT allow undeclared domains"): no ``'self'`` anywhere
    (the host's own origin is not the view's to reach), ``connect-src 'none'``,
    ``frame-src 'none'`` and ``base-uri 'none'`` unless domains are declared,
    ``object-src``/``form-action``/``worker-src 'none'``. Declared sources that are not
    plain origins are dropped and named in the second item. ``sandbox`` adds the CSP
    ``sandbox`` directive, so the document gets an opaque origin however it is loaded.
    """
    problems: list[str] = []
    c = csp or AppCsp()
    connect = _sources(c.connect_domains, problems, "connectDomains")
    resource = _sources(c.resource_domains, problems, "resourceDomains")
    frame = _sources(c.frame_domains, problems, "frameDomains")
    base = _sources(c.base_uri_domains, problems, "baseUriDomains")

    def join(*parts: str) -> str:
        return " ".join(p for p in parts if p)

    extra = " ".join(resource)
    directives = [
        "default-src 'none'",
        join("script-src 'unsafe-inline'", extra),
        join("style-src 'unsafe-inline'", extra),
        join("img-src data: blob:", extra),
        join("font-src data:", extra),
        join("media-src data: blob:", extra),
        "connect-src " + (" ".join(connect) or "'none'"),
        "frame-src " + (" ".join(frame) or "'none'"),
        "base-uri " + (" ".join(base) or "'none'"),
        "object-src 'none'",
        "worker-src 'none'",
        "manifest-src 'none'",
        "form-action 'none'",
        "frame-ancestors 'self'",
    ]
    if sandbox is not None:
        directives.insert(0, f"sandbox {sandbox}".strip())
    return "; ".join(directives), problems


_PERMISSION_FEATURES = (
    ("camera", "camera"),
    ("microphone", "microphone"),
    ("geolocation", "geolocation"),
    ("clipboard_write", "clipboard-write"),
)


def allow_attribute(permissions: AppPermissions | None) -> str:
    """The iframe ``allow`` attribute (Permissions Policy) for what a view asked for."""
    if permissions is None:
        return ""
    granted = [feature for attr, feature in _PERMISSION_FEATURES if getattr(permissions, attr) is not UNSET]
    return "; ".join(f"{feature} 'src'" for feature in granted)


# -- reading _meta.ui -------------------------------------------------------------------


def resource_meta(meta: Mapping[str, Any] | UnsetType | None) -> UiResourceMeta | None:
    """The ``_meta.ui`` of a UI resource or its contents, or ``None`` when absent.

    A malformed ``_meta.ui`` raises :class:`ValueError` (a host must not guess a policy).
    """
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    if ui is None:
        return None
    try:
        return msgspec.convert(ui, UiResourceMeta)
    except msgspec.ValidationError as exc:
        raise ValueError(f"_meta.ui of a UI resource: {exc}") from None


def tool_ui(meta: Mapping[str, Any] | UnsetType | None) -> UiToolMeta | None:
    """A tool's ``_meta.ui`` (its view and visibility), or ``None`` when it has no view and
    no visibility. The deprecated flat ``_meta["ui/resourceUri"]`` is read too. Malformed
    fields raise :class:`ValueError`."""
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    parsed: UiToolMeta | None = None
    if ui is not None:
        try:
            parsed = msgspec.convert(ui, UiToolMeta)
        except msgspec.ValidationError as exc:
            raise ValueError(f"_meta.ui of a tool: {exc}") from None
    legacy = meta.get(LEGACY_RESOURCE_URI_KEY)
    if isinstance(legacy, str) and (parsed is None or parsed.resource_uri is UNSET):
        parsed = parsed or UiToolMeta()
        parsed.resource_uri = legacy
    if parsed is not None and parsed.resource_uri is not UNSET:
        check_ui_uri(parsed.resource_uri)
    return parsed


def visible_to(meta: Mapping[str, Any] | UnsetType | None, who: Visibility) -> bool:
    """Whether a tool with this ``_meta`` may be seen/called by ``who`` (``"model"`` or
    ``"app"``); a malformed ``_meta.ui`` allows neither (a host must reject what it cannot read)."""
    try:
        ui = tool_ui(meta)
    except ValueError:
        return False
    if ui is None or isinstance(ui.visibility, UnsetType):
        return who in DEFAULT_VISIBILITY
    return who in ui.visibility

"""MCP Apps in the Inspector (``io.modelcontextprotocol/ui``, SEP-1865): the host side.

The page asks ``POST /api/apps/open`` for a tool's view; this reads the ``ui://`` resource
through the Inspector's connection, checks it (the MIME type, text or base64 HTML, a size
limit), builds its Content-Security-Policy from ``_meta.ui.csp`` and keeps it under a random
frame id. The page then loads ``GET /apps/frame/<id>`` in an iframe with
``sandbox="allow-scripts"`` and no ``allow-same-origin``.

Why it cannot reach the Inspector (the security model, docs/apps.md):

- the frame's response carries the CSP ``sandbox allow-scripts`` directive besides the
  attribute, so the document has an opaque origin even if opened outside the iframe: no
  cookies, no storage, no DOM of the page, no top navigation, no popups, no forms;
- its policy is deny-by-default with no ``'self'``: it cannot fetch the Inspector's API
  (which would refuse it anyway: the Origin is ``null`` and it holds no token, which lives
  only in the page's script and URL fragment and is never sent to the frame);
- ``frame-ancestors 'self'`` and ``Sec-Fetch-Dest`` keep other sites from framing it;
- everything it may do goes through ``postMessage`` to the page, which answers only that
  iframe's window, asks the user before proxying a ``tools/call``, and sends the call here
  (``POST /api/apps/call``), where the tool's ``_meta.ui.visibility`` must include ``"app"``.

A web host "MUST" use a double-iframe sandbox proxy on another origin (SEP-1865 "Sandbox
proxy") so views can keep an origin of their own; the Inspector serves one origin on
loopback, so it gives views an opaque origin instead, which is stricter: ``domain`` is not
honoured and views cannot use storage or cookies.
"""

from __future__ import annotations

import base64
import binascii
import logging
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.apps import (
    APP_MIME_TYPE,
    UiResourceMeta,
    allow_attribute,
    check_ui_uri,
    content_security_policy,
    resource_meta,
    visible_to,
)
from ._api import ApiError, _text

if TYPE_CHECKING:
    from ._session import InspectorSession

__all__ = ["MAX_VIEW_BYTES", "AppFrames", "Frame"]

logger = logging.getLogger("mcpkit.inspector")

#: The largest view the Inspector renders (HTML, after base64 decoding).
MAX_VIEW_BYTES = 4 * 1024 * 1024
_MAX_FRAMES = 16
_FRAME_PREFIX = "/apps/frame/"


@dataclass
class Frame:
    """One rendered view: its HTML and the policy it is served with."""

    uri: str
    tool: str | None
    html: bytes
    csp: str

    def headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(self.html)).encode()),
            (b"content-security-policy", self.csp.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"cross-origin-resource-policy", b"same-origin"),
            (b"cache-control", b"no-store"),
        ]


def _mime_ok(value: Any) -> bool:
    return isinstance(value, str) and value.replace(" ", "").lower() == APP_MIME_TYPE


def _html_of(content: Any, uri: str) -> bytes:
    text, blob = getattr(content, "text", msgspec.UNSET), getattr(content, "blob", msgspec.UNSET)
    if isinstance(text, str):
        html = text.encode("utf-8", "replace")
    elif isinstance(blob, str):
        try:
            html = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(502, f"{uri}: the blob is not valid base64") from None
    else:
        raise ApiError(502, f"{uri}: the view has neither text nor blob")
    if len(html) > MAX_VIEW_BYTES:
        raise ApiError(502, f"{uri}: the view is larger than {MAX_VIEW_BYTES} bytes")
    return html


class AppFrames:
    """The views the page has open, by frame id (the most recent few are kept)."""

    def __init__(self) -> None:
        self.frames: OrderedDict[str, Frame] = OrderedDict()

    def get(self, path: str) -> Frame | None:
        """The frame a ``/apps/frame/<id>`` path names, if it is open."""
        if not path.startswith(_FRAME_PREFIX):
            return None
        return self.frames.get(path[len(_FRAME_PREFIX) :])

    async def open(self, session: InspectorSession, body: Mapping[str, Any]) -> dict[str, Any]:
        """Read the view ``body["uri"]`` through the connection and keep it for its iframe."""
        client = session._require()
        uri = _text(body, "uri", required=True, limit=2048)
        assert uri is not None
        try:
            check_ui_uri(uri)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        tool = _text(body, "tool", limit=1024)
        result = await session._run(None, client.read_resource(uri))
        contents = [c for c in result.contents if c.uri == uri] or list(result.contents)
        if not contents:
            raise ApiError(502, f"{uri}: the server returned no contents")
        content = contents[0]
        if not _mime_ok(content.mime_type):
            raise ApiError(
                502, f"{uri}: the view's MIME type is {content.mime_type!r}, not {APP_MIME_TYPE!r} (SEP-1865)"
            )
        html = _html_of(content, uri)
        try:
            meta = resource_meta(content.meta) or UiResourceMeta()
        except ValueError as exc:
            raise ApiError(502, f"{uri}: {exc}") from None
        csp, warnings = content_security_policy(meta.csp if meta.csp is not msgspec.UNSET else None)
        if meta.domain is not msgspec.UNSET:
            warnings.append(f"domain {meta.domain!r} is not honoured: views get an opaque origin here")
        permissions = meta.permissions if meta.permissions is not msgspec.UNSET else None
        frame_id = secrets.token_urlsafe(24)
        self.frames[frame_id] = Frame(uri=uri, tool=tool, html=html, csp=csp)
        while len(self.frames) > _MAX_FRAMES:
            self.frames.popitem(last=False)
        # SEP-1865 "Audit Trail": hosts SHOULD log the CSP configurations they apply.
        logger.info("inspector: rendering %s with %s", uri, csp)
        return {
            "frameId": frame_id,
            "src": _FRAME_PREFIX + frame_id,
            "uri": uri,
            "csp": csp,
            "declared": msgspec.to_builtins(meta),
            "allow": allow_attribute(permissions),
            "prefersBorder": meta.prefers_border if meta.prefers_border is not msgspec.UNSET else None,
            "warnings": warnings,
            "size": len(html),
        }

    def close(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Forget a frame (its URL then answers 404)."""
        return {"closed": self.frames.pop(str(body.get("frameId")), None) is not None}

    async def call(self, session: InspectorSession, body: Mapping[str, Any]) -> dict[str, Any]:
        """A ``tools/call`` a view asked for and the user allowed: only for an open frame, and
        only a tool whose ``_meta.ui.visibility`` includes ``"app"`` (SEP-1865 "Visibility":
        the host "MUST reject ``tools/call`` requests from apps" for other tools)."""
        frame_id = str(body.get("frameId"))
        if frame_id not in self.frames:
            raise ApiError(404, "no such app frame (it was closed)")
        name = _text(body, "name", required=True, limit=1024)
        client = session._require()
        tools = await session._run(None, client.list_tools())
        tool = next((t for t in tools if t.name == name), None)
        if tool is None:
            raise ApiError(404, f"the server has no tool {name!r}", code=-32602)
        if not visible_to(tool.meta, "app"):
            refused = f"tool {name!r} is not callable by apps (its _meta.ui.visibility)"
            raise ApiError(403, refused, code=-32600)
        return await session.call_tool(
            {"name": name, "arguments": body.get("arguments") or {}, "callId": body.get("callId")}
        )

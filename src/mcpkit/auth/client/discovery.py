"""Where to look for metadata, and whether a resource identifier fits the server (pure).

Protected-resource metadata (RFC 9728 §3.1, MCP "Protected Resource Metadata
Discovery Requirements"): the ``resource_metadata`` URL of the challenge when
present, then the path-based well-known URL, then the root one.

Authorization-server metadata (RFC 8414 §3.1 and §5, OpenID Connect Discovery
§4, MCP "Authorization Server Metadata Discovery"): for an issuer with a path,
path insertion for OAuth, path insertion for OIDC, then path appending for OIDC —
never the root document, which describes a different issuer; for a root issuer,
OAuth then OIDC.

URLs are built from the raw strings (``urllib.parse``), never re-serialised: the
issuer comparison of RFC 8414 §3.3 is exact, so the well-known URL must come from
exactly the issuer string the resource named.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urljoin, urlsplit

import httpx

from .urlpolicy import origin_of

__all__ = [
    "authorization_server_metadata_urls",
    "canonical_server_url",
    "protected_resource_metadata_urls",
    "resource_matches",
]

_PRM_SUFFIX = "/.well-known/oauth-protected-resource"
_OAUTH_SUFFIX = "/.well-known/oauth-authorization-server"
_OIDC_SUFFIX = "/.well-known/openid-configuration"
#: RFC 3986 section 2: what a URI never holds raw (controls, whitespace, non-ASCII, "<>\\^`{|}).
_NOT_URI = re.compile(r'[^\x21-\x7e]|["<>\\^`{|}]')


def _dedupe(urls: list[str]) -> list[str]:
    return list(dict.fromkeys(urls))


def _origin(parts: SplitResult) -> str:
    return f"{parts.scheme}://{parts.netloc}"


def canonical_server_url(url: str) -> str:
    """The server URL used for discovery and resource matching: without fragment."""
    return url.split("#", 1)[0]


def protected_resource_metadata_urls(server_url: str, header_url: str | None = None) -> list[str]:
    """Candidate PRM URLs in the order MCP requires (challenge URL, path-based, root)."""
    parts = urlsplit(canonical_server_url(server_url))
    urls: list[str] = []
    if header_url:
        # RFC 9728 §5.1 gives an absolute URL; resolve defensively against the request URL.
        # One that is not a URL at all ("http://[", found by fuzzing) is ignored: the
        # well-known locations below are tried, as when the header names none. So is one
        # holding characters no URI has (a tab is legal in a quoted-string, RFC 9110 §5.6.4):
        # urljoin would silently drop tabs and newlines and fetch a URL the server never named.
        try:
            if not _NOT_URI.search(header_url):
                urls.append(urljoin(server_url, header_url))
        except ValueError:
            pass
    path = parts.path.rstrip("/")  # RFC 9728 §3.1: a terminating slash is removed first
    if path or parts.query:
        query = f"?{parts.query}" if parts.query else ""
        urls.append(f"{_origin(parts)}{_PRM_SUFFIX}{path}{query}")
    urls.append(f"{_origin(parts)}{_PRM_SUFFIX}")
    return _dedupe(urls)


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """Candidate metadata URLs for ``issuer``, in the MCP priority order."""
    parts = urlsplit(issuer)
    origin = _origin(parts)
    path = parts.path.rstrip("/")
    if not path:
        return [f"{origin}{_OAUTH_SUFFIX}", f"{origin}{_OIDC_SUFFIX}"]
    return [
        f"{origin}{_OAUTH_SUFFIX}{path}",  # RFC 8414 §3.1 path insertion
        f"{origin}{_OIDC_SUFFIX}{path}",  # RFC 8414 §5 OIDC with insertion
        f"{origin}{path}{_OIDC_SUFFIX}",  # OIDC Discovery §4 path appending
    ]


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether the PRM ``resource`` identifies the MCP server at ``server_url``.

    RFC 9728 §3.3/§7.3 want the resource to be the URL the metadata was derived
    from; MCP servers legitimately publish an origin-wide or parent-path resource
    (root PRM: ``resource`` = origin). Accepted: same origin (scheme and host
    case-insensitive, default port implied) and the resource path a whole-segment
    prefix of the server path (``/mcp`` covers ``/mcp`` and ``/mcp/x``, not
    ``/mcpx``); a resource with a query must match the server's query exactly; a
    fragment is never valid (RFC 8707 §2).
    """
    try:
        res = urlsplit(resource)
        srv = urlsplit(canonical_server_url(server_url))
        if res.scheme.lower() not in ("http", "https") or not res.netloc or "#" in resource:
            return False
        if origin_of(httpx.URL(resource)) != origin_of(httpx.URL(canonical_server_url(server_url))):
            return False
    except (ValueError, httpx.InvalidURL):
        return False
    if res.query and res.query != srv.query:
        return False
    prefix = res.path.rstrip("/")
    path = srv.path.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")

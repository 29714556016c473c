"""Reading ``Authorization: Bearer`` and writing ``WWW-Authenticate`` challenges.

Pure functions, no I/O. The header grammar is RFC 6750 section 2.1 (``b64token``),
the challenge grammar RFC 6750 section 3 with the ``resource_metadata`` parameter
of RFC 9728 section 5.1, and the metadata location RFC 9728 section 3.1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from .errors import TokenVerificationError

__all__ = [
    "WELL_KNOWN_PATH",
    "bearer_challenge",
    "canonical_uri",
    "check_scope_token",
    "metadata_url",
    "parse_bearer",
]

#: RFC 9728 section 3: the well-known suffix of protected-resource metadata.
WELL_KNOWN_PATH = "/.well-known/oauth-protected-resource"

#: RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: RFC 6749 section 3.3: scope-token = 1*NQCHAR, NQCHAR = %x21 / %x23-5B / %x5D-7E
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
#: RFC 6750 section 3: error_description is %x20-21 / %x23-5B / %x5D-7E (no quote, no backslash).
_NOT_DESCRIPTION = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
_CONTROL = re.compile(r"[^\x20-\x7e]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: Longer than any real access token; bounds the work a hostile header can cause.
MAX_TOKEN_LENGTH = 16 * 1024


def parse_bearer(authorization: str | None, max_length: int = MAX_TOKEN_LENGTH) -> str | None:
    """The access token of an ``Authorization`` header value.

    None when the request carries no bearer credentials at all (no header, or
    another scheme such as Basic): RFC 6750 section 3.1 then wants a challenge
    *without* an error code. A ``Bearer`` header whose token is empty, has
    several parts or characters outside ``b64token`` raises
    :class:`TokenVerificationError`.
    """
    if authorization is None:
        return None
    scheme, _, rest = authorization.strip().partition(" ")
    # RFC 9110 section 11.1: the auth-scheme is case-insensitive.
    if scheme.lower() != "bearer":
        return None
    token = rest.strip(" \t")
    if not token:
        raise TokenVerificationError("the Bearer credentials are empty")
    if len(token) > max_length:
        raise TokenVerificationError("the access token is too long")
    if _B64TOKEN.fullmatch(token) is None:
        raise TokenVerificationError("the access token is malformed")
    return token


def check_scope_token(scope: str) -> str:
    """``scope`` if it is a valid RFC 6749 section 3.3 scope-token, else ValueError."""
    if not isinstance(scope, str) or _SCOPE_TOKEN.fullmatch(scope) is None:
        raise ValueError(f"not a valid OAuth scope: {scope!r} (RFC 6749 section 3.3)")
    return scope


def metadata_url(resource: str) -> str | None:
    """Where the protected-resource metadata of ``resource`` lives (RFC 9728 section 3.1).

    The well-known suffix goes between the host and the path:
    ``https://h/mcp`` → ``https://h/.well-known/oauth-protected-resource/mcp``.
    None when ``resource`` is not an absolute http(s) URL.
    """
    parts = urlsplit(resource)
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.netloc:
        return None
    path = parts.path.rstrip("/")  # "https://h/" names the same resource as "https://h"
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN_PATH + path, parts.query, ""))


def canonical_uri(uri: str) -> str:
    """A resource URI in the form used to compare audiences.

    2026-07-28 authorization, "Canonical Server URI": servers SHOULD accept
    uppercase scheme and host and the trailing-slash variant, so scheme and host
    are lowercased, a default port dropped and a trailing slash removed (RFC 3986
    section 6.2.2-6.2.3). Anything that is not an http(s) URL compares verbatim.
    """
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.netloc or "@" in parts.netloc:
        return uri
    try:
        port = parts.port
    except ValueError:
        return uri
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, parts.fragment))


def bearer_challenge(
    *,
    resource_metadata: str | None = None,
    scope: Iterable[str] = (),
    error: str | None = None,
    description: str | None = None,
    realm: str | None = None,
) -> str:
    """A ``WWW-Authenticate`` value for the Bearer scheme (RFC 6750 section 3).

    Every value is a quoted-string. Values are made safe for a header whatever
    they contain (no CR/LF injection, no broken quoting): descriptions lose the
    characters RFC 6750 forbids in them, ``resource_metadata`` has its control
    and non-ASCII characters percent-encoded, the other values lose them, and
    quotes and backslashes are backslash-escaped.
    """
    params: list[str] = []
    if realm is not None:
        params.append(f"realm={_quote(realm)}")
    if error is not None:
        params.append(f"error={_quote(error)}")
    if description:
        params.append(f'error_description="{_clean_description(description)}"')
    scopes = " ".join(sorted(set(scope)))
    if scopes:
        params.append(f"scope={_quote(scopes)}")
    if resource_metadata is not None:
        params.append(f"resource_metadata={_quote(_escape_url(resource_metadata))}")
    return "Bearer " + ", ".join(params) if params else "Bearer"


def _quote(value: str) -> str:
    """An RFC 9110 section 5.6.4 quoted-string (controls and non-ASCII dropped)."""
    value = _CONTROL.sub("", value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _escape_url(url: str) -> str:
    """``url`` with every character a header cannot hold percent-encoded as UTF-8.

    Dropping them, as :func:`_quote` does, would name another URL: ``https://exämple.com``
    would send clients to ``https://exmple.com``. Encoding keeps the same resource (the
    IRI-to-URI mapping of RFC 3987 section 3.1; WHATWG URL encodes C0 controls in a path
    the same way) or, in a host, one no client resolves. Lone surrogates become U+FFFD
    first, as in WHATWG URL, since UTF-8 cannot encode them.
    """
    if not _CONTROL.search(url):
        return url
    url = _SURROGATE.sub("\ufffd", url)
    return _CONTROL.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), url)


def _clean_description(description: str) -> str:
    description = description.replace('"', "'").replace("\\", "/")
    return _NOT_DESCRIPTION.sub("", description)[:200]

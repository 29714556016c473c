"""Which URLs learned from a server the OAuth client may fetch or open.

Every URL the client did not get from its user — the ``resource_metadata`` URL of
a challenge, ``authorization_servers``, every endpoint in authorization-server
metadata, redirect targets — comes from a possibly hostile server. Fetching it is
an SSRF vector (MCP security best practices, "SSRF during OAuth discovery");
opening it in a browser is CVE-2025-6514 territory. The rules:

* only ``http``/``https``; ``javascript:``, ``file:``, ``data:``, ``vbscript:`` …
  are refused (RFC 6749 §3.1: endpoints are URLs; MCP: authorization-URL
  validation); no userinfo, no fragment (RFC 6749 §3.1, §3.2), no characters
  RFC 3986 §2 never allows raw (whitespace, controls, ``"<>\\^`{|}``);
* ``https`` is required except for loopback hosts (OAuth 2.1 §1.5; MCP
  "Communication Security"), unless ``allow_insecure_http``;
* loopback hosts (127/8, ::1, ``localhost``, ``*.localhost`` per RFC 6761 §6.3)
  need ``allow_loopback``;
* private, link-local, shared (CGNAT), unspecified, multicast, reserved and cloud
  metadata addresses (169.254.169.254, ``metadata.google.internal`` …) need
  ``allow_private``. IPv4 embedded in IPv6 (mapped, NAT64, 6to4, Teredo) is
  judged by the embedded address, and the legacy numeric forms a resolver accepts
  (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``) are decoded first
  (WHATWG URL "IPv4 parser"), so they cannot slip past as "hostnames";
* origins in ``trusted_origins`` (the MCP server URL the user chose) skip the
  host checks: it is the user's decision, not the server's.

Hostnames are also checked after resolution when :meth:`UrlPolicy.check_resolved`
runs inside an asyncio loop (``loop.getaddrinfo``, non-blocking). This narrows but
does not close DNS rebinding: httpx resolves again when it connects. Without a
running asyncio loop (e.g. trio) only the literal form is checked.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from .errors import UnsafeURLError

__all__ = ["HostClass", "Resolver", "UrlPolicy", "classify_host", "classify_ip", "origin_of"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: ``(host, port) -> addresses``; the default uses ``loop.getaddrinfo``.
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: Cloud instance-metadata names (the addresses are caught by range).
_METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
#: RFC 3986 §2: characters never allowed raw in a URI, plus whitespace and controls.
_FORBIDDEN = re.compile(r'[\x00-\x20\x7f"<>\\^`{|}]')
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPAT = ipaddress.IPv6Network("::/96")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HostClass(enum.Enum):
    """What a host is, as far as the policy cares."""

    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    NAME = "name"  # a DNS name: public unless resolution says otherwise


def _ipv4_number(part: str) -> int:
    # WHATWG URL "IPv4 number parser": 0x → hex, leading 0 → octal, else decimal.
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part[1:], 8)
    return int(part, 10)


def _lenient_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Decode ``host`` as inet_aton(3) would; None for a plain name.

    Raises ValueError when the host "ends in a number" but is no valid address:
    such a host is ambiguous between resolvers and is never safe.
    """
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not re.fullmatch(r"[0-9]+|0[xX][0-9a-fA-F]*", parts[-1]):
        return None
    if len(parts) > 4 or any(not p for p in parts):
        raise ValueError(f"malformed numeric host {host!r}")
    numbers = [_ipv4_number(p) for p in parts]
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise ValueError(f"numeric host out of range {host!r}")
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64 or (ip in _IPV4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def classify_ip(ip: IPAddress) -> HostClass:
    """Loopback, private (anything not globally routable unicast) or public."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = classify_ip(embedded)
            # ::ffff:127.0.0.1 really is loopback on a dual-stack socket; loopback
            # tunnelled through NAT64/6to4/Teredo is not, and is refused as private.
            if ip.ipv4_mapped is not None or inner is not HostClass.LOOPBACK:
                return inner
            return HostClass.PRIVATE
    if ip.is_loopback:
        return HostClass.LOOPBACK
    if (
        ip.is_multicast
        or ip.is_unspecified
        or ip.is_link_local
        or ip.is_private
        or ip.is_reserved
        or not ip.is_global
    ):
        return HostClass.PRIVATE
    return HostClass.PUBLIC


def classify_host(host: str) -> HostClass:
    """Classify a URL host by its literal form (see the module docstring).

    Raises ValueError for hosts that are neither a valid address nor a valid name.
    """
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name:
        raise ValueError("empty host")
    if ":" in name:
        literal = name.replace("%25", "%").split("%", 1)[0]  # drop an RFC 6874 zone id
        return classify_ip(ipaddress.IPv6Address(literal))
    v4 = _lenient_ipv4(name)
    if v4 is not None:
        return classify_ip(v4)
    bare = name.rstrip(".")
    if bare == "localhost" or bare.endswith(".localhost"):
        return HostClass.LOOPBACK  # RFC 6761 §6.3
    if bare in _METADATA_HOSTS:
        return HostClass.PRIVATE
    return HostClass.NAME


def origin_of(url: str | httpx.URL) -> str:
    """``scheme://host:port`` with the default port spelled out, lower-cased."""
    parsed = httpx.URL(url) if isinstance(url, str) else url
    port = parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 0)
    host = parsed.host
    if ":" in host:
        host = f"[{host}]"
    return f"{parsed.scheme}://{host}:{port}".lower()


async def _getaddrinfo(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class UrlPolicy:
    """The rules URLs learned from servers must pass (see the module docstring)."""

    allow_loopback: bool = False
    allow_private: bool = False
    allow_insecure_http: bool = False
    #: Origins (see :func:`origin_of`) exempt from the host checks.
    trusted_origins: frozenset[str] = field(default_factory=frozenset)
    #: Check hostnames after DNS resolution too (asyncio only).
    resolve: bool = True
    resolver: Resolver | None = None

    def with_trusted(self, origins: Iterable[str]) -> UrlPolicy:
        """A copy trusting ``origins`` as well."""
        return UrlPolicy(
            self.allow_loopback,
            self.allow_private,
            self.allow_insecure_http,
            self.trusted_origins | frozenset(origins),
            self.resolve,
            self.resolver,
        )

    def check(self, url: str, *, purpose: str = "URL") -> httpx.URL:
        """Validate ``url`` by its literal form; return it parsed. Raises :class:`UnsafeURLError`."""
        if not isinstance(url, str) or not url.isascii() or _FORBIDDEN.search(url):
            raise UnsafeURLError(f"{purpose}: malformed or non-ASCII URL refused", str(url))
        try:
            parsed = httpx.URL(url)
            # httpx reads "https://[" as the host "%5B"; the standard library, which the
            # OAuth client also uses on these URLs, refuses it: both must read it (fuzzing).
            urlsplit(url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise UnsafeURLError(f"{purpose}: unparsable URL ({exc})", url) from None
        scheme = parsed.scheme
        if scheme not in ("http", "https"):
            raise UnsafeURLError(f"{purpose}: scheme {scheme or '(none)'!r} refused", url)
        if parsed.userinfo:
            raise UnsafeURLError(f"{purpose}: URLs with credentials are refused", url)
        if parsed.fragment or "#" in url:
            raise UnsafeURLError(f"{purpose}: URLs with a fragment are refused", url)
        if not parsed.host:
            raise UnsafeURLError(f"{purpose}: URL without a host", url)
        if origin_of(parsed) in self.trusted_origins:
            return parsed
        try:
            kind = classify_host(parsed.host)
        except ValueError as exc:
            raise UnsafeURLError(f"{purpose}: bad host ({exc})", url) from None
        self._check_class(kind, scheme, url, purpose, parsed.host)
        return parsed

    def _check_class(self, kind: HostClass, scheme: str, url: str, purpose: str, host: str) -> None:
        if kind is HostClass.LOOPBACK and not self.allow_loopback:
            raise UnsafeURLError(f"{purpose}: loopback host {host!r} refused (allow_loopback)", url)
        if kind is HostClass.PRIVATE and not self.allow_private:
            raise UnsafeURLError(f"{purpose}: private/reserved address {host!r} refused (allow_private)", url)
        if scheme == "http" and kind is not HostClass.LOOPBACK and not self.allow_insecure_http:
            raise UnsafeURLError(f"{purpose}: plain http is only allowed to loopback hosts", url)

    async def check_resolved(self, url: str, *, purpose: str = "URL") -> httpx.URL:
        """:meth:`check`, then the same host rules for every address a hostname resolves to."""
        parsed = self.check(url, purpose=purpose)
        if origin_of(parsed) in self.trusted_origins or not self.resolve:
            return parsed
        if classify_host(parsed.host) is not HostClass.NAME:
            return parsed
        port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
        try:
            resolver = self.resolver or _getaddrinfo
            addresses = await resolver(parsed.host, port)
        except RuntimeError:  # no asyncio loop: literal checks only (documented)
            addresses = []
        except OSError:
            addresses = []  # unresolvable: the fetch itself will fail the same way
        kinds = {classify_ip(ipaddress.ip_address(a.split("%", 1)[0])) for a in addresses}
        for kind in kinds - {HostClass.PUBLIC}:
            if kind is HostClass.LOOPBACK and not self.allow_loopback:
                raise UnsafeURLError(f"{purpose}: {parsed.host!r} resolves to loopback (allow_loopback)", url)
            if kind is HostClass.PRIVATE and not self.allow_private:
                raise UnsafeURLError(
                    f"{purpose}: {parsed.host!r} resolves to a private/reserved address (allow_private)", url
                )
        return parsed

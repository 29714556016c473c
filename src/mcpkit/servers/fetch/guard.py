"""The SSRF guard: where a fetch may connect, decided on the address the connection will use.

A fetch server runs inside someone's network and fetches URLs a model chose, so
every URL is a request to reach a machine. The guard answers, for one hop:

1. Is the scheme ``http`` or ``https``? Nothing else is fetched.
2. What is the host? The host is taken from the same parser that builds the
   request (``httpx.URL``). A host that spells an IPv4 address in any of the
   forms ``inet_aton`` accepts (``2130706433``, ``0x7f.1``, ``017700000001``,
   ``127.1``) is turned into that address here, as the WHATWG URL standard's
   IPv4 parser does, instead of being handed to a resolver that may read it
   one way or another (or ask DNS about it).
3. Which addresses does it stand for? A name is resolved **once**; the
   connection then goes to one of exactly those addresses (see
   :mod:`mcpkit.servers.fetch.web`), so there is no second lookup an attacker's
   DNS could answer differently (DNS rebinding).
4. May each address be reached? Only public unicast addresses, unless the
   operator opened more with ``--allow-host`` / ``--allow-private``. IPv4-mapped
   IPv6 (``::ffff:127.0.0.1``) is the IPv4 address it maps (a dual-stack socket
   connects there); IPv4-compatible, NAT64, 6to4 and Teredo addresses are judged
   by the IPv4 addresses they embed as well as by themselves. A name with one
   forbidden address among its answers is refused as a whole.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = [
    "METADATA_ADDRESSES",
    "AddressPolicy",
    "FetchRefused",
    "Resolver",
    "Target",
    "check_url",
    "normalize_host",
    "parse_ipv4_number",
    "system_resolver",
    "why_not_public",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Resolves ``(host, port)`` to addresses (strings), as the connection will use them.
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: Cloud instance metadata endpoints (credentials live there): refused even with
#: ``--allow-private``; only ``--allow-host`` naming the address opens one.
#: AWS IMDS (IPv4 and IPv6) and ECS task metadata; the 169.254.169.254 address is
#: also GCP's, Azure's, Oracle's and DigitalOcean's; Alibaba Cloud's 100.100.100.200.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)


class FetchRefused(Exception):
    """The guard refused a URL; ``str(exc)`` says why, in words meant for the model and the user."""


def _nets(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), kind) for net, kind in rows)


# IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates), with the
# kind we report. Written out rather than taken from ``ipaddress.is_global``,
# whose tables have changed between Python releases.
_V4_SPECIAL = _nets(
    ("0.0.0.0/8", "unspecified"),  # "this network"; connecting to 0.0.0.0 reaches this host
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "private"),  # shared address space (carrier-grade NAT), RFC 6598
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
    ("192.0.2.0/24", "reserved"),  # documentation (TEST-NET-1)
    ("192.88.99.0/24", "reserved"),  # deprecated 6to4 relay anycast
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "private"),  # benchmarking, RFC 2544
    ("198.51.100.0/24", "reserved"),  # documentation (TEST-NET-2)
    ("203.0.113.0/24", "reserved"),  # documentation (TEST-NET-3)
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # includes the broadcast address 255.255.255.255
)

# IANA IPv6 Special-Purpose Address Registry; the forms embedding IPv4 are handled first.
_V6_SPECIAL = _nets(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "reserved"),  # IPv4-compatible (deprecated, RFC 4291 section 2.5.5.1)
    ("64:ff9b:1::/48", "private"),  # local-use NAT64, RFC 8215
    ("100::/64", "reserved"),  # discard-only
    ("2001:2::/48", "reserved"),  # benchmarking
    ("2001:10::/28", "reserved"),  # ORCHID (deprecated)
    ("2001:db8::/32", "reserved"),  # documentation
    ("3fff::/20", "reserved"),  # documentation, RFC 9637
    ("5f00::/16", "reserved"),  # SRv6 SIDs
    ("fc00::/7", "private"),  # unique local addresses (fd00:ec2::254 is AWS's metadata)
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private"),  # site-local (deprecated)
    ("ff00::/8", "multicast"),
)
_V6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_v4(address: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 transition address leads to, with the form's name."""
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    value = int(address)
    if address in _NAT64:
        found.append(("NAT64", ipaddress.IPv4Address(value & 0xFFFFFFFF)))
    elif value >> 32 == 0 and value > 1:  # ::a.b.c.d
        found.append(("IPv4-compatible", ipaddress.IPv4Address(value)))
    if address.sixtofour is not None:
        found.append(("6to4", address.sixtofour))
    if address.teredo is not None:
        server, client = address.teredo
        found += [("Teredo", server), ("Teredo", client)]
    return found


def canonical(address: IPAddress) -> IPAddress:
    """``address`` as the connection uses it: an IPv4-mapped IPv6 address is its IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def why_not_public(address: IPAddress) -> str | None:
    """Why ``address`` is not a public unicast address (a phrase such as ``"a loopback address"``),
    or None when it is one."""
    address = canonical(address)
    if isinstance(address, ipaddress.IPv4Address):
        for net, kind in _V4_SPECIAL:
            if address in net:
                return f"{_article(kind)} {kind} address"
        return None
    for form, v4 in _embedded_v4(address):
        inner = why_not_public(v4)
        if inner is not None:
            return f"{_article(form)} {form} address embedding {v4} ({inner})"
    for net, kind in _V6_SPECIAL:
        if address in net:
            return f"{_article(kind)} {kind} address"
    if address not in _V6_GLOBAL_UNICAST:
        return "a reserved address (outside 2000::/3, the global unicast space)"
    return None


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


_HEX = re.compile(r"0[xX][0-9a-fA-F]*")
_DEC = re.compile(r"[0-9]+")
_HOST_CHARS = re.compile(r"[a-z0-9_.-]+")


def _ends_in_number(host: str) -> bool:
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    last = labels[-1]
    return bool(_DEC.fullmatch(last) or _HEX.fullmatch(last))


def parse_ipv4_number(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host spells in any ``inet_aton`` form, or None when the host is a name.

    ``2130706433``, ``0x7f.1``, ``017700000001``, ``0177.0.0.1`` and ``127.1`` are all
    127.0.0.1. As in the WHATWG URL standard, a host whose last label is a number
    (decimal, or hexadecimal after ``0x``) *must* be an address: ``1.2.3.256``,
    ``1.2.3.4.5`` or ``example.08`` raise :class:`FetchRefused` rather than being
    passed to a resolver that might read them its own way.
    """
    if not _ends_in_number(host):
        return None
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise FetchRefused(f"{host!r} looks like an IPv4 address but is not one (more than 4 parts)")
    numbers: list[int] = []
    for part in parts:
        if _HEX.fullmatch(part):
            numbers.append(int(part[2:] or "0", 16))
        elif _DEC.fullmatch(part):
            if len(part) > 1 and part.startswith("0"):
                if not set(part) <= set("01234567"):
                    raise FetchRefused(f"{host!r} looks like an IPv4 address but {part!r} is not octal")
                numbers.append(int(part, 8))
            else:
                numbers.append(int(part))
        else:
            raise FetchRefused(f"{host!r} looks like an IPv4 address but {part!r} is not a number")
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise FetchRefused(f"{host!r} looks like an IPv4 address but is out of range")
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def normalize_host(host: str) -> str | IPAddress:
    """A URL's host as the guard sees it: an address (IPv4 in any spelling, IPv6 with or
    without brackets) or a lower-case name without a trailing dot (IDNA already applied).

    Raises :class:`FetchRefused` for a host that is neither (percent signs, backslashes,
    spaces: characters a resolver might read differently from the URL parser)."""
    bare = host.strip()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    if ":" in bare:
        try:
            return canonical(ipaddress.IPv6Address(bare.replace("%25", "%")))
        except ValueError:
            raise FetchRefused(f"{host!r} is not a valid IPv6 address") from None
    name = bare.lower()
    v4 = parse_ipv4_number(name)
    if v4 is not None:
        return v4
    name = name[:-1] if name.endswith(".") else name
    if not name or not _HOST_CHARS.fullmatch(name) or ".." in name:
        raise FetchRefused(f"{host!r} is not a valid host name")
    return name


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses fetches may reach beyond the public Internet.

    ``allow_names``: host names (as written in URLs) reachable whatever they resolve to;
    ``allow_networks``: addresses and networks reachable under any name;
    ``allow_private``: every non-public address except :data:`METADATA_ADDRESSES`.
    """

    allow_private: bool = False
    allow_names: frozenset[str] = frozenset()
    allow_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_options(cls, allow_hosts: Iterable[str], allow_private: bool = False) -> AddressPolicy:
        """The policy of ``--allow-host HOST`` (repeated) and ``--allow-private``; HOST is a name,
        an address (any IPv4 spelling, IPv6 with or without brackets) or a network in CIDR form.
        Raises ValueError naming an entry that is none of these."""
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in allow_hosts:
            text = entry.strip()
            if "/" in text:
                try:
                    network = ipaddress.ip_network(text.strip("[]"), strict=False)
                except ValueError:
                    raise ValueError(f"--allow-host {entry!r}: not a valid network") from None
                if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(
                    ipaddress.IPv6Network("::ffff:0:0/96")
                ):
                    v4_start = canonical(network.network_address)
                    network = ipaddress.ip_network(f"{v4_start}/{network.prefixlen - 96}")
                networks.append(network)
                continue
            try:
                host = normalize_host(text)
            except FetchRefused as exc:
                raise ValueError(f"--allow-host {entry!r}: {exc}") from None
            if isinstance(host, str):
                names.add(host)
            else:
                networks.append(ipaddress.ip_network(host))
        return cls(allow_private, frozenset(names), tuple(networks))

    def refusal(self, name: str | None, address: IPAddress) -> str | None:
        """Why the connection to ``address`` (for a URL naming host ``name``, None for an
        address literal) is refused, or None when it may go ahead."""
        address = canonical(address)
        if name is not None and name in self.allow_names:
            return None
        if any(address in net for net in self.allow_networks if net.version == address.version):
            return None
        if address in METADATA_ADDRESSES:
            return (
                f"{address} is a cloud metadata address; this server never fetches it unless "
                f"started with --allow-host {address}"
            )
        reason = why_not_public(address)
        if reason is None or self.allow_private:
            return None
        return (
            f"{address} is {reason}; this server only fetches public addresses unless started "
            "with --allow-host or --allow-private"
        )


@dataclass(frozen=True)
class Target:
    """One checked hop: where to connect and what to tell the server."""

    url: httpx.URL
    #: The host the URL names (a name, or an address's text): the Host header and the TLS name.
    host: str
    #: The ``Host`` header, as the URL gives it (name and, when written, port).
    host_header: str
    #: The checked addresses, in the resolver's order; the connection uses only these.
    addresses: list[IPAddress] = field(default_factory=list)
    #: Whether the URL named the host by name (then TLS verifies and SNI sends that name).
    by_name: bool = False


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's resolver (``getaddrinfo``), for TCP: the addresses, in its order."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


async def check_url(url: str | httpx.URL, policy: AddressPolicy, resolver: Resolver) -> Target:
    """Check one hop: parse ``url``, resolve its host once, check every address.

    Returns the :class:`Target` to connect to; raises :class:`FetchRefused` with the reason.
    """
    import httpx

    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise FetchRefused(f"{url!s} is not a valid URL ({exc})") from None
    shown = url if isinstance(url, str) else str(parsed)
    if parsed.scheme not in ("http", "https"):
        scheme = parsed.scheme or "none"
        raise FetchRefused(f"Refused {shown}: only http and https URLs can be fetched (scheme: {scheme})")
    raw_host = parsed.raw_host.decode("ascii", "replace")
    if not raw_host:
        raise FetchRefused(f"Refused {shown}: the URL has no host")
    try:
        host = normalize_host(raw_host)
    except FetchRefused as exc:
        raise FetchRefused(f"Refused {shown}: {exc}") from None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if isinstance(host, str):
        try:
            answers = await resolver(host, port)
        except OSError as exc:
            raise FetchRefused(f"Could not resolve {host}: {exc.strerror or exc}") from None
        addresses: list[IPAddress] = []
        for answer in answers:
            try:
                address = canonical(ipaddress.ip_address(answer))
            except ValueError:
                problem = f"{host} resolved to {answer!r}, not an address"
                raise FetchRefused(f"Refused {shown}: {problem}") from None
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise FetchRefused(f"Could not resolve {host}: no addresses")
        name: str | None = host
    else:
        addresses, name = [host], None
    for address in addresses:
        reason = policy.refusal(name, address)
        if reason is not None:
            if name is not None:
                via = f" ({name} resolves to {address})"
            elif raw_host.lower() != str(address):
                via = f" ({raw_host} is {address})"  # another spelling, or the IPv4-mapped form
            else:
                via = ""
            raise FetchRefused(f"Refused {shown}{via}: {reason}.")
    header = parsed.netloc.decode("ascii")
    header = header.rsplit("@", 1)[-1]
    text_host = host if isinstance(host, str) else str(host)
    return Target(parsed, text_host, header, addresses, by_name=isinstance(host, str))

"""How much of an HTTP connection's output the client has read: Linux's ``sock_diag``
(``NETLINK_SOCK_DIAG``, ``inet_diag``) for TCP, else a short delay (see
:mod:`mcpkit.transports.http.legacy_sse`, which holds answers on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import math
import socket
import struct
import sys
from typing import Any, Protocol

__all__: list[str] = []

# Without the kernel's counts (not Linux, no sock_diag, not TCP), an answer goes this long
# after it is due, when its request's messages have most likely been read.
_GAP_S = 0.005

# -- what the client has read ---------------------------------------------------------------

# linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_NLM_F_REQUEST = 1
_INET_DIAG_INFO = 2
_NO_COOKIE = 0xFFFFFFFF
_NLMSG = struct.Struct("=IHHII")
_REQUEST = struct.Struct("=BBBBI")
# In struct inet_diag_msg: idiag_rqueue (TCP: received, not read) and idiag_wqueue (TCP:
# written, not acknowledged), after family/state/timer/retrans, the 48-byte id and expires.
_QUEUES = struct.Struct("=II")
_QUEUES_AT = _NLMSG.size + 4 + 48 + 4
_ATTRS_AT = _NLMSG.size + 72
_ATTR = struct.Struct("=HH")
# In struct tcp_info: tcpi_bytes_acked (Linux 4.1+).
_BYTES_ACKED = struct.Struct("=Q")
_BYTES_ACKED_AT = 120


class _Gone(Exception):
    """The socket asked about no longer exists."""


def _sockid(family: int, src: str, sport: int, dst: str, dport: int) -> bytes:
    def raw(host: str) -> bytes:
        packed = socket.inet_pton(family, host)
        return packed + bytes(16 - len(packed))

    return (
        struct.pack("!HH", sport, dport)
        + raw(src)
        + raw(dst)
        + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    )


def _endpoints(local: str, peer: str) -> tuple[int, list[int]]:
    """The family of the server's socket, and the families the client's socket may have."""
    a = ipaddress.ip_address(local.split("%", 1)[0])
    b = ipaddress.ip_address(peer.split("%", 1)[0])
    if isinstance(a, ipaddress.IPv4Address) and isinstance(b, ipaddress.IPv4Address):
        return socket.AF_INET, [socket.AF_INET]
    # A dual-stack server socket sees an IPv4 client as ::ffff:a.b.c.d; that client's own
    # socket is most likely an AF_INET one.
    mapped = isinstance(b, ipaddress.IPv6Address) and b.ipv4_mapped is not None
    return socket.AF_INET6, [socket.AF_INET, socket.AF_INET6] if mapped else [socket.AF_INET6]


def _unmapped(host: str, family: int) -> str:
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if family == socket.AF_INET and isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return str(address.ipv4_mapped)
    return str(address)


class _KernelReads:
    """How much of the connection's output the client has read, as Linux's sock_diag tells.

    Offsets count the bytes written to the TCP connection since it opened. A
    ``mark`` is everything written so far (acknowledged, plus still in the
    kernel, plus still in the server's own buffer); the client has read up to
    at least ``bytes_acked - (its socket's unread bytes)``, which needs the
    client's socket on this host (loopback, a local proxy). For a client
    elsewhere, an acknowledgement is the best sign there is: the answer then
    follows a round trip after the client's kernel had the messages.
    """

    def __init__(
        self, diag: socket.socket, ours: tuple[int, bytes], peer: tuple[int, bytes] | None, transport: Any
    ) -> None:
        self._diag = diag
        self._ours = ours
        self._peer = peer
        self._transport = transport
        self._seq = 0

    @classmethod
    def open(cls, local: Any, peer: Any, transport: Any) -> _KernelReads | None:
        """A probe for the TCP connection ``local`` -> ``peer`` (``(host, port)``); None if none can tell."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            host, port, peer_host, peer_port = str(local[0]), int(local[1]), str(peer[0]), int(peer[1])
            family, peer_families = _endpoints(host, peer_host)
        except (TypeError, ValueError, IndexError):
            return None  # a Unix socket, or no addresses
        try:
            diag = socket.socket(
                socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, _NETLINK_SOCK_DIAG
            )
        except OSError:
            return None
        diag.setblocking(False)
        ours = (
            family,
            _sockid(family, _unmapped(host, family), port, _unmapped(peer_host, family), peer_port),
        )
        probe = cls(diag, ours, None, transport)
        try:
            if probe._query(*ours, True)[2] is None:
                raise OSError("no tcp_info")  # a kernel older than 4.1
            for peer_family in peer_families:
                sockid = _sockid(
                    peer_family,
                    _unmapped(peer_host, peer_family),
                    peer_port,
                    _unmapped(host, peer_family),
                    port,
                )
                with contextlib.suppress(_Gone):
                    probe._query(peer_family, sockid, False)
                    probe._peer = (peer_family, sockid)
                    break
        except (OSError, _Gone):
            diag.close()
            return None
        return probe

    def close(self) -> None:
        self._diag.close()

    def _query(self, family: int, sockid: bytes, info: bool) -> tuple[int, int, int | None]:
        """One socket's (unread, unacknowledged, bytes acknowledged if ``info``)."""
        self._seq = seq = (self._seq + 1) & 0xFFFFFFFF
        body = _REQUEST.pack(
            family, socket.IPPROTO_TCP, 1 << (_INET_DIAG_INFO - 1) if info else 0, 0, 0xFFFFFFFF
        )
        body += sockid
        self._diag.send(
            _NLMSG.pack(_NLMSG.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0) + body
        )
        while True:
            try:
                data = self._diag.recv(65536)
            except BlockingIOError:
                raise OSError(errno.EAGAIN, "sock_diag did not answer") from None
            length, kind, _, got, _ = _NLMSG.unpack_from(data)
            if got == seq:
                break  # an older answer left unread is skipped
        if kind == _NLMSG_ERROR:
            code = -struct.unpack_from("=i", data, _NLMSG.size)[0]
            if code == errno.ENOENT:
                raise _Gone
            raise OSError(code, "sock_diag")
        unread, unacked = _QUEUES.unpack_from(data, _QUEUES_AT)
        acked = None
        at = _ATTRS_AT
        while info and at + _ATTR.size <= length:
            size, kind = _ATTR.unpack_from(data, at)
            if size < _ATTR.size:
                break
            if kind == _INET_DIAG_INFO and size >= _ATTR.size + _BYTES_ACKED_AT + _BYTES_ACKED.size:
                acked = _BYTES_ACKED.unpack_from(data, at + _ATTR.size + _BYTES_ACKED_AT)[0]
            at += (size + 3) & ~3
        return unread, unacked, acked

    def _buffered(self) -> int:
        transport = self._transport
        try:
            return int(transport.get_write_buffer_size()) if transport is not None else 0
        except Exception:  # a transport that cannot tell
            return 0

    def mark(self) -> int | None:
        """Bytes written so far, or None if the kernel's counts moved while asked (ask again later)."""
        family, sockid = self._ours
        buffered = self._buffered()
        try:
            first = self._query(family, sockid, True)
            second = self._query(family, sockid, True)
        except (OSError, _Gone):
            return 0  # the connection is gone: nothing left to order
        if first != second or first[2] is None:
            return None  # an acknowledgement came in between: the sum could count it twice
        return first[2] + first[1] + buffered

    def progress(self) -> float:
        """How many bytes the client has read, at least."""
        try:
            acked = self._query(*self._ours, True)[2]
            if acked is None:
                return math.inf
            if self._peer is None:
                return acked
            # Acknowledged bytes were received, so at least this many were read; the
            # client's socket is asked second, so bytes received meanwhile cannot count.
            return acked - self._query(*self._peer, False)[0]
        except (OSError, _Gone):
            return math.inf  # either socket is gone: nobody is left to read in any order


class _TimedReads:
    """Where the kernel cannot tell: an answer goes a short while after it was due."""

    def mark(self) -> float:
        return asyncio.get_running_loop().time() + _GAP_S

    def progress(self) -> float:
        return asyncio.get_running_loop().time()

    def close(self) -> None:
        return None


class _Reads(Protocol):
    """How far the client has read (``progress``), and how far it must have read (``mark``)
    before an answer due now may go: bytes of the connection, or (when nobody can tell) time."""

    def mark(self) -> float | None: ...

    def progress(self) -> float: ...

    def close(self) -> None: ...

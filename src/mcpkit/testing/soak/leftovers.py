"""Who holds a connection to worker 0 open: the owner of each leftover client socket.

A client connection of worker 0 still ESTABLISHED once the load stopped means its
peer never closed it (a closed peer leaves CLOSE-WAIT; a reset one, no entry). The
peer is a socket of the soak's own process (the round-robin proxy's upstream, a
slow request body, a ``/readyz`` probe) or, unlikely, of another. Loopback puts
both ends in the same kernel table, so the peer is the row whose local port is the
server side's remote port; its inode names the process and descriptor holding it,
and the proxy's log (each request's ``upstream_port``) names the request, and the
client behind it (``client_port``) and whether that client is still connected.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..proxy import ProxiedRequest, RoundRobinProxy

__all__ = ["TcpSocket", "describe_leftovers", "socket_holder", "tcp_table"]

_STATES = {
    "01": "established",
    "02": "syn-sent",
    "04": "fin-wait-1",
    "05": "fin-wait-2",
    "06": "time-wait",
    "07": "close",
    "08": "close-wait",
    "09": "last-ack",
    "0A": "listen",
    "0B": "closing",
}


@dataclass(frozen=True)
class TcpSocket:
    """One row of ``/proc/<pid>/net/tcp``: both ports, the state, the socket's inode."""

    local: int
    remote: int
    state: str
    inode: str


def tcp_table(pid: int | str = "self") -> list[TcpSocket]:
    """The TCP sockets of ``pid``'s network namespace (IPv4 and IPv6)."""
    rows: list[TcpSocket] = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = row.split()
                local, remote = int(cols[1].rsplit(":", 1)[1], 16), int(cols[2].rsplit(":", 1)[1], 16)
                rows.append(TcpSocket(local, remote, _STATES.get(cols[3], cols[3]), cols[9]))
    return rows


def socket_holder(inode: str, pids: Iterable[int]) -> tuple[int, int] | None:
    """``(pid, fd)`` of the first of ``pids`` holding socket ``inode`` open, or None."""
    target = f"socket:[{inode}]"
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid, int(fd)
    return None


def _what(entry: ProxiedRequest) -> str:
    """A proxied request in a few words: method, path, JSON-RPC method and id, session."""
    words = [entry.method, entry.path]
    with contextlib.suppress(ValueError, AttributeError):
        message = json.loads(entry.body) if entry.body else None
        if isinstance(message, dict):
            words.append(f"{message.get('method', 'response')} id={message.get('id')}")
    for name in ("mcp-session-id", "last-event-id", "accept"):
        if name in entry.headers:
            words.append(f"{name}={entry.headers[name]}")
    return " ".join(words)


def _held(sock: TcpSocket, owners: list[int]) -> str:
    holder = socket_holder(sock.inode, owners)
    if holder is None:
        return "held by no soak process"
    pid, fd = holder
    return f"held by {'the soak process' if pid == os.getpid() else f'pid {pid}'} fd {fd}"


def describe_leftovers(
    server_pid: int,
    server_port: int,
    proxy: RoundRobinProxy | None,
    pids: Iterable[int] = (),
    started: float | None = None,
) -> list[str]:
    """One line per connection to ``server_port`` that ``server_pid`` holds ESTABLISHED: the
    peer's port and state, which process and descriptor hold the peer open (``pids``: this
    process first, then its children), and, when it is the proxy's, the request it carried
    (arrival ``started``-relative, state) and its client's side of the proxy."""
    table = tcp_table(server_pid)
    by_ports = {(s.local, s.remote): s for s in table}
    mine = {s.inode for s in table}
    held = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{server_pid}/fd"):
            with contextlib.suppress(OSError):
                held.add(os.readlink(f"/proc/{server_pid}/fd/{fd}")[8:-1])
    owners = [os.getpid(), *(p for p in pids if p != os.getpid())]
    proxy_port = proxy.port if proxy is not None else None
    lines: list[str] = []
    for sock in table:
        if sock.local != server_port or sock.state != "established" or sock.inode not in held & mine:
            continue
        peer = by_ports.get((sock.remote, server_port))
        line = f"port {sock.remote} -> {server_port}: "
        if peer is None:
            lines.append(line + "the peer's socket is in no table (another namespace?)")
            continue
        line += f"peer {peer.state}, {_held(peer, owners)}"
        entries = [e for e in (proxy.log if proxy is not None else []) if e.upstream_port == sock.remote]
        if not entries:
            lines.append(line + "; no proxied request used this port (a direct client: slow body, /readyz)")
            continue
        entry = entries[-1]
        at = f"{entry.at - started:.1f} s" if started is not None else "?"
        age = time.monotonic() - entry.at
        downstream = by_ports.get((entry.client_port, proxy_port or 0)) if entry.client_port else None
        client = "gone" if downstream is None else f"{downstream.state}, {_held(downstream, owners)}"
        lines.append(
            line + f"; the proxy's upstream of `{_what(entry)}` (arrived at {at}, {age:.1f} s ago, "
            f"backend {entry.backend}, status {entry.status}, state {entry.state}); "
            f"its client port {entry.client_port} -> proxy: {client}"
        )
    return lines

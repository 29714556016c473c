"""SSE encoding of response streams (``transports/http/streams.py``): the bytes on the wire, and how a
complete answer is framed (one body with its length, so the HTTP server does not copy it into a chunk)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections import deque
from typing import Any

from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http.streams import ResponseStream, StreamItem, pump_sse, sse_event


def test_sse_event_bytes() -> None:
    assert sse_event(b'{"a":1}') == b'event: message\ndata: {"a":1}\n\n'
    assert sse_event(b"{}", "s_3", 500) == b"id: s_3\nretry: 500\nevent: message\ndata: {}\n\n"
    assert sse_event(b"{}", "s_1", prefix=b": hi\n\n") == b": hi\n\nid: s_1\nevent: message\ndata: {}\n\n"


class Recorder:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def headers(self) -> dict[bytes, bytes]:
        assert self.sent[0]["type"] == "http.response.start"
        return dict(self.sent[0]["headers"])

    def body(self) -> bytes:
        return b"".join(m["body"] for m in self.sent[1:])


async def test_a_complete_large_answer_is_a_body_of_known_length_without_a_copy() -> None:
    data = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * (1 << 20) + b'"}}'
    stream = ResponseStream("st", 1, limit=8)
    rec = Recorder()
    await pump_sse(
        rec.send,
        rec.receive,
        stream,
        first=StreamItem(1, data, True),
        resumable=False,
        retry_ms=None,
        keepalive=5.0,
        on_disconnect=lambda: None,
    )
    headers = rec.headers()
    assert headers[b"content-type"] == b"text/event-stream"
    # large: the message is its own write (the very object, not a copy), between the event's head and tail
    assert [m["more_body"] for m in rec.sent[1:]] == [True, True, False]
    assert rec.sent[2]["body"] is data
    body = rec.body()
    assert headers[b"content-length"] == str(len(body)).encode()
    assert body == b"event: message\ndata: " + data + b"\n\n"


async def test_a_complete_resumable_answer_carries_the_priming_event_first() -> None:
    stream = ResponseStream("st", 1, limit=8, history=4)
    rec = Recorder()
    await pump_sse(
        rec.send,
        rec.receive,
        stream,
        first=StreamItem(1, b"{}", True),
        resumable=True,
        retry_ms=250,
        keepalive=5.0,
        on_disconnect=lambda: None,
        extra_headers=[(b"mcp-session-id", b"abc")],
    )
    assert [m["more_body"] for m in rec.sent[1:]] == [False]  # small: one write
    body = rec.body()
    assert body == b"id: st_0\nretry: 250\ndata: \n\nid: st_1\nevent: message\ndata: {}\n\n"
    headers = rec.headers()
    assert headers[b"content-length"] == str(len(body)).encode()
    assert headers[b"mcp-session-id"] == b"abc"


async def test_a_stream_with_messages_before_the_answer_is_sent_as_it_comes() -> None:
    stream = ResponseStream("st", 1, limit=8)
    rec = Recorder()
    task = asyncio.ensure_future(
        pump_sse(
            rec.send,
            rec.receive,
            stream,
            first=StreamItem(1, b'{"progress":1}', False),
            resumable=False,
            retry_ms=None,
            keepalive=5.0,
            on_disconnect=lambda: None,
        )
    )
    stream.seq = 1
    stream.push(b'{"result":2}', final=True)
    await asyncio.wait_for(task, 5)
    assert b"content-length" not in rec.headers()  # length unknown when it started: streamed
    assert [m["more_body"] for m in rec.sent[1:]] == [True, True, False]
    assert rec.body() == b'event: message\ndata: {"progress":1}\n\nevent: message\ndata: {"result":2}\n\n'


def test_a_resumable_streams_history_is_no_work_for_the_garbage_collector() -> None:
    # An idle legacy session keeps up to replay_events (1,024) notifications for a client that may
    # resume. As NamedTuples every one was scanned by every full collection and counted towards
    # starting the next (issue 18: one such collection took 120-200 ms inside a 1,000-stream fan-out).
    stream = ResponseStream("standalone", None, limit=8, history=1024)
    stream.closed = True  # no GET stream reading: the notifications only go to the history
    stream.push(b"{}")  # the history's deque is made on first use
    gc.disable()  # no collection in between: the allocation count is exact
    try:
        counted = gc.get_count()[0]
        for _ in range(500):
            stream.push(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
        counted = gc.get_count()[0] - counted
    finally:
        gc.enable()
    assert isinstance(stream.history, deque) and len(stream.history) == 501
    assert counted < 50  # 500 items, none of them an allocation the collector counts (was 500)
    assert not any(gc.is_tracked(item) for item in stream.history)


def test_an_error_answer_in_a_history_is_still_collected_in_a_cycle() -> None:
    # An error's traceback can lead back to the stream holding it: such a cycle must stay collectable.
    answer = ResponseStream("r", 1, limit=8, history=1024)
    error = MCPError(-32602, "bad")
    answer.push(b'{"jsonrpc":"2.0","id":1,"error":{}}', True, error)
    assert isinstance(answer.history, deque)
    item = answer.history[0]
    assert item.error is error and gc.is_tracked(item)
    error.stream = answer  # type: ignore[attr-defined]  # the cycle: stream -> history -> item -> error
    gone = weakref.ref(error)
    del answer, error, item
    gc.collect()
    assert gone() is None

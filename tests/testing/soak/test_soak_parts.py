"""The soak's own judgement: what counts as a delivery, a violation, a tolerated loss."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time

import pytest

from _wait import eventually
from mcpkit.testing.soak.__main__ import seconds
from mcpkit.testing.soak.ops import Cut, LegacySession, Stream, run_op
from mcpkit.testing.soak.procs import describe_fds, proc_fds
from mcpkit.testing.soak.record import Recorder, Refused, Unexplained, percentile


def progress(n: int) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "t", "progress": n},
    }


def answer(rid: int, text: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def test_a_priming_event_is_no_delivery_but_a_repeated_event_is_a_violation() -> None:
    got = Stream()
    got.add("s_0", None)  # priming
    got.add("s_1", progress(1))
    got.add("s_1", None)  # the priming event of a resumption repeats the id resumed from
    assert got.last_id == "s_1" and got.ids == ["s_1"]
    with pytest.raises(Unexplained, match="delivered twice"):
        got.add("s_1", progress(1))


def judge(messages: list[dict[str, object]], n: int = 3) -> str:
    got = Stream()
    for i, message in enumerate(messages):
        got.add(f"s_{i}", message)
    return LegacySession(None, Recorder())._judge(got, 7, n)  # type: ignore[arg-type]


def test_a_resumed_stream_must_hold_every_progress_once_in_order_then_one_answer() -> None:
    assert judge([progress(1), progress(2), progress(3), answer(7, "done 3")]) == "ok"
    with pytest.raises(Unexplained, match="exactly once"):
        judge([progress(1), progress(3), answer(7, "done 3")])  # a gap
    with pytest.raises(Unexplained, match="exactly once"):
        judge([progress(1), progress(1), progress(2), progress(3), answer(7, "done 3")])
    with pytest.raises(Unexplained, match="2 answers"):
        judge([progress(1), progress(2), progress(3), answer(7, "done 3"), answer(7, "done 3")])
    with pytest.raises(Unexplained):
        judge([progress(1), answer(7, "done 3")])  # an answer with progress missing
    stopped = {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32603,
            "message": "the worker serving this request stopped before answering; it may have partly run",
        },
    }
    assert judge([progress(1), stopped]) == "orphaned"


async def test_losses_are_tolerated_only_while_a_fault_is_in_progress() -> None:
    rec = Recorder()

    async def cut() -> str:
        raise Cut("the connection broke")

    async def refused() -> str:
        raise Refused("HTTP 503")

    async def silent() -> str:
        raise TimeoutError

    assert await run_op(rec, "op", cut) is None
    assert rec.counts["op"]["VIOLATION"] == 1 and "no fault" in rec.violations[0]
    assert await run_op(rec, "slow", silent) is None
    assert rec.counts["slow"]["VIOLATION"] == 1 and "no answer in time" in rec.violations[1]

    window = rec.fault("SIGKILL worker")
    assert await run_op(rec, "op", cut) is None
    assert rec.counts["op"]["cut"] == 1
    assert await run_op(rec, "op", refused, retries=2) is None
    assert rec.counts["op"]["refused"] == 2 and rec.counts["op"]["VIOLATION"] == 2  # still refused after 2
    window.end = time.monotonic() - 60  # long over: its aftermath too
    assert await run_op(rec, "op", cut) is None
    assert rec.counts["op"]["VIOLATION"] == 3
    assert rec.counts["slow"]["VIOLATION"] == 1
    assert rec.pending == 0


def test_percentiles_are_nearest_rank() -> None:
    values = [float(i) for i in range(1, 1001)]
    assert [percentile(values, q) for q in (0.5, 0.99, 0.999)] == [500.0, 990.0, 999.0]
    assert percentile([3.0], 0.999) == 3.0


def test_durations() -> None:
    assert [seconds(s) for s in ("45", "45s", "10m", "1.5h")] == [45, 45, 600, 5400]
    with pytest.raises(Exception, match="not a duration"):
        seconds("ten minutes")


async def test_descriptors_are_told_apart_by_kind() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    before = describe_fds(os.getpid(), {port: "mine"})
    conn = socket.create_connection(("127.0.0.1", port))
    try:
        after = describe_fds(os.getpid(), {port: "mine"})
        assert before.get("tcp mine listen") == 1
        assert after.get("tcp mine established", 0) >= before.get("tcp mine established", 0) + 1
        # Every descriptor has a kind (listing our own /proc/self/fd opens one more, briefly).
        assert sum(after.values()) in (proc_fds(os.getpid()) - 1, proc_fds(os.getpid()))
    finally:
        conn.close()
        server.close()
        await server.wait_closed()


async def test_a_socket_whose_peer_reset_it_is_still_told_by_what_it_was() -> None:
    """A connection reset by its peer leaves every kernel table (state CLOSED) while its owner
    holds it open; seen earlier, it keeps its kind (an idle Redis connection after a restart)."""
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()
    server = await asyncio.start_server(lambda r, w: accepted.put_nowait(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = socket.create_connection(("127.0.0.1", port))
    try:
        peer = await asyncio.wait_for(accepted.get(), 5)
        seen: dict[str, str] = {}
        assert describe_fds(os.getpid(), {port: "mine"}, seen).get("tcp mine established", 0) >= 1
        sock = peer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.transport.abort()  # RST
        await eventually(lambda: describe_fds(os.getpid(), {port: "mine"}, seen).get("tcp mine (peer gone)"))
        assert describe_fds(os.getpid(), {port: "mine"}).get("socket (other)", 0) >= 1  # unnamed without it
    finally:
        conn.close()
        server.close()
        await server.wait_closed()

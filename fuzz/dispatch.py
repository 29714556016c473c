"""The server end to end: fuzzed lines through an in-memory connection, every answer checked.

A small server (tools with typed arguments, a resource template, a prompt) is connected
through :func:`mcpkit.testing.memory_channel_pair`, optionally initialized first (2025-11-25,
or 2025-03-26 where batches are allowed), and fed the input's lines as a client would write them.

Invariants:

* every well-formed request line gets **exactly one** answer under its id (a duplicate id
  answered -32600 still counts as its answer); a request named by a ``notifications/cancelled``
  line, or a long-lived ``subscriptions/listen``, may get none;
* no answer carries an id nobody asked with; answers with a null id are -32700 or -32600 only;
* nothing is an internal error (-32603: a handler raised), and nothing is logged at ERROR;
* an unknown method is -32601 (or -32602/-32600 when the session refuses it first); a
  well-formed JSON line is never -32700;
* the connection shuts down cleanly and keeps nothing once closed (no request in flight, no
  answer awaited), and each input is served within the time budget.

Input layout: byte 0 picks the prologue (0: none, 1: 2025-11-25, 2: 2025-03-26), the rest is
the stream the client writes, split into lines (at most 24).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from typing import Any

import msgspec
from hypothesis import strategies as st

from mcpkit import MCPServer
from mcpkit.protocol.requests import SERVER_METHODS
from mcpkit.testing import memory_channel_pair

from ._harness import HANG, Finding, Target, corpus_of, json_values, timed
from .envelope import _BAD, _is_id, _python_view

MAX_LINES = 24
SENTINEL = "fuzz-sentinel"
#: Requests that may legitimately stay open past the input (or are answered elsewhere).
_OPEN_ENDED = frozenset({"subscriptions/listen", "tasks/result"})


def _server() -> MCPServer:
    server = MCPServer("fuzz", "1.0", page_size=2)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def add(a: int, b: float = 1.0, tags: list[str] | None = None) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def later(flag: bool = False) -> dict[str, bool]:
        """An async tool, answered from a task."""
        await asyncio.sleep(0)
        return {"flag": flag}

    @server.resource("file:///{path}")
    def file(path: str) -> str:
        return path

    @server.resource("config://app")
    def config() -> str:
        return "{}"

    @server.prompt()
    def greet(name: str, style: str = "plain") -> str:
        return f"hello {name}"

    return server


_SERVER = _server()
_loop: asyncio.AbstractEventLoop | None = None


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_errors = _Errors()


def _prologue(choice: int) -> list[dict[str, Any]]:
    if choice == 0:
        return []
    version = "2025-11-25" if choice == 1 else "2025-03-26"
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
    return [{"jsonrpc": "2.0", "id": "fuzz-init", "method": "initialize", "params": init}]


class _Expect:
    """What the client is owed, read from the lines with Python's own JSON parser."""

    def __init__(self, lines: list[bytes], batches: bool) -> None:
        self.exact: Counter[Any] = Counter()  # id -> answers owed
        self.loose: Counter[Any] = Counter()  # id -> answers allowed on top
        self.unknown: set[Any] = set()  # ids of requests for methods no server serves
        self.json_lines: set[int] = set()
        self.others = 0  # lines that are not requests (may earn one null-id error each)
        reinit = False
        docs = [_python_view(line) for line in lines]
        for doc in docs:
            for item in doc if isinstance(doc, list) else [doc]:
                if isinstance(item, dict) and item.get("method") == "initialize":
                    reinit = True
        for i, doc in enumerate(docs):
            if doc is not _BAD:
                self.json_lines.add(i)
            else:
                # Not UTF-8 (or not JSON): -32700, under the id when the rest reads (jsonrpc.py).
                lenient = _lenient_id(lines[i])
                if lenient is not _NONE:
                    self.loose[lenient] += 1
            if isinstance(doc, list):
                self.others += 1
                for item in doc:
                    rid = _request_id(item)
                    if rid is _NONE and isinstance(item, dict) and _is_id(item.get("id")):
                        self.loose[item["id"]] += 1
                    elif rid is not _NONE:
                        (self.exact if batches and not reinit and doc else self.loose)[rid] += 1
                continue
            rid = _request_id(doc)
            if rid is _NONE:
                self.others += 1
                if isinstance(doc, dict) and _is_id(doc.get("id")):
                    self.loose[doc["id"]] += 1  # an invalid request answered -32600 under its id
                if isinstance(doc, dict) and doc.get("method") == "notifications/cancelled":
                    params = doc.get("params")
                    if isinstance(params, dict) and _is_id(params.get("requestId")):
                        self._cancel(params["requestId"])
                continue
            if doc["method"] in _OPEN_ENDED:
                self.loose[rid] += 1
            else:
                self.exact[rid] += 1
            if doc["method"] not in SERVER_METHODS:
                self.unknown.add(rid)

    def _cancel(self, rid: Any) -> None:
        self.loose[rid] += self.exact.pop(rid, 0) + 1


_NONE = object()


def _lenient_id(line: bytes) -> Any:
    try:
        doc = json.loads(line.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return _NONE
    if isinstance(doc, dict) and _is_id(doc.get("id")):
        return doc["id"]
    return _NONE


def _request_id(doc: Any) -> Any:
    if (
        isinstance(doc, dict)
        and doc.get("jsonrpc") == "2.0"
        and isinstance(doc.get("method"), str)
        and _is_id(doc.get("id"))
        and isinstance(doc.get("params", {}), dict)
        and "result" not in doc
        and "error" not in doc
    ):
        return doc["id"]
    return _NONE


async def _serve(prologue: int, lines: list[bytes]) -> list[dict[str, Any]]:
    ours, peer = memory_channel_pair()
    engine = _SERVER.connect(ours)
    runner = asyncio.create_task(engine.run())
    answers: list[dict[str, Any]] = []

    async def until(done: Any) -> None:
        while not done():
            batch = await peer.read()
            if batch is None:
                return
            for line in batch:
                value = msgspec.json.decode(line)  # type: ignore[arg-type]
                for message in value if isinstance(value, list) else [value]:
                    if "method" not in message:  # the server's own requests are not answers
                        answers.append(message)

    try:
        async with asyncio.timeout(HANG):
            for message in _prologue(prologue):
                peer.write(msgspec.json.encode(message))
                await until(lambda: any(a.get("id") == "fuzz-init" for a in answers))
                peer.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            answers.clear()
            expect = _Expect(lines, batches=prologue == 2)
            for line in lines:
                peer.write(line)

            def owed() -> bool:
                got = Counter(a.get("id") for a in answers)
                return all(got[rid] >= n for rid, n in expect.exact.items())

            await until(owed)
            peer.write(
                msgspec.json.encode({"jsonrpc": "2.0", "id": SENTINEL, "method": "ping", "params": {}})
            )
            await until(lambda: any(a.get("id") == SENTINEL for a in answers))
    except TimeoutError:
        got = Counter(a.get("id") for a in answers)
        missing = {rid: n - got[rid] for rid, n in expect.exact.items() if got[rid] < n}
        raise Finding(f"requests left unanswered: {missing!r}; lines {lines!r}") from None
    finally:
        await peer.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(HANG):
                await runner
        if not runner.done():
            runner.cancel()
            raise Finding("the connection did not shut down after the client closed it")
    if runner.exception() is not None:
        raise Finding(f"the connection failed: {runner.exception()!r}")
    # Nothing of the connection outlives it: no request still held, no answer still awaited
    # (a finished task leaves the table in its done callback: one loop turn later).
    await asyncio.sleep(0)
    if engine._in_flight or engine._pending:
        raise Finding(f"state left after close: {list(engine._in_flight)!r} {list(engine._pending)!r}")
    _verify(expect, [a for a in answers if a.get("id") != SENTINEL], lines)
    return answers


def _verify(expect: _Expect, answers: list[dict[str, Any]], lines: list[bytes]) -> None:
    got = Counter(a.get("id") for a in answers)
    for rid, n in got.items():
        if rid is None:
            if n > expect.others:
                raise Finding(f"{n} null-id errors for {expect.others} non-request lines: {lines!r}")
            continue
        low = expect.exact.get(rid, 0)
        if not low <= n <= low + expect.loose.get(rid, 0):
            raise Finding(f"id {rid!r} answered {n} times, owed {low}: {lines!r}")
    for answer in answers:
        error = answer.get("error")
        if error is None:
            continue
        code = error.get("code")
        if code == -32603:
            raise Finding(f"internal error answered to {answer.get('id')!r}: {error}; lines {lines!r}")
        if answer.get("id") is None and code not in (-32700, -32600):
            raise Finding(f"a null-id error with code {code}: {error}")
        rid = answer.get("id")
        shared = expect.exact.get(rid, 0) + expect.loose.get(rid, 0) > 1  # the id of several requests
        if rid in expect.unknown and not shared and code not in (-32601, -32602, -32600):
            raise Finding(f"an unknown method answered {code}, not -32601: {error}")
        if code == -32700 and answer.get("id") is not None and "UTF-8" not in error.get("message", ""):
            raise Finding(f"a readable request answered -32700: {error}; lines {lines!r}")


def _loop_run(data: bytes) -> list[dict[str, Any]]:
    """Serve one input; the answers the client received (checked already)."""
    global _loop
    lines = [line for line in data[1:].split(b"\n") if line.strip()][:MAX_LINES]
    if _loop is None:
        _loop = asyncio.new_event_loop()
    _errors.records.clear()
    logger = logging.getLogger("mcpkit")
    logger.addHandler(_errors)  # only while this input is served (tests share the process)
    try:
        answers = _loop.run_until_complete(_serve(data[0] % 3, [line + b"\n" for line in lines]))
    finally:
        logger.removeHandler(_errors)
    if _errors.records:
        record = _errors.records[0]
        raise Finding(f"logged at ERROR: {record.getMessage()} {record.exc_info!r}; lines {lines!r}")
    return answers


def one_input(data: bytes) -> None:
    if data:
        _loop_run(data)


# -- hypothesis: lines a confused or hostile client would write -----------------------------------

_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
}
_PARAMS = {
    "tools/call": st.fixed_dictionaries(
        {"name": st.sampled_from(["echo", "add", "later", "nope"])},
        optional={
            "arguments": st.one_of(
                st.fixed_dictionaries({}, optional={"text": json_values, "a": json_values, "b": json_values}),
                json_values,
            )
        },
    ),
    "resources/read": st.fixed_dictionaries(
        {"uri": st.one_of(st.sampled_from(["config://app", "file:///a/b", "file:///"]), st.text(max_size=20))}
    ),
    "prompts/get": st.fixed_dictionaries(
        {"name": st.sampled_from(["greet", "nope"])},
        optional={"arguments": st.dictionaries(st.sampled_from(["name", "style", "x"]), json_values)},
    ),
    "completion/complete": st.fixed_dictionaries({"ref": json_values, "argument": json_values}),
}


@st.composite
def _line(draw: st.DrawFn, ids: list[Any]) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=60)).replace(b"\n", b" ")
    method = draw(
        st.one_of(
            st.sampled_from(sorted(SERVER_METHODS)), st.sampled_from(list(_PARAMS)), st.text(max_size=8)
        )
    )
    params: Any = (
        draw(_PARAMS[method])
        if method in _PARAMS
        else draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3))
    )
    if draw(st.booleans()) and isinstance(params, dict):
        params["_meta"] = _META
    doc: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if kind == 1:
        doc = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": draw(st.sampled_from(ids))},
        }
    elif kind == 2:
        del doc["params"]
    elif kind == 3:
        doc.pop(draw(st.sampled_from(sorted(doc))))
    if kind != 1 and draw(st.integers(0, 5)):
        doc["id"] = draw(st.sampled_from(ids))
    text = json.dumps(doc)
    if kind == 4:
        return b"[" + text.encode() + b"," + text.encode() + b"]"
    if kind == 5:
        cut = draw(st.integers(0, len(text)))
        return text[:cut].encode()
    return text.encode("utf-8", "surrogatepass")


@st.composite
def _streams(draw: st.DrawFn) -> bytes:
    ids = draw(st.lists(st.one_of(st.integers(-3, 10), st.text(max_size=3)), min_size=1, max_size=4))
    lines = draw(st.lists(_line(ids), min_size=1, max_size=8))
    return bytes([draw(st.integers(0, 2))]) + b"\n".join(lines)


_seeds = corpus_of("dispatch")
strategy: st.SearchStrategy[bytes] = st.one_of(
    _streams(),
    st.builds(lambda p, s: bytes([p]) + s, st.integers(0, 2), st.sampled_from(_seeds))
    if _seeds
    else st.nothing(),
)

TARGET = Target(
    "dispatch",
    timed(one_input),
    strategy,
    ("mcpkit.session.engine", "mcpkit.server.dispatcher", "mcpkit.server.app", "mcpkit.protocol.jsonrpc"),
)

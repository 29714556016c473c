"""Raw JSON-RPC traffic capture: a :class:`Channel` wrapper that records every
message read or written, with its direction, time and (for responses) how long
the request it answers took."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from ..protocol.errors import MCPError
from ..protocol.framing import Oversized
from ..session.channel import Channel, PushChannel, Receiver, pushes
from ._events import EventHub

__all__ = ["RecordingChannel", "TrafficRecorder"]

#: Messages bigger than this are shown as a preview only.
MAX_KEPT_BYTES = 512 * 1024
PREVIEW_BYTES = 4096
_PENDING_LIMIT = 10_000

_decode = msgspec.json.Decoder().decode


class TrafficRecorder:
    """Turns raw messages into ``traffic`` events on an :class:`EventHub`.

    ``out`` is inspector → server, ``in`` is server → inspector. A response's
    ``durationMs`` is measured from the request it answers (in either direction).
    """

    def __init__(self, hub: EventHub) -> None:
        self.hub = hub
        # (direction the request went, id) -> perf_counter when it went.
        self._pending: dict[tuple[str, int | str], float] = {}

    def record(self, direction: str, data: bytes | Oversized) -> None:
        now = time.perf_counter()
        if isinstance(data, Oversized):
            self.hub.publish(
                "traffic",
                {
                    "direction": direction,
                    "kind": "oversized",
                    "preview": bytes(data.head).decode("utf-8", "replace"),
                },
            )
            return
        raw = bytes(data)
        try:
            message = _decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            self.hub.publish(
                "traffic",
                {
                    "direction": direction,
                    "kind": "invalid",
                    "size": len(raw),
                    "preview": raw[:PREVIEW_BYTES].decode("utf-8", "replace"),
                },
            )
            return
        if isinstance(message, list):
            for item in message:
                self._one(direction, item, len(raw), now, batch=True)
        else:
            self._one(direction, message, len(raw), now, batch=False, raw=raw)

    def _one(
        self, direction: str, message: Any, size: int, now: float, *, batch: bool, raw: bytes = b""
    ) -> None:
        entry: dict[str, Any] = {"direction": direction, "size": size}
        if batch:
            entry["batch"] = True
        kind = "invalid"
        if isinstance(message, dict):
            rid = message.get("id")
            method = message.get("method")
            if isinstance(method, str):
                entry["method"] = method
                if isinstance(rid, int | str) and not isinstance(rid, bool):
                    kind = "request"
                    entry["id"] = rid
                    if len(self._pending) < _PENDING_LIMIT:
                        self._pending[(direction, rid)] = now
                else:
                    kind = "notification"
            elif "result" in message or "error" in message:
                kind = "error" if "error" in message else "response"
                if isinstance(rid, int | str) and not isinstance(rid, bool):
                    entry["id"] = rid
                    other = "in" if direction == "out" else "out"
                    started = self._pending.pop((other, rid), None)
                    if started is not None:
                        entry["durationMs"] = round((now - started) * 1000, 3)
        entry["kind"] = kind
        if size <= MAX_KEPT_BYTES or batch:
            entry["message"] = message
        else:
            entry["preview"] = raw[:PREVIEW_BYTES].decode("utf-8", "replace")
            entry["truncated"] = True
        self.hub.publish("traffic", entry)

    def forget(self) -> None:
        self._pending.clear()


class RecordingChannel:
    """Wraps a :class:`Channel`; every message through it is recorded.

    Attributes it does not define (``tool_headers``, ``start_listening``,
    ``protocol_version``, ``last_status`` …) are read from and written to the
    wrapped channel, so the client treats it exactly like the real one.
    """

    _own = frozenset({"_inner", "_recorder", "_on_eof"})
    _inner: Channel
    _recorder: TrafficRecorder
    _on_eof: Callable[[], None] | None

    def __new__(
        cls, inner: Channel, recorder: TrafficRecorder, on_eof: Callable[[], None] | None = None
    ) -> RecordingChannel:
        # A push channel is wrapped by a push channel (a class of its own: the
        # engine decides push or pull once per channel class).
        if cls is RecordingChannel and pushes(inner):
            cls = _RecordingPushChannel
        return object.__new__(cls)

    def __init__(
        self, inner: Channel, recorder: TrafficRecorder, on_eof: Callable[[], None] | None = None
    ) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_recorder", recorder)
        object.__setattr__(self, "_on_eof", on_eof)

    @property
    def inner(self) -> Channel:
        return self._inner

    async def read(self) -> list[bytes | Oversized] | None:
        batch = await self._inner.read()
        if batch is None:
            if self._on_eof is not None:
                self._on_eof()
            return None
        for item in batch:
            self._recorder.record("in", item)
        return batch

    def write(self, data: bytes, related: int | str | None = None) -> None:
        self._recorder.record("out", data)
        self._inner.write(data, related)

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        self._recorder.record("out", data)
        self._inner.respond(request_id, data, error)

    async def drain(self) -> None:
        await self._inner.drain()

    async def close(self) -> None:
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        if name in _PUSH_MEMBERS:
            # Only _RecordingPushChannel has these: recording must see every pushed line.
            raise AttributeError(name)
        return getattr(object.__getattribute__(self, "_inner"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._own:
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)


_PUSH_MEMBERS = frozenset({"set_receiver", "hold_input", "release_input"})


class _RecordingPushChannel(RecordingChannel):
    """A :class:`RecordingChannel` around a channel that pushes its input."""

    _inner: PushChannel

    def set_receiver(self, receiver: Receiver) -> None:
        """Push mode: each line is recorded before the engine sees it."""
        record = self._recorder.record
        on_eof = self._on_eof

        def receive(batch: list[bytes | Oversized] | None) -> None:
            if batch is None:
                if on_eof is not None:
                    on_eof()
            else:
                for item in batch:
                    record("in", item)
            receiver(batch)

        self._inner.set_receiver(receive)

    def hold_input(self) -> None:
        self._inner.hold_input()

    def release_input(self) -> None:
        self._inner.release_input()

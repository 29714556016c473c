"""session/relay.py: a request of one engine answered with the answer of a request on another.

The caller speaks to the front engine by hand (a Wire, for exact ids and order); the front
engine's dispatcher relays ``relay/*`` requests to a back engine whose peer serves them
(TestDispatcher handlers). Waits are on events or on the next message of an ordered stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import msgspec
import pytest
from test_engine import STEP, Gate, TestDispatcher, Wire, paired, until, wired

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.errors import INTERNAL_ERROR, REQUEST_TIMEOUT, MCPError
from mcpkit.protocol.jsonrpc import Request
from mcpkit.session.engine import Engine, Later
from mcpkit.session.relay import Relay

pytestmark = pytest.mark.timeout(30)


class Front(TestDispatcher):
    """Relays ``relay/<method>`` to ``back`` as ``<method>``; ``make`` builds the relay."""

    def __init__(self, back: Engine[Any], **relay_options: Any) -> None:
        super().__init__()
        self.back = back
        self.engine: Engine[Any] | None = None
        self.options = relay_options
        self.made: list[Relay] = []
        self.kind: type[Relay] = Relay

    def answer_now(self, request: Request) -> Any:
        if not request.method.startswith("relay/"):
            return None
        assert self.engine is not None
        params = jsonrpc.decode_raw(request.params) if request.params is not None else {}
        options = {"timeout": None, **self.options}
        relay = self.kind(self.engine, request, self.back, request.method[6:], params, **options)
        self.made.append(relay)
        return Later(relay)


@contextlib.asynccontextmanager
async def relayed(
    handlers: dict[str, Any], kind: type[Relay] = Relay, **relay_options: Any
) -> AsyncIterator[tuple[Wire, Front, Engine[Any], TestDispatcher]]:
    """(the caller's wire, the front dispatcher, the back engine, the backend's dispatcher)."""
    backend = TestDispatcher(handlers)
    async with paired(backend) as (back, _far):
        front = Front(back, **relay_options)
        front.kind = kind
        async with wired(front) as (engine, wire):
            front.engine = engine
            yield wire, front, back, backend


async def _echo(engine: Engine[Any], request: Request, params: dict[str, Any]) -> Any:
    return {"echo": params, "id": request.id}


async def test_the_answer_goes_back_under_the_callers_id() -> None:
    async with relayed({"echo": _echo}) as (wire, front, back, _):
        wire.request("caller-7", "relay/echo", {"x": 1})
        answer = await wire.recv()
        assert answer["id"] == "caller-7"
        # The backend saw the request under the back engine's own id (its first: 1).
        assert answer["result"] == {"echo": {"x": 1}, "id": 1}
        assert front.made[0].done() and not back._pending
        await wire.ping()
        assert front.engine is not None and front.engine.in_flight_count() == 0


async def test_an_error_answer_goes_back_as_it_came() -> None:
    async def refuse(engine: Engine[Any], request: Request, params: dict[str, Any]) -> Any:
        raise MCPError(-32000, "refused", {"why": "because"})

    async with relayed({"refuse": refuse}) as (wire, _, _back, _b):
        wire.request(3, "relay/refuse")
        answer = await wire.recv()
        assert answer == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32000, "message": "refused", "data": {"why": "because"}},
        }


async def test_the_callers_cancellation_reaches_the_backend_under_its_id() -> None:
    gate = Gate()
    async with relayed({"gate": gate}) as (wire, front, back, _):
        wire.request(77, "relay/gate")  # (the back engine's id for it: 1)
        await until(gate.started)
        wire.notify("notifications/cancelled", {"requestId": 77, "reason": "no longer needed"})
        await until(gate.cancelled)
        await wire.ping()  # nothing was answered for request 77
        assert front.made[0].cancelled() and not back._pending
        assert front.engine is not None and front.engine.in_flight_count() == 0


async def test_a_timeout_fails_the_caller_and_cancels_at_the_backend() -> None:
    gate = Gate()
    async with relayed({"gate": gate}, timeout=0.05) as (wire, _, back, _b):
        wire.request(9, "relay/gate")
        answer = await wire.recv()
        assert answer["id"] == 9 and answer["error"]["code"] == REQUEST_TIMEOUT
        assert "gate timed out after 0.05s" in answer["error"]["message"]
        await until(gate.cancelled)
        assert not back._pending and len(back._deadlines) == 0


async def test_the_backend_closing_fails_the_caller() -> None:
    gate = Gate()
    async with relayed({"gate": gate}) as (wire, _, back, _b):
        wire.request(4, "relay/gate")
        await until(gate.started)
        await back.shutdown(0)
        answer = await wire.recv()
        assert answer["id"] == 4 and answer["error"]["code"] == INTERNAL_ERROR
        assert "connection closed" in answer["error"]["message"]


class Checked(Relay):
    """Refuses results without ``ok``; an error -1 is answered by trying again, in a task."""

    def answered(self, result: msgspec.Raw) -> Any:
        value = msgspec.json.decode(result)
        if not value.get("ok"):
            raise ValueError("not ok")
        return {"checked": value}

    def failed(self, exc: BaseException) -> MCPError:
        return MCPError(INTERNAL_ERROR, f"the backend failed: {exc}")

    def retry(self, error: MCPError) -> Awaitable[Any] | None:
        if error.code != -1:
            return None
        return self._again()

    async def _again(self) -> Any:
        await asyncio.sleep(0)  # (it waits: a task of its own answers)
        return {"again": True}


async def test_what_a_subclass_makes_of_the_answer() -> None:
    async def answer(engine: Engine[Any], request: Request, params: dict[str, Any]) -> Any:
        if params.get("code"):
            raise MCPError(params["code"], "no")
        return params

    async with relayed({"answer": answer}, kind=Checked) as (wire, front, _, _b):
        wire.request(1, "relay/answer", {"ok": True})
        assert (await wire.recv())["result"] == {"checked": {"ok": True}}
        wire.request(2, "relay/answer", {"ok": False})
        assert (await wire.recv())["error"] == {
            "code": INTERNAL_ERROR,
            "message": "the backend failed: not ok",
        }
        wire.request(3, "relay/answer", {"code": -1})
        assert await wire.recv() == {"jsonrpc": "2.0", "id": 3, "result": {"again": True}}
        wire.request(4, "relay/answer", {"code": -2})
        assert (await wire.recv())["error"]["code"] == -2
        await wire.ping()
        assert front.engine is not None and front.engine.in_flight_count() == 0


async def test_progress_for_the_relayed_request_is_given_to_its_callback() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def slow(engine: Engine[Any], request: Request, params: dict[str, Any]) -> Any:
        token = params["_meta"]["progressToken"]
        engine.notify("notifications/progress", {"progressToken": token, "progress": 1, "total": 2})
        return {"token": token}

    options = {"on_progress": lambda *args: seen.append(args)}
    async with relayed({"slow": slow}, **options) as (wire, _, back, _b):
        wire.request("c", "relay/slow", {})
        answer = await wire.recv()
        assert answer["result"] == {"token": 1}  # the back engine's id, not the caller's
        assert seen == [(1.0, 2.0, None)] and not back._progress


async def test_shutting_the_front_down_cancels_a_relay_in_flight() -> None:
    gate = Gate()
    async with relayed({"gate": gate}) as (wire, front, back, _):
        wire.request(5, "relay/gate")
        await until(gate.started)
        assert front.engine is not None
        async with asyncio.timeout(STEP):
            await front.engine.shutdown(0)  # (asyncio.wait on the relay, then its cancellation)
        await until(gate.cancelled)
        assert front.made[0].cancelled() and not back._pending

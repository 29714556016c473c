"""How a :class:`~mcpkit.client.Client` makes its requests: one request sent (in a CLIENT span
when tracing is on), the retry with a version the server supports, the rounds of
``input_required`` answers (2026-07-28 basic/patterns/mrtr) until the result is complete, and
the pages of a list.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from msgspec import UNSET

from .. import telemetry as _telemetry
from ..protocol.errors import INVALID_REQUEST, MCPError
from ..protocol.tasks import CreateTaskResult
from ..session.engine import Engine, ProgressCallback
from .handshake import adopt_supported_version
from .targets import _HTTP, _transport_name
from .task_calls import Outstanding
from .tasks import TaskCreated

if TYPE_CHECKING:
    from .client import Client

__all__ = ["all_pages", "call", "send"]

# Requests that may answer input_required (2026-07-28 basic/patterns/mrtr "Supported Requests").
_INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


class _InputRequired(msgspec.Struct, rename="camel"):
    result_type: str | msgspec.UnsetType = UNSET
    input_requests: dict[str, dict[str, Any]] | msgspec.UnsetType = UNSET
    request_state: str | msgspec.UnsetType = UNSET


_peek = msgspec.json.Decoder(_InputRequired)

R = TypeVar("R")


async def call(
    client: Client,
    method: str,
    params: dict[str, Any],
    result_type: type[R],
    *,
    timeout: float | None = None,
    on_progress: ProgressCallback | None = None,
    declare_tasks: bool | None = None,
    track: Outstanding | None = None,
) -> R:
    session = client._session
    if session is None:
        raise RuntimeError("client is not connected")
    for _ in range(client.max_input_rounds + 1):
        try:
            if track is not None:  # (a call that may be answered with a task)
                raw = await track.send(
                    client,
                    session,
                    method,
                    client._params(params, declare_tasks),
                    timeout if timeout is not None else client.timeout,
                    on_progress,
                )
            elif _telemetry.enabled:  # (checked here too: the untraced path makes no extra call)
                raw = await client._send(
                    session,
                    method,
                    client._params(params, declare_tasks),
                    timeout if timeout is not None else client.timeout,
                    on_progress,
                )
            else:
                raw = await session.request(
                    method,
                    client._params(params, declare_tasks),
                    timeout=timeout if timeout is not None else client.timeout,
                    on_progress=on_progress,
                )
        except MCPError as exc:
            if not adopt_supported_version(client, exc):
                raise
            # basic/versioning: retry with a mutually supported version.
            wire = client._params(params, declare_tasks)
            limit = timeout if timeout is not None else client.timeout
            raw = await (
                track.send(client, session, method, wire, limit, on_progress)
                if track is not None
                else client._send(session, method, wire, limit, on_progress)
            )
        if not client.is_modern or method not in _INPUT_METHODS:
            return msgspec.json.decode(raw, type=result_type)
        peek = _peek.decode(raw)
        if peek.result_type in (UNSET, "complete"):
            # A result without resultType is complete (basic/index "ResultType").
            return msgspec.json.decode(raw, type=result_type)
        declared = client.options.tasks if declare_tasks is None else declare_tasks
        if peek.result_type == "task" and method == "tools/call" and declared:
            # Followed by call_tool/start_tool; undeclared, it is an invalid answer (SEP-2663).
            raise TaskCreated(msgspec.json.decode(raw, type=CreateTaskResult))
        if peek.result_type != "input_required":
            raise MCPError(INVALID_REQUEST, f"unrecognised resultType {peek.result_type!r}")
        params = await answer_inputs(client, params, peek)
    raise MCPError(
        INVALID_REQUEST, f"{method}: still asking for input after {client.max_input_rounds} rounds"
    )


async def answer_inputs(client: Client, params: dict[str, Any], peek: _InputRequired) -> dict[str, Any]:
    """The retry's params: fulfil every input request, echo requestState byte-exact."""
    responses: dict[str, Any] = {}
    for key, request in (peek.input_requests or {}).items():
        answer = await client.handlers.answer(str(request.get("method")), request.get("params") or {})
        responses[key] = msgspec.to_builtins(answer)
    retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    retry["inputResponses"] = responses
    if peek.request_state is not UNSET:
        retry["requestState"] = peek.request_state
    return retry


def send(
    client: Client,
    session: Engine[Any],
    method: str,
    params: dict[str, Any],
    timeout: float | None,
    on_progress: ProgressCallback | None = None,
    request_id: int | str | None = None,
) -> Awaitable[msgspec.Raw]:
    """Send one request; with tracing on, inside a CLIENT span whose context rides in ``_meta``."""
    if _telemetry.enabled:
        target = client._target
        return _telemetry.request(
            session,
            method,
            params,
            timeout,
            on_progress,
            request_id,
            version=client.protocol_version.value if client.protocol_version is not None else None,
            transport=_transport_name(target, session),
            url=target.url if isinstance(target, _HTTP) else None,
        )
    return session.request(method, params, timeout=timeout, on_progress=on_progress, request_id=request_id)


async def all_pages(client: Client, method: str, result_type: type[Any], field: str) -> list[Any]:
    """Every item of a paginated list request (``field`` of each page), following ``nextCursor``."""
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(client.options.max_list_pages):
        params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
        page = await client._call(method, params, result_type)
        items.extend(getattr(page, field))
        nxt = page.next_cursor
        if not isinstance(nxt, str) or nxt in seen:
            return items
        seen.add(nxt)
        cursor = nxt
    raise MCPError(
        INVALID_REQUEST,
        f"{method}: the server still had more pages after {client.options.max_list_pages} (max_list_pages)",
    )

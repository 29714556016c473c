"""Requests to a server, decoded once into a typed object.

The envelope pass (:mod:`.jsonrpc`) leaves ``params`` as raw bytes. This is
the second and last pass: :func:`decode_request` turns them into the method's
typed params struct and lifts out ``_meta``. The resulting
:class:`ServerRequest` is what flows from the transport, through the engine,
to the server's handlers; the transport fills in what only it knows (the
principal, its own name) and the server's lifecycle fills in ``scope``. Nothing
downstream parses the params again.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from . import types as t
from .auth import Principal
from .errors import INVALID_PARAMS, PARSE_ERROR, MCPError
from .jsonrpc import Request
from .lifecycle import RequestScope
from .skills import GetSkillParams, ReadDirectoryParams
from .tasks import TaskParams, UpdateTaskParams

__all__ = ["SERVER_METHODS", "ServerRequest", "decode_request"]

RequestId = int | str


_NAMED = (t.CallToolParams, t.GetPromptParams)
_URI = (t.UriParams, GetSkillParams, ReadDirectoryParams)


class ServerRequest(msgspec.Struct):
    """One inbound request to a server, decoded once.

    A struct for its cost: made on every request, it is built in C.
    """

    id: RequestId
    method: str
    #: The method's params struct (``types.CallToolParams`` for ``tools/call``, ...);
    #: for an unknown method or params that did not validate, the bare ``types.Params``.
    params: Any
    #: ``params._meta`` (None when absent): the protocol version, client
    #: capabilities and progress token of a modern request live here.
    meta: dict[str, Any] | None
    #: Why the request cannot be served as sent (unknown method, invalid params).
    #: Raised by the server after the era checks: a method the request's era
    #: removed is -32601 even when its params are also wrong.
    error: MCPError | None = None
    #: The authenticated caller (HTTP with an authenticator), set by the transport.
    principal: Principal | None = None
    #: The transport it came over: ``"stdio"``, ``"http"``, ``"sse"`` or ``"memory"``.
    transport: str = ""
    #: Era, revision and client facts, set when the server's lifecycle admits it.
    scope: RequestScope | None = None
    #: The legacy HTTP session (``Mcp-Session-Id``) it belongs to, if any.
    session: str | None = None
    #: The peer's network address (``host:port``), where the transport has one (HTTP).
    peer: str | None = None
    #: Data the server keeps for this request while serving it (``Context.state``).
    state: dict[Any, Any] | None = None

    @property
    def known(self) -> bool:
        """Whether the method is one a server serves (in some revision)."""
        return self.method in SERVER_METHODS

    @property
    def target(self) -> str | None:
        """The tool or prompt name, the resource URI or the task id a request is about."""
        params = self.params
        if isinstance(params, _NAMED):
            return params.name
        if isinstance(params, _URI):
            return params.uri
        if isinstance(params, TaskParams):
            return params.task_id
        return None

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The arguments of ``tools/call`` and ``prompts/get`` (None when absent)."""
        params = self.params
        if isinstance(params, _NAMED) and params.arguments is not UNSET:
            return params.arguments
        return None


def _decoder(tp: type[Any]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp)


_BARE = _decoder(t.Params)

#: Every request method a server serves, with the decoder of its params.
SERVER_METHODS: dict[str, msgspec.json.Decoder[Any]] = {
    "initialize": _decoder(t.InitializeRequestParams),
    "ping": _BARE,
    "server/discover": _BARE,
    "tools/list": _decoder(t.PaginatedParams),
    "tools/call": _decoder(t.CallToolParams),
    "resources/list": _decoder(t.PaginatedParams),
    "resources/templates/list": _decoder(t.PaginatedParams),
    "resources/read": _decoder(t.UriParams),
    "resources/subscribe": _decoder(t.UriParams),
    "resources/unsubscribe": _decoder(t.UriParams),
    "prompts/list": _decoder(t.PaginatedParams),
    "prompts/get": _decoder(t.GetPromptParams),
    "completion/complete": _decoder(t.CompleteParams),
    "logging/setLevel": _decoder(t.SetLevelParams),
    "subscriptions/listen": _decoder(t.ListenParams),
    # Tasks: get and cancel in both eras (the extension, 2026-07-28; the experimental
    # tasks, 2025-11-25), update in the extension, result and list in 2025-11-25 only.
    "tasks/get": _decoder(TaskParams),
    "tasks/update": _decoder(UpdateTaskParams),
    "tasks/cancel": _decoder(TaskParams),
    "tasks/result": _decoder(TaskParams),
    "tasks/list": _decoder(t.PaginatedParams),
    # The skills extension (SEP-2640): served where the server declares it;
    # resources/directory/read only with its directoryRead setting.
    "skills/list": _decoder(t.PaginatedParams),
    "skills/get": _decoder(GetSkillParams),
    "resources/directory/read": _decoder(ReadDirectoryParams),
}

_EMPTY = b"{}"


def decode_request(
    request: Request, principal: Principal | None = None, transport: str = ""
) -> ServerRequest:
    """Decode ``request``'s params by its method; never raises.

    What cannot be served is recorded in :attr:`ServerRequest.error`, with as
    much as could be read (``_meta`` above all) kept, so the server can still
    tell which era the request belongs to before it answers. ``principal`` and
    ``transport`` are what the transport knows of where it came from.
    """
    raw = request.params or _EMPTY
    decoder = SERVER_METHODS.get(request.method)
    if decoder is not None:
        try:
            params = decoder.decode(raw)
        except msgspec.ValidationError as exc:
            error = MCPError(INVALID_PARAMS, f"Invalid params: {exc}")
        except msgspec.DecodeError as exc:
            # Reached only for bytes the envelope pass skipped over, e.g. bad UTF-8.
            error = MCPError(PARSE_ERROR, f"Parse error: {exc}")
        else:
            meta = params.meta
            return ServerRequest(
                request.id,
                request.method,
                params,
                None if meta is UNSET else meta,
                None,
                principal,
                transport,
            )
    else:
        error = MCPError.method_not_found(request.method)
    try:
        params = _BARE.decode(raw)
    except msgspec.DecodeError:
        params = t.Params()
    meta = params.meta
    return ServerRequest(
        request.id, request.method, params, meta if meta is not UNSET else None, error, principal, transport
    )

"""The legacy-session routes of the Streamable HTTP app (2025-11-25 and older):
POST in a session (or stateless), batches (2025-03-26), the GET stream and DELETE.

:class:`LegacyRoutes` is a mixin of :class:`~mcpkit.transports.http.app.StreamableHTTPApp`;
it reads the app's server, settings, sessions and shared store.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ...protocol import http as h
from ...protocol import jsonrpc
from ...protocol.errors import INVALID_REQUEST, ProtocolError
from ...protocol.jsonrpc import ErrorResponse, Request, Response
from ...protocol.requests import ServerRequest, decode_request
from ...protocol.versions import ProtocolVersion, parse_version
from ...scale.errors import RedisUnavailable
from ...session.engine import Engine
from .answer import ReplyForm, SingleChannel, answer, jsonrpc_error
from .asgi import HTTPFailure, Receive, Send, respond
from .batches import answer_batch
from .contract import ServedApp, ServedConnection
from .principal import current_principal as _principal
from .sessions import LegacyHTTPSession, SessionStore, new_session_id
from .settings import HTTPSettings
from .streams import ResponseStream, pump_sse

if TYPE_CHECKING:
    from .legacy_sse import LegacySSE
    from .shared import SharedSessionStore

__all__ = ["LegacyRoutes", "served"]


def served(engine: Engine[Any]) -> ServedConnection:
    """The per-connection state behind an engine made by :meth:`ServedApp.connect`."""
    return cast("ServedConnection", engine.dispatcher)


def _id_of(message: jsonrpc.Message) -> int | str | None:
    return message.id if isinstance(message, Request | Response | ErrorResponse) else None


class LegacyRoutes:
    """The legacy-session half of the app (see the module documentation)."""

    server: ServedApp
    settings: HTTPSettings
    sessions: SessionStore
    shared: SharedSessionStore | None
    legacy_sse: LegacySSE | None

    if TYPE_CHECKING:

        def _check_scopes(self, request: ServerRequest) -> None: ...

        def _check_batch_scopes(self, requests: Sequence[ServerRequest]) -> None: ...

    async def _session_for(self, session_id: str) -> LegacyHTTPSession | None:
        """The session, if it exists and belongs to this caller.

        A session created by one principal is invisible to every other: the
        same 404 as an unknown id, so ids cannot be probed (CVE-2026-52869).
        """
        return (await self._claim_in(session_id, ()))[0]

    async def _claim_in(
        self, session_id: str, claims: Sequence[int | str]
    ) -> tuple[LegacyHTTPSession | None, Sequence[bool]]:
        """:meth:`_session_for`, also claiming request ids ``claims`` across workers
        (the second value: whether each was claimed; empty when unshared, where
        nothing is claimed). A session that is not this caller's keeps no claim
        made for it."""
        claimed: Sequence[bool] = ()
        if self.shared is None:
            session = self.sessions.get(session_id)
        elif session_id:
            session, claimed = await self.shared.find(session_id, claims)
        else:
            return None, claimed
        if session is None:
            return None, claimed
        principal = _principal.get()
        if session.principal != (principal.key if principal is not None else None):
            if self.shared is not None:
                self.shared.release(session_id, claims, claimed)
            return None, claimed
        return session, claimed

    async def _post_legacy(
        self,
        message: jsonrpc.Message,
        request: ServerRequest | None,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        version: ProtocolVersion | None,
        form: ReplyForm,
    ) -> None:
        if h.PROTOCOL_VERSION in headers and (version is None or version not in self.server.versions):
            # 2025-06-18+: an invalid or unsupported MCP-Protocol-Version is a 400.
            await jsonrpc_error(
                send,
                400,
                _id_of(message),
                INVALID_REQUEST,
                f"Unsupported MCP-Protocol-Version: {headers[h.PROTOCOL_VERSION]!r}",
            )
            return
        if self.settings.stateless:
            await self._post_stateless_legacy(request, receive, send, version, form)
            return
        session_id = headers.get(h.SESSION_ID)
        extra: list[tuple[bytes, bytes]] = []
        claimed = True
        if session_id is None:
            # Only initialize reaches here without a session (see _post).
            session = self._open_session()
            extra.append((b"mcp-session-id", session.id.encode()))
        else:
            wanted = (
                (request.id,)
                if self.shared is not None and request is not None and request.method != "initialize"
                else ()
            )
            found, flags = await self._claim_in(session_id, wanted)
            claimed = not flags or flags[0]
            if found is None:
                await jsonrpc_error(send, 404, _id_of(message), INVALID_REQUEST, "Session not found")
                return
            session = found
            if request is not None and request.method == "initialize":
                await jsonrpc_error(send, 400, request.id, INVALID_REQUEST, "Session already initialized")
                return
        session.touch()
        session.conn.principal = _principal.get()  # the latest token's scopes (step-up)
        if request is None:
            if self.shared is None or not self.shared.relay(session, message):
                session.engine.feed_message(message)
            await respond(send, 202, headers=extra)
            return
        if self.settings.auth is not None:
            try:
                self._check_scopes(request)
            except HTTPFailure:
                if self.shared is not None and session_id is not None and claimed:
                    self.shared.store.release(session.id, request.id)
                raise
        if not claimed or request.id in session.request_streams or session.engine.in_flight(request.id):
            if claimed and self.shared is not None and session_id is not None:
                self.shared.store.release(session.id, request.id)  # claimed here, not run
            await jsonrpc_error(
                send, 200, request.id, INVALID_REQUEST, f"id {request.id!r} is already in use"
            )
            return
        request.session = session.id
        claims = self.shared is not None and session_id is not None
        await self._serve_in_session(session, request, receive, send, form, extra, claims=claims)

    def _open_session(self) -> LegacyHTTPSession:
        """A new legacy session for ``initialize`` (refused past ``max_sessions``)."""
        sse_sessions = len(self.legacy_sse.sessions) if self.legacy_sse is not None else 0
        if len(self.sessions) + sse_sessions >= self.settings.max_sessions:
            raise HTTPFailure(503, "too many sessions", headers=[(b"retry-after", b"5")])
        principal = _principal.get()
        owner = principal.key if principal is not None else None
        if self.shared is not None:
            session = self.shared.new_session(new_session_id(), owner)
        else:
            session = LegacyHTTPSession(
                self.server,
                new_session_id(),
                self.settings.stream_queue_limit,
                self.settings.replay_events,
                principal=owner,
                clock=self.settings.clock,
            )
        self.sessions.add(session)
        return session

    async def _serve_in_session(
        self,
        session: LegacyHTTPSession,
        request: ServerRequest,
        receive: Receive,
        send: Send,
        form: ReplyForm,
        extra: list[tuple[bytes, bytes]],
        *,
        claims: bool,
    ) -> None:
        """Serve one request in a legacy session and answer it on its own stream.

        ``claims``: the request id was claimed across workers and is released
        when its handler ends.
        """
        stream = session.open_stream(request.id)
        session.engine.submit(request)
        session.engine.when_done(request.id, lambda: session.end_unanswered(stream))
        if claims:
            assert self.shared is not None
            self.shared.release_when_done(session, request.id)
        try:
            if self.shared is not None and request.method in self.shared.stateful:
                try:
                    await self.shared.commit(session, request, stream)
                except RedisUnavailable:
                    if request.method == "initialize":
                        self.sessions.remove(session.id)
                        await session.close()
                    raise
            await answer(
                self.settings,
                stream,
                session.engine,
                request.id,
                receive,
                send,
                form,
                session=session,
                extra=extra,
            )
        finally:
            # Idle time counts from the end of the last activity, not its start.
            session.touch()
            if stream.finished and not stream.queue:
                session.forget_stream(stream)

    async def _post_stateless_legacy(
        self,
        request: ServerRequest | None,
        receive: Receive,
        send: Send,
        version: ProtocolVersion | None,
        form: ReplyForm,
    ) -> None:
        if request is None:
            await respond(send, 202)
            return
        stream = ResponseStream("s", request.id, self.settings.stream_queue_limit)
        engine = self.server.connect(SingleChannel(stream), stateless=True, transport="http")
        if request.method != "initialize":
            # No session to remember a handshake: the header says the revision
            # (2025-03-26 when absent, streamable-http "Protocol Version Header").
            served(engine).lifecycle.assume(version or ProtocolVersion.V2025_03_26)
        engine.submit(request)
        await answer(self.settings, stream, engine, request.id, receive, send, form)

    async def _post_batch(
        self, items: list[msgspec.Raw], receive: Receive, send: Send, headers: dict[str, str], form: ReplyForm
    ) -> None:
        """JSON-RPC batches: 2025-03-26 sessions only, answered as one JSON array, or as
        an SSE stream when an item's handler sends something before its answer (a request
        to the client, progress) and the client takes one (see :mod:`.batches`).

        A shared session's batch claims its requests' ids across workers as a
        single request does, all with the session read (one round trip): an item
        whose id is in flight on any worker is refused under that id, the others
        run. Answers to this session's server requests and cancellations go to
        the worker they are for, as single POSTs do. Each request needs the
        scopes its target asks for, as a single POST does.
        """
        shared = self.shared
        messages: list[jsonrpc.Message | bytes] = []
        for raw in items:
            try:
                # (Never a list: batches are read only with allow_batch.)
                messages.append(jsonrpc.decode_message(raw))  # type: ignore[arg-type]
            except ProtocolError as exc:
                messages.append(jsonrpc.encode_error(exc.request_id, exc.code, exc.message))
        wanted: list[int | str] = []
        if shared is not None:
            wanted = [m.id for m in messages if isinstance(m, Request) and m.method != "initialize"]
        session, claimed = await self._claim_in(headers.get(h.SESSION_ID, ""), wanted)
        if session is None or session.conn.lifecycle.version is not ProtocolVersion.V2025_03_26:
            if session is not None and shared is not None:
                shared.release(session.id, wanted, claimed)
            await jsonrpc_error(send, 400, None, INVALID_REQUEST, "Invalid Request: batches are not accepted")
            return
        session.touch()
        principal = session.conn.principal = _principal.get()
        if self.settings.auth is not None:
            # Each request's scopes are checked as a single POST's are (else batching a call
            # bypassed a tool's scopes=): one lacking them refuses the whole batch with the
            # 403 challenge before any item runs, naming every scope the batch needs, so the
            # client steps up once and sends it again.
            try:
                self._check_batch_scopes(
                    [
                        decode_request(message, principal, "http")
                        for message in messages
                        if isinstance(message, Request) and message.method != "initialize"
                    ]
                )
            except HTTPFailure:
                if shared is not None:
                    shared.release(session.id, wanted, claimed)
                raise
        flags = iter(claimed)
        streams: list[ResponseStream] = []
        answers: list[bytes] = []
        for message in messages:
            if isinstance(message, bytes):
                answers.append(message)
                continue
            if isinstance(message, Request):
                rid = message.id
                if message.method == "initialize":
                    answers.append(
                        jsonrpc.encode_error(rid, INVALID_REQUEST, "initialize must not be batched")
                    )
                    continue
                mine = next(flags) if shared is not None else True
                if not mine or rid in session.request_streams or session.engine.in_flight(rid):
                    # Refused here, as a single POST is: a second stream under the id would
                    # displace the first, whose answer was then lost (and a batch holding the
                    # id twice waited for ever on the stream the engine's refusal never reached).
                    if mine and shared is not None:
                        shared.store.release(session.id, rid)  # claimed here, not run
                    answers.append(
                        jsonrpc.encode_error(rid, INVALID_REQUEST, f"id {rid!r} is already in use")
                    )
                    continue
                stream = session.open_stream(rid)
                streams.append(stream)
                session.engine.feed_message(message)
                # A cancelled item is owed no answer: its stream ends, else the batch waited for ever.
                session.engine.when_done(rid, functools.partial(session.end_unanswered, stream))
                if shared is not None:
                    shared.release_when_done(session, rid)
            elif shared is None or not shared.relay(session, message):
                session.engine.feed_message(message)
        if not streams:
            if answers:  # (refusals only: as a single POST's, plain JSON)
                await respond(send, 200, b"[" + b",".join(answers) + b"]")
            else:
                await respond(send, 202)
            return
        await answer_batch(self.settings, session, streams, answers, receive, send, form)

    # -- GET and DELETE (legacy sessions) ----------------------------------------

    async def _get(self, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        session_id = headers.get(h.SESSION_ID)
        version = parse_version(headers.get(h.PROTOCOL_VERSION, "").strip())
        if session_id is None or (version is not None and version.is_modern) or self.settings.stateless:
            # 2026-07-28: GET is not part of the modern transport.
            raise HTTPFailure(405, "GET needs a legacy session", headers=[(b"allow", b"POST")])
        if "text/event-stream" not in headers.get("accept", "") and "*/*" not in headers.get("accept", ""):
            raise HTTPFailure(406, "Accept must include text/event-stream")
        session = await self._session_for(session_id)
        if session is None:
            raise HTTPFailure(404, "Session not found")
        session.touch()
        last = headers.get(h.LAST_EVENT_ID)
        if self.shared is not None:
            try:
                await self.shared.get(send, receive, session, last)
            finally:
                session.touch()
            return
        if last is not None:
            found = session.find_stream(last.strip())
            if found is None:
                raise HTTPFailure(404, "unknown Last-Event-ID")
            stream, seq = found
            stream.reopen(seq)
            try:
                await self._stream_out(send, receive, session, stream)
            finally:
                session.touch()
            return
        standalone = session.standalone
        if session.get_connected:
            raise HTTPFailure(409, "a GET stream is already open for this session")
        standalone.reopen(standalone.seq)  # backlog for the GET stream is dropped
        session.get_connected = True
        try:
            await self._stream_out(send, receive, session, standalone)
        finally:
            session.get_connected = False
            session.touch()

    async def _stream_out(
        self, send: Send, receive: Receive, session: LegacyHTTPSession, stream: ResponseStream
    ) -> None:
        await pump_sse(
            send,
            receive,
            stream,
            first=None,
            resumable=True,
            retry_ms=self.settings.sse_retry_ms,
            keepalive=self.settings.keepalive_interval,
            on_disconnect=lambda: None,
        )
        if stream.finished and not stream.queue and stream is not session.standalone:
            session.forget_stream(stream)

    async def _delete(self, send: Send, headers: dict[str, str]) -> None:
        session_id = headers.get(h.SESSION_ID)
        if session_id is None or self.settings.stateless:
            raise HTTPFailure(405, "DELETE needs a legacy session", headers=[(b"allow", b"POST")])
        session = await self._session_for(session_id)
        if session is None:
            raise HTTPFailure(404, "Session not found")
        if self.shared is not None:
            await self.shared.delete(session)
        self.sessions.remove(session_id)
        await session.close()
        await respond(send, 200)

"""stdio transport (basic/transports/stdio): asyncio pipes, no threads.

Both ends use one protocol class that feeds received bytes straight into a
:class:`LineFramer`, so pipelined input is handed to the session in batches
and an over-long line is dropped as it arrives instead of being buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from ..protocol.errors import MCPError
from ..protocol.framing import DEFAULT_MAX_LINE_BYTES, Oversized
from ..session.channel import Receiver, RequestId
from ._pipes import _READ_SIZE, _LineReader, _ReadProtocol, _unread_probe, _WriteProtocol

__all__ = ["ProcessChannel", "StdioChannel", "open_process_channel", "open_stdio_channel"]


# An answer held until the peer has read its request's notifications (see _PipeChannel) is
# looked at again on every loop turn for this long after the newest hold, then every
# millisecond (the event loop's timer resolution) and, after a second, every 10 ms.
_HOLD_SPIN_S = 0.0005
_HOLD_SLOW_AFTER_S = 1.0
# How long ``close`` lets held answers wait for the peer before writing them anyway.
_HOLD_CLOSE_S = 1.0
# Errors naming no request (answers to garbage) are not written to a server whose
# stdin already holds this much we wrote and it has not read.
_UNREAD_ERRORS_HIGH_WATER = 64 * 1024
# Past this many requests with notifications and no answer yet (cancelled requests never
# answer), the ones whose notifications the peer has read are forgotten.
_NOTED_PRUNE = 256
#: A message this large is written without its newline appended: ``data + b"\n"`` would copy it whole
#: (16 MiB more at the peak for a 16 MiB result), and one more write call costs nothing next to it.
_SPLIT_LINE_BYTES = 64 * 1024


def _write_line(out: asyncio.WriteTransport, data: bytes) -> None:
    """Write ``data`` and its newline: one write when small, two when large (no copy of ``data``)."""
    if len(data) < _SPLIT_LINE_BYTES:
        out.write(data + b"\n")
    else:
        out.write(data)
        out.write(b"\n")


class _PipeChannel:
    """What both ends of a stdio connection share: lines in, lines out, and flow control.

    Input comes from a :class:`_LineReader`, pulled (``read``) or pushed
    (``set_receiver``). Output is written to a pipe; answers produced while one
    pushed batch of several lines is handled (sync tools answered inline,
    errors for bad lines) are *corked* and go out in one write — one system
    call — in the order they were written. Nothing is held past the end of the
    batch: a handler that answers later, from its own task, writes straight through.

    One exception, for the peer's sake: the answer to a request that sent
    messages of its own (``related``: progress, log messages) is written only
    once the peer has *read* the last of them. The TypeScript SDK, which most
    hosts use, handles a response as soon as it is parsed but a notification a
    microtask later, so a ``notifications/progress`` that reaches it in the same
    read as the response finds its token gone and is dropped (basic/utilities/
    progress: a progress token belongs to a request in progress only). A
    separate write is not enough — the peer reads whatever the pipe holds — so
    the kernel is asked how much of our output the peer has not read yet
    (``FIONREAD`` on a pipe's write end, ``SIOCOUTQ`` on a socket: Node spawns
    its children on socket pairs) and the answer waits, off the cork, until
    the notifications are gone. On a socket it waits a little longer still: the
    count drops as the peer's read takes the data, while that read may still
    be going and take an answer written that instant too (see
    ``_pipes._SOCKET_READ_GRACE_S``). Requests that sent nothing are batched as before.
    """

    def __init__(self, reader: _LineReader, out: asyncio.WriteTransport | None) -> None:
        self._reader = reader
        self._out = out
        self._receiver: Receiver | None = None
        self._cork: list[bytes] | None = None
        #: Whether some request's messages may still be unread (``_noted`` or ``_held`` is not
        #: empty): only then are bytes counted, so the per-call path pays one attribute test.
        self._watch = False
        #: Bytes handed to ``out`` since watching began: the offsets below count in it.
        self._sent = 0
        #: Request -> ``_sent`` just after the last message it sent (-1: still in the cork).
        self._noted: dict[RequestId, int] = {}
        self._corked_notes = False
        #: Answers waiting for the peer to read up to their offset: ``[offset, line, seen]``
        #: (``seen``: the loop time the probe first said the peer had read up to it, or -1).
        self._held: list[list[Any]] = []
        self._held_at = 0.0
        self._poll: asyncio.TimerHandle | asyncio.Handle | None = None
        self._settled: asyncio.Future[None] | None = None
        probe = _unread_probe(out)
        self._unread: Callable[[], int] | None = None
        self._grace = 0.0
        if probe is not None:
            self._unread, self._grace = probe

    async def read(self) -> list[bytes | Oversized] | None:
        return await self._reader.read()

    def set_receiver(self, receiver: Receiver) -> None:
        """Deliver input batches to ``receiver`` as they arrive (None at end of input)."""
        self._receiver = receiver
        self._reader.set_receiver(receiver, self._deliver_corked)

    def hold_input(self) -> None:
        self._reader.hold("engine")

    def release_input(self) -> None:
        self._reader.release("engine")

    def _deliver_corked(self, batch: list[bytes | Oversized] | None) -> None:
        receiver = self._receiver
        assert receiver is not None
        if batch is None or self._cork is not None:
            receiver(batch)
            return
        out: list[bytes] = []
        self._cork = out
        try:
            receiver(batch)
        finally:
            self._cork = None
            if out:
                self._flush(out)
            if self._corked_notes:
                self._place_corked_notes()

    def write(self, data: bytes, related: RequestId | None = None) -> None:
        cork = self._cork
        if cork is not None:
            cork.append(data)
            if related is not None:
                self._note(related, -1)
            return
        out = self._out
        if out is not None and not out.is_closing():
            _write_line(out, data)
            if related is not None:
                if not self._watch:
                    self._watch = True
                    self._sent = 0
                self._sent += len(data) + 1
                self._note(related, self._sent)
            elif self._watch:
                self._sent += len(data) + 1

    def respond(self, request_id: RequestId | None, data: bytes, error: MCPError | None = None) -> None:
        # One stream: an answer is a line like any other (write's body, inline: the per-call path),
        # unless some request has sent messages of its own that the peer may not have read yet.
        if self._watch:
            self._respond_watched(request_id, data)
            return
        cork = self._cork
        if cork is not None:
            cork.append(data)
            return
        out = self._out
        if out is not None and not out.is_closing():
            _write_line(out, data)

    def _flush(self, lines: list[bytes]) -> None:
        out = self._out
        if out is not None and not out.is_closing():
            data = lines[0] + b"\n" if len(lines) == 1 else b"\n".join(lines) + b"\n"
            out.write(data)
            if self._watch:
                self._sent += len(data)

    # -- answers that wait for their request's messages to be read ------------

    def _note(self, related: RequestId, mark: int) -> None:
        """``related`` sent a message that ends at ``mark`` (-1: in the cork, placed when it goes out)."""
        if not self._watch:
            self._watch = True
            self._sent = 0
        if mark < 0:
            self._corked_notes = True
        noted = self._noted
        noted[related] = mark
        if len(noted) > _NOTED_PRUNE:
            self._prune()

    def _respond_watched(self, request_id: RequestId | None, data: bytes) -> None:
        mark = self._noted.pop(request_id, None)  # type: ignore[arg-type]
        # With a grace to wait, notifications read already may have been read a moment ago.
        if mark is not None and (self._grace or not self._read_through(mark)):
            self._hold(mark, data)
            return
        cork = self._cork
        if cork is not None:
            cork.append(data)  # counted when the cork goes out
        else:
            out = self._out
            if out is not None and not out.is_closing():
                _write_line(out, data)
                self._sent += len(data) + 1
        self._unwatch()

    def _unwatch(self) -> None:
        if not self._noted and not self._held and not self._corked_notes:
            self._watch = False

    def _consumed(self) -> int | None:
        """How many bytes counted in ``_sent`` the peer has read (a lower bound), or None if unknown."""
        unread = self._unread
        out = self._out
        if unread is None or out is None:
            return None
        try:
            pending = unread() + out.get_write_buffer_size()
        except OSError:  # the descriptor is gone: nobody is left to read in any order
            return self._sent
        return self._sent - pending

    def _read_through(self, mark: int) -> bool:
        if mark < 0:
            return False
        consumed = self._consumed()
        return consumed is not None and consumed >= mark

    def _place_corked_notes(self) -> None:
        """The cork went out: its messages end where the write ended."""
        self._corked_notes = False
        sent = self._sent
        noted = self._noted
        for rid, mark in noted.items():
            if mark < 0:
                noted[rid] = sent
        for entry in self._held:
            if entry[0] < 0:
                entry[0] = sent
        self._unwatch()

    def _prune(self) -> None:
        consumed = self._consumed()
        if consumed is None:
            consumed = self._sent  # no way to tell: answers then only avoid sharing a write
        noted = self._noted
        for rid in [rid for rid, mark in noted.items() if 0 <= mark <= consumed]:
            del noted[rid]

    def _hold(self, mark: int, data: bytes) -> None:
        self._held.append([mark, data, -1.0])
        loop = asyncio.get_running_loop()
        self._held_at = loop.time()
        if self._poll is None:
            self._poll = loop.call_soon(self._release)

    def _release(self) -> None:
        """Write every held answer whose messages the peer has read; look again later for the rest."""
        self._poll = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        settling = False  # some answer's notifications were read, its grace not yet over
        out = self._out
        if out is None or out.is_closing():
            self._held.clear()
        elif self._held:
            consumed = self._consumed()
            keep: list[list[Any]] = []
            for entry in self._held:
                mark = entry[0]
                # Without a way to ask (a file, a tty, not Linux) the answer still gets a write of its own.
                if mark >= 0 and (consumed is None or consumed >= mark):
                    if entry[2] < 0:
                        entry[2] = now
                    if now - entry[2] >= self._grace:
                        out.write(entry[1] + b"\n")
                        self._sent += len(entry[1]) + 1
                        continue
                    settling = True
                keep.append(entry)
            self._held = keep
        if self._held:
            waited = now - self._held_at
            if waited < _HOLD_SPIN_S or settling:
                self._poll = loop.call_soon(self._release)
            else:
                self._poll = loop.call_later(0.001 if waited < _HOLD_SLOW_AFTER_S else 0.01, self._release)
            return
        self._unwatch()
        if self._settled is not None and not self._settled.done():
            self._settled.set_result(None)

    async def _settle(self) -> None:
        """Before closing: give held answers a little time to go out in order, then write them regardless."""
        if not self._held:
            return
        self._settled = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._settled), _HOLD_CLOSE_S)
        if self._poll is not None:
            self._poll.cancel()
            self._poll = None
        held, self._held = self._held, []
        out = self._out
        if held and out is not None and not out.is_closing():
            out.write(b"".join(entry[1] + b"\n" for entry in held))


class StdioChannel(_PipeChannel):
    """The server's end: our stdin and a private duplicate of our stdout."""

    def __init__(
        self,
        reader: _LineReader,
        transport: asyncio.WriteTransport,
        protocol: _WriteProtocol,
        read_transport: asyncio.BaseTransport | None,
    ) -> None:
        super().__init__(reader, transport)
        self._transport = transport
        self._protocol = protocol
        self._read_transport = read_transport

    def set_receiver(self, receiver: Receiver) -> None:
        """Deliver input batches to ``receiver`` as they arrive (None at end of input).

        A peer that stops reading our output gets no more of its input read.
        """
        self._protocol.reader = self._reader
        super().set_receiver(receiver)

    async def drain(self) -> None:
        await self._protocol.drain()

    async def close(self) -> None:
        await self._settle()
        if self._read_transport is not None:
            self._read_transport.close()
        if not self._transport.is_closing():
            self._transport.close()
        await asyncio.sleep(0)


async def open_stdio_channel(
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, *, protect_stdout: bool = True, protect_stdin: bool = True
) -> StdioChannel:
    """Connect to this process's stdin/stdout.

    With ``protect_stdout`` (the default) the protocol gets a private duplicate
    of file descriptor 1, and fd 1 and ``sys.stdout`` are pointed at stderr, so
    a stray ``print`` in user code lands in the log instead of corrupting the
    protocol stream (the spec: the server MUST NOT write anything else to stdout).

    With ``protect_stdin`` (the default) the protocol likewise reads a private
    duplicate of file descriptor 0, and fd 0 is pointed at ``/dev/null``: a child
    process a tool starts (``subprocess.run`` inherits stdin unless told otherwise)
    or an ``input()`` in a handler reads end of file at once, instead of taking
    the client's next messages, or blocking until they come.
    """
    loop = asyncio.get_running_loop()
    out_fd = 1
    if protect_stdout:
        sys.stdout.flush()
        out_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    reader = _LineReader(max_line_bytes)
    read_transport: asyncio.BaseTransport | None = None
    in_fd = sys.stdin.fileno()
    if protect_stdin:
        # The duplicate is not inheritable (PEP 446), so no child gets the protocol's input;
        # it also keeps a child from changing the input's file status flags (O_NONBLOCK is
        # shared by every descriptor of an open pipe: a child making it blocking would make
        # the event loop's reads block).
        in_fd = _private_stdin(in_fd)
    if not _pollable(in_fd):
        # Regular files and /dev/null cannot be watched by the event loop (epoll
        # refuses them); they never block either: read them to the end now.
        while data := os.read(in_fd, _READ_SIZE):
            reader.feed(data)
        reader.feed_eof()
        if protect_stdin:
            os.close(in_fd)
    else:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: _ReadProtocol(reader), os.fdopen(in_fd, "rb", buffering=0, closefd=protect_stdin)
        )
        # asyncio reads 256 KiB at a time; a fresh buffer that size per message
        # costs an mmap/munmap pair, while 64 KiB stays on the heap. (uvloop's
        # transports have no such attribute: libuv reads into one reused buffer.)
        if hasattr(read_transport, "max_size"):
            read_transport.max_size = _READ_SIZE
    out_file = os.fdopen(out_fd, "wb", buffering=0, closefd=protect_stdout)
    write_protocol = _WriteProtocol()
    transport: asyncio.WriteTransport
    if not _pollable(out_fd):
        # stdout redirected to a file or /dev/null: writes there never block, and the
        # loop cannot watch them (uvloop aborts the process on /dev/null): write directly.
        transport = _FileWriteTransport(out_file)
    else:
        transport, _ = await loop.connect_write_pipe(lambda: write_protocol, out_file)
    return StdioChannel(reader, transport, write_protocol, read_transport)


def _private_stdin(fd: int) -> int:
    """A private duplicate of ``fd`` (stdin), with ``fd`` itself pointed at ``/dev/null``."""
    private = os.dup(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
    return private


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait for ``fd`` to be readable (pipes, sockets, ttys)."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    with selectors.DefaultSelector() as probe:
        try:
            probe.register(fd, selectors.EVENT_READ)
        except OSError:  # EPERM from epoll for files and /dev/null
            return False
    return True


class _FileWriteTransport(asyncio.WriteTransport):
    """Blocking writes to a regular file (the event loop cannot watch files)."""

    def __init__(self, file: Any) -> None:
        super().__init__()
        self._file = file
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._file.write(data)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._file.close()


class _ProcessProtocol(asyncio.SubprocessProtocol):
    def __init__(self, reader: _LineReader, stderr_sink: Any) -> None:
        self.reader = reader
        self.stderr_sink = stderr_sink
        self.write = _WriteProtocol()
        self.exited = asyncio.get_running_loop().create_future()
        self.transport: asyncio.SubprocessTransport | None = None
        #: Told once when an over-long line from the server starts being dropped.
        self.on_oversized: Callable[[Oversized], object] | None = None
        self._reported = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # No isinstance checks against asyncio's transport classes: uvloop's transports
        # implement them without being registered as their subclasses.
        transport = cast(asyncio.SubprocessTransport, transport)
        self.transport = transport
        pipe = cast(asyncio.ReadTransport, transport.get_pipe_transport(1))
        self.reader.pause = pipe.pause_reading
        self.reader.resume = pipe.resume_reading

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.reader.feed(data)
            if self.on_oversized is not None:
                dropping = self.reader.framer.discarding
                if dropping is None:
                    self._reported = False
                elif not self._reported:
                    self._reported = True
                    self.on_oversized(dropping)
        elif self.stderr_sink is not None:
            self.stderr_sink(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.reader.feed_eof()
        elif fd == 0:
            self.write.connection_lost(exc)

    def pause_writing(self) -> None:
        self.write.pause_writing()

    def resume_writing(self) -> None:
        self.write.resume_writing()

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
        self.reader.feed_eof()


class ProcessChannel(_PipeChannel):
    """The client's end: a spawned server process's stdin/stdout.

    Unlike the server's end, input is not held while the server is slow to
    read our requests: the server may itself be waiting for us to read its
    answers, and a client that writes many requests before reading (e.g.
    ``asyncio.gather``) would deadlock with it.
    """

    def __init__(
        self, transport: asyncio.SubprocessTransport, protocol: _ProcessProtocol, terminate_timeout: float
    ) -> None:
        # get_pipe_transport(0) is the stdin pipe's transport or None; not an isinstance
        # check (uvloop's transports are not registered as asyncio.WriteTransport).
        self._stdin = cast("asyncio.WriteTransport | None", transport.get_pipe_transport(0))
        super().__init__(protocol.reader, self._stdin)
        self._transport = transport
        self._protocol = protocol
        self.terminate_timeout = terminate_timeout

    @property
    def pid(self) -> int:
        return self._transport.get_pid()

    def report_oversized_early(self, callback: Callable[[Oversized], object]) -> None:
        """Call ``callback`` as soon as an over-long line from the server starts being
        dropped, with its head (the client fails the request it answers at once)."""
        self._protocol.on_oversized = callback

    def respond(self, request_id: RequestId | None, data: bytes, error: MCPError | None = None) -> None:
        # An error about garbage the server printed (it names no request) is dropped while
        # the server is not reading its stdin: one such answer per line of garbage from a
        # server that never reads would otherwise pile up in our write buffer for ever.
        if (
            request_id is None
            and error is not None
            and self._stdin is not None
            and self._stdin.get_write_buffer_size() > _UNREAD_ERRORS_HIGH_WATER
        ):
            return
        super().respond(request_id, data, error)

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode()

    async def drain(self) -> None:
        await self._protocol.write.drain()

    async def close(self) -> None:
        """Close stdin, wait; then SIGTERM, wait; then SIGKILL (stdio "Shutdown")."""
        await self._settle()
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()
        exited = self._protocol.exited
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and self._transport.get_returncode() is None:
                with contextlib.suppress(ProcessLookupError):
                    self._transport.send_signal(sig)
            try:
                await asyncio.wait_for(asyncio.shield(exited), self.terminate_timeout)
                break
            except TimeoutError:
                continue
        self._transport.close()


async def open_process_channel(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stderr: Any = None,
    terminate_timeout: float = 2.0,
) -> ProcessChannel:
    """Spawn ``command args`` (no shell) and connect to its stdin/stdout.

    ``stderr`` is None (inherit ours), a callable receiving bytes, or a file
    object / descriptor to write to.
    """
    loop = asyncio.get_running_loop()
    reader = _LineReader(max_line_bytes)
    sink = stderr if callable(stderr) else None
    stderr_arg: Any = asyncio.subprocess.PIPE if sink is not None else stderr
    full_env = None if env is None else {**os.environ, **env}
    transport, protocol = await loop.subprocess_exec(
        lambda: _ProcessProtocol(reader, sink),
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr_arg,
        env=full_env,
        cwd=cwd,
    )
    return ProcessChannel(transport, protocol, terminate_timeout)

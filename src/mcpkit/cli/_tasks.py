"""Tasks from the command line: what ``mcpkit call`` shows while a call runs as a task,
and ``mcpkit task get|cancel|wait TARGET TASK_ID``.

A server of the 2026-07-28 era may answer a ``tools/call`` with a task (the
``io.modelcontextprotocol/tasks`` extension, SEP-2663) instead of the result; in a
2025-11-25 session the client asks for one for a tool whose tasks are required (the
experimental tasks of that revision). The CLI then prints the task's id at once (on
stderr), follows it by polling ``tasks/get`` and shows its status and
``statusMessage`` as they change: on a terminal in place (the spinner's line),
otherwise one line per change, so a log keeps them all. The task's input requests
are answered with the form that answers elicitation
(:class:`~mcpkit.cli._prompt_user.TerminalAsker`); Ctrl+C during ``mcpkit call``
cancels the task (``tasks/cancel``) before exiting, as a plain call is cancelled
when its caller gives up. All of it through the client's public API:
:meth:`Client.start_tool` and :meth:`TaskHandle.result` with ``on_status``.

A task outlives the connection that created it, not the server process: the
``task`` commands reach it by URL only (a stdio server started for the command
would be a new process, without the task).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.tasks import TERMINAL, DetailedTask
from ..transports.loop import add_signal_handler
from ..transports.loop import run as run_loop
from ._connect import connected, request_error
from ._output import EXIT_OK, EXIT_PROTOCOL, EXIT_TERMINATED, EXIT_USAGE, CLIError, Console, Spinner
from ._target import Target

if TYPE_CHECKING:
    from ..client import Client, TaskHandle
    from ..protocol import types as t

__all__ = [
    "TaskCall",
    "TaskLine",
    "cmd_task_cancel",
    "cmd_task_get",
    "cmd_task_wait",
    "follow",
    "start_call",
]

#: Seconds a ``tasks/cancel`` may take when the command stops (Ctrl+C, an error).
CANCEL_GRACE = 5.0


class TaskLine:
    """A task's status on stderr: the spinner's text on a terminal (updated in place),
    one line per change otherwise."""

    def __init__(self, console: Console, spinner: Spinner, what: str, target: Target) -> None:
        self.console = console
        self.spinner = spinner
        self.what = what
        self.target = target
        self.task_id: str | None = None
        #: The session's revision is 2025-11-25 (its tasks are not the extension's).
        self.legacy = False
        self._shown: tuple[str, str | None] | None = None

    def say(self, text: str) -> None:
        """A line on stderr, with the spinner out of its way."""
        with self.console.spinner_paused():
            self.console.info(text)

    def started(self, task_id: str, status: str, *, cancels: bool) -> None:
        """The task's id, said at once: with it the task can be looked at from elsewhere."""
        self.task_id = task_id
        parts = [f"task {task_id} started"]
        if cancels:
            parts.append("Ctrl+C cancels it")
        if self.target.url is not None:
            # (A 2025-11-25 task is "not found" to a 2026-07-28 tasks/get: each era its own.)
            again = " --protocol 2025-11-25" if self.legacy else ""
            parts.append(f"from another shell: mcpkit task get {self.target.url}{again} {_id_word(task_id)}")
        self.say("; ".join(parts))
        self._show(status, None, said=True)

    def seen(self, task: DetailedTask) -> None:
        """A task polled (``on_status`` of :meth:`TaskHandle.result`): shown if it changed."""
        message = task.status_message if isinstance(task.status_message, str) else None
        self._show(task.status, message)

    def _show(self, status: str, message: str | None, *, said: bool = False) -> None:
        if (status, message) == self._shown:
            return
        self._shown = (status, message)
        text = f"task {self.task_id}: {status}" + (f" — {message}" if message else "")
        if self.spinner.enabled:
            self.spinner.update(f"{self.what}: {text}")
        elif not said:
            self.say(text)


@dataclass
class TaskCall:
    """A task being followed by a command: its handle, and the line showing it."""

    handle: TaskHandle
    line: TaskLine


async def start_call(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    line: TaskLine,
    *,
    timeout: float | None,
    progress: Callable[[float, float | None, str | None], Awaitable[None]],
) -> t.CallToolResult | TaskCall:
    """``tools/call``: its result, or the task the server made of it (to :func:`follow`).

    The call is made as :meth:`Client.call_tool` makes it (``task=None``: at 2026-07-28
    the server decides; at 2025-11-25 a task for a tool whose tasks are required), with
    its progress going to ``progress`` (a 2025-11-25 task's progress too); a task is then
    followed here rather than inside ``call_tool``, so that its id and status can be shown.
    """
    handle = await client.start_tool(name, arguments, timeout=timeout, progress=progress, task=None)
    if not handle.is_task:
        return await handle.result()  # answered at once
    line.legacy = not client.is_modern
    return TaskCall(handle, line)


async def follow(call: TaskCall, *, cancel_on_exit: bool) -> t.CallToolResult:
    """The task's result, polled to its end; a failed or cancelled task raises its error.

    With ``cancel_on_exit`` (``mcpkit call``), a task that has not ended when the command
    stops (Ctrl+C, SIGTERM, a question it could not answer, the connection lost) is
    cancelled, best effort, and the user is told: the call is given up, and a task left
    running would go on working for nobody. SIGTERM (``kill``, ``timeout``) then ends
    the command with :data:`EXIT_TERMINATED`. Otherwise (``mcpkit task wait``) the task
    goes on.
    """
    handle, line = call.handle, call.line
    terminated = _on_sigterm() if cancel_on_exit else None
    if line.task_id is None and handle.task_id is not None:
        # Said once the signals are ours: a user who reads the id may stop the command.
        status = handle.last.status if handle.last is not None else "working"
        line.started(handle.task_id, status, cancels=cancel_on_exit)
    try:
        # The status line shows the status messages (a progress callback would say them again).
        return await handle.result(on_status=line.seen, progress=_shown_with_the_status)
    except BaseException as exc:
        if handle.last is not None and handle.last.status in TERMINAL:
            raise  # the task's own end
        if cancel_on_exit:
            await _cancel(call)
            if terminated is not None and terminated.is_set():
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                raise CLIError("terminated by SIGTERM", EXIT_TERMINATED) from None
        elif isinstance(exc, asyncio.CancelledError):
            again = f"mcpkit task cancel {line.target.url or 'TARGET'} {_id_word(handle.task_id or '')}"
            line.say(f"stopped waiting; task {handle.task_id} goes on ({again} stops it)")
        raise
    finally:
        if terminated is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)


def _shown_with_the_status(progress: float, total: float | None, message: str | None) -> None:
    """The progress callback of a followed task: nothing to do, :meth:`TaskLine.seen` shows
    each status message with the task's status."""


def _id_word(task_id: str) -> str:
    """A task id as a command line takes it: one that starts with '-' (another server's ids
    may) goes after ``--``, where it cannot be read as an option."""
    return f"-- {task_id}" if task_id.startswith("-") else task_id


def _on_sigterm() -> asyncio.Event | None:
    """Until removed, SIGTERM cancels the current task (as Ctrl+C does) and sets the event."""
    current = asyncio.current_task()
    if current is None:
        return None
    event = asyncio.Event()

    def terminate() -> None:
        event.set()
        current.cancel()

    if not add_signal_handler(signal.SIGTERM, terminate):  # not the main thread, or Windows
        return None
    return event


async def _cancel(call: TaskCall) -> None:
    """``tasks/cancel``, best effort, and what became of it on stderr."""
    handle, line = call.handle, call.line
    try:
        async with asyncio.timeout(CANCEL_GRACE):
            await handle.cancel()
    except Exception as why:
        if line.target.url is None:
            # Ctrl+C reached the server too (same terminal): its tasks end with it, and
            # closing the connection stops it anyway.
            line.say(f"task {handle.task_id} ends with the server process")
        else:
            line.say(f"could not cancel task {handle.task_id}: {request_error(why, 'tasks/cancel').message}")
    else:
        line.say(f"cancelled task {handle.task_id}")


# -- mcpkit task get | cancel | wait ---------------------------------------------------------

_STDIO = (
    "a task lives in the server process that made it: {label} would be started anew for this "
    "command, a process without that task (a stdio server's tasks end with it)"
)
_STDIO_HINT = (
    "give the server's http(s):// URL, or a --config NAME of an HTTP server; serve one with "
    "mcpkit run FILE.py --transport http"
)


def _task_words(args: argparse.Namespace) -> tuple[Target, str]:
    from ._use import split_words

    command = args.command_argv
    if command is not None and len(command) == 1 and len(args.words) == 1:
        # mcpkit task get URL -- TASK_ID: the id after --, where one that starts with '-'
        # (another server's may) is no option. (A server command after -- is no target here.)
        args.words, args.command_argv = [*args.words, *command], None
    target, words = split_words(args, 1, "TASK_ID")
    if len(words) > 1:
        raise CLIError(f"unexpected arguments: {' '.join(words[1:])}", EXIT_USAGE)
    if target.url is None:
        raise CLIError(_STDIO.format(label=target.label), EXIT_USAGE, hint=_STDIO_HINT)
    return target, words[0]


def _check_revision(client: Client, target: Target) -> None:
    """Tasks exist in the 2026-07-28 era (the extension) and, experimental, at 2025-11-25:
    say so of a session at a revision without them."""
    from ..protocol.versions import ProtocolVersion

    version = client.protocol_version
    if client.is_modern or version is ProtocolVersion.V2025_11_25:
        return
    raise CLIError(
        f"{target.label} answered at {version.value if version else '?'}, a revision without tasks: "
        "tasks need the 2026-07-28 era (the io.modelcontextprotocol/tasks extension)",
        EXIT_PROTOCOL,
        hint="--protocol auto (the default) or modern, against a server that speaks 2026-07-28",
    )


def _task_error(exc: BaseException, what: str) -> CLIError:
    from ..protocol.errors import INVALID_PARAMS, MCPError

    err = request_error(exc, what)
    if isinstance(exc, MCPError) and exc.code == INVALID_PARAMS:
        err.hint = (
            "a server knows a task for its TTL, in the process that made it (or the Redis its workers "
            "share), and shows it only to the principal that made it (the same credentials, -H)"
        )
    return err


async def _get(client: Client, task_id: str, what: str) -> DetailedTask:
    try:
        return await client.task(task_id).status()
    except (CLIError, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise _task_error(exc, what) from None


def cmd_task_get(args: argparse.Namespace, console: Console) -> int:
    target, task_id = _task_words(args)
    return run_loop(_task_get(target, task_id, args, console))


async def _task_get(target: Target, task_id: str, args: argparse.Namespace, console: Console) -> int:
    async with connected(target, console, timeout=args.timeout, verbose=args.verbose) as client:
        _check_revision(client, target)
        async with Spinner(console, f"getting task {task_id}"):
            task = await _get(client, task_id, f"task {task_id}")
    if console.json_mode:
        console.emit_json(msgspec.to_builtins(task))
        return EXIT_OK
    show_task(console, task)
    if task.status in ("working", "input_required"):
        console.info(
            f"mcpkit task wait {target.url} {_id_word(task_id)} follows it to its end"
            + (", answering its questions on a terminal" if task.status == "input_required" else "")
        )
    return EXIT_OK


def show_task(console: Console, task: DetailedTask) -> None:
    """A task as rows (tab-separated off a terminal), then its result or error once ended."""
    from ..protocol import types as t

    rows = [["task", task.task_id], ["status", task.status]]
    if isinstance(task.status_message, str) and task.status_message:
        rows.append(["message", task.status_message])
    rows += [["created", task.created_at], ["updated", task.last_updated_at]]
    rows.append(["ttl", "unlimited" if task.ttl_ms is None else f"{task.ttl_ms / 1000:g}s"])
    if isinstance(task.error, dict):
        code, message = task.error.get("code"), task.error.get("message")
        rows.append(["error", f"[{code}] {message}"])
    if isinstance(task.input_requests, dict):
        for key, request in task.input_requests.items():
            rows.append(["asks", f"{key}: {_describe_request(request)}"])
    result: t.CallToolResult | None = None
    if isinstance(task.result, dict):
        with contextlib.suppress(msgspec.ValidationError):
            result = msgspec.convert(task.result, t.CallToolResult)
        if result is not None and result.is_error is True:
            rows.append(["result", "the tool reported an error"])
    console.table(rows, styles=[("dim",), ()], indent=0)
    if result is not None:
        from ._use import result_texts

        console.print()
        for text in result_texts(console, result):
            console.print(text)


def _describe_request(request: Any) -> str:
    if not isinstance(request, dict):
        return str(request)
    method = str(request.get("method"))
    params = request.get("params")
    message = params.get("message") if isinstance(params, dict) else None
    return f"{method}: {message}" if isinstance(message, str) else method


def cmd_task_cancel(args: argparse.Namespace, console: Console) -> int:
    target, task_id = _task_words(args)
    return run_loop(_task_cancel(target, task_id, args, console))


async def _task_cancel(target: Target, task_id: str, args: argparse.Namespace, console: Console) -> int:
    async with connected(target, console, timeout=args.timeout, verbose=args.verbose) as client:
        _check_revision(client, target)
        async with Spinner(console, f"cancelling task {task_id}"):
            before = await _get(client, task_id, f"task {task_id}")
            if before.status not in TERMINAL:
                try:
                    await client.task(task_id).cancel()
                except Exception as exc:
                    raise _task_error(exc, f"cancel task {task_id}") from None
            after = await _get(client, task_id, f"task {task_id}")
    if console.json_mode:
        console.emit_json(msgspec.to_builtins(after))
        return EXIT_OK
    if before.status in TERMINAL:
        console.print(f"task {task_id} had already ended: {after.status}")
    elif after.status == "cancelled":
        console.print(f"task {task_id} cancelled")
    else:
        # Cooperative: the handler sees the cancellation at its next await.
        console.print(f"task {task_id}: cancellation asked; now {after.status}")
    return EXIT_OK


def cmd_task_wait(args: argparse.Namespace, console: Console) -> int:
    target, task_id = _task_words(args)
    return run_loop(_task_wait(target, task_id, args, console))


async def _task_wait(target: Target, task_id: str, args: argparse.Namespace, console: Console) -> int:
    from ._use import _asking, _introduce, show_tool_result

    asker, roots = _asking(args, console)
    async with connected(
        target, console, timeout=args.timeout, verbose=args.verbose, elicitation=asker, roots=roots
    ) as client:
        _check_revision(client, target)
        _introduce(asker, client, target)
        async with Spinner(console, f"waiting for task {task_id}") as spinner:
            line = TaskLine(console, spinner, "waiting", target)
            line.task_id = task_id
            try:
                result = await follow(TaskCall(client.task(task_id), line), cancel_on_exit=False)
            except (CLIError, asyncio.CancelledError):
                raise
            except Exception as exc:
                from ._use import _undeclared_hint

                err = _task_error(exc, f"task {task_id}")
                err.hint = _undeclared_hint(exc, args) or err.hint
                raise err from None
    return show_tool_result(console, f"task {task_id}", result)

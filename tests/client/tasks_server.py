"""A server of task tools for the client's tasks tests, run in memory, over stdio or over HTTP
(``--http --port N``, ``--stateless`` for legacy HTTP without sessions). Tools that wait do so
for a signal the test gives: a file appearing.

Polling is quick here (50 ms) so the tests do not wait on the 1-second default;
``TASKS_HEARTBEAT`` sets the heartbeat (seconds) of tasks kept in Redis (``MCPKIT_REDIS_URL``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcpkit import Context, MCPServer
from mcpkit.protocol.errors import MCPError
from mcpkit.server.tasks import TaskSettings

server = MCPServer(
    "tasks-test",
    "1.0",
    tasks=TaskSettings(poll_interval=0.05, heartbeat=float(os.environ.get("TASKS_HEARTBEAT", "5"))),
)

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def give(path: Path, text: str) -> None:
    """The test's signal: ``path`` with ``text``, written whole before it appears (a tool waiting
    for it never reads it half-written)."""
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    part.replace(path)


async def _until(path: Path) -> None:
    while not path.exists():
        await asyncio.sleep(0.01)


@server.tool(task="optional")
async def wait_for_file(path: str, ctx: Context, text: str = "done") -> str:
    """Writes its task id to ``path + ".started"``, then works until ``path`` exists."""
    Path(path + ".started").write_text(ctx.task_id or "")
    await _until(Path(path))
    return f"{text}: {Path(path).read_text()}"


@server.tool(task="optional")
async def cancellable(path: str, ctx: Context) -> str:
    """Runs until cancelled; writes ``path + ".cancelled"`` when it sees the cancellation."""
    Path(path + ".started").write_text(ctx.task_id or "")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        Path(path + ".cancelled").write_text("seen")
        raise
    return "never"


@server.tool(task="optional")
async def steps(path: str, ctx: Context) -> str:
    """Two status messages, each held until the test acknowledges it (``path + ".1"``, ``".2"``)."""
    for n in (1, 2):
        await ctx.report_progress(n, 2, f"step {n}")
        await _until(Path(f"{path}.{n}"))
    return "stepped"


@server.tool(task="optional", task_after=None)
async def warm_up(path: str, ctx: Context) -> str:
    """Reports progress as a plain call, then becomes a task (2026-07-28; at 2025-11-25 it is
    one from the start) with two more steps, each held until ``path + ".2"``, ``".3"`` exist."""
    await ctx.report_progress(1, 3, "warming up")
    await ctx.start_task()
    for n in (2, 3):
        await ctx.report_progress(n, 3, f"step {n}")
        await _until(Path(f"{path}.{n}"))
    return "warm"


@server.tool(task="required")
async def required_wait(path: str, ctx: Context) -> str:
    """Must be a task (2025-11-25: called with params.task); like wait_for_file."""
    Path(path + ".started").write_text(ctx.task_id or "")
    await _until(Path(path))
    return f"required: {Path(path).read_text()}"


@server.tool(task="optional")
async def confirm_after(path: str, ctx: Context) -> str:
    """Waits until ``path`` exists, then asks (the client that started it may be gone by then)."""
    Path(path + ".started").write_text(ctx.task_id or "")
    await _until(Path(path))
    answer = await ctx.elicit("Proceed?", CONFIRM)
    return f"{answer.action}: {(answer.content or {}).get('ok')}"


@server.tool(task="required")
async def broken() -> str:
    """A tool that fails: an isError result (the task completes)."""
    raise RuntimeError("the tool broke")


@server.tool(task="optional")
async def protocol_failure() -> str:
    """A JSON-RPC error during execution: the task fails."""
    raise MCPError(-32050, "the backend refused", {"why": "quota"})


@server.tool(task="optional")
async def confirm(item: str, ctx: Context) -> str:
    """One elicitation, in the task."""
    answer = await ctx.elicit(f"Delete {item}?", CONFIRM)
    ok = answer.action == "accept" and isinstance(answer.content, dict) and answer.content.get("ok") is True
    return f"{'deleted' if ok else 'kept'} {item}"


@server.tool(task="optional")
async def two_questions(ctx: Context) -> str:
    """Two elicitations at once: the task waits for both."""
    name, ok = await asyncio.gather(ctx.elicit("Name?", NAME), ctx.elicit("Go?", CONFIRM))
    return f"name={(name.content or {}).get('name')} ok={(ok.content or {}).get('ok')}"


@server.tool(task="optional")
async def work(seconds: float) -> str:
    """Works ``seconds`` seconds (its own duration: nothing the test waits on), then says so."""
    await asyncio.sleep(seconds)
    return f"worked {seconds:g}s"


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def plain(text: str) -> str:
    """Never a task."""
    return text.upper()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("http", port=int(sys.argv[3]), stateless="--stateless" in sys.argv)
    else:
        server.run()

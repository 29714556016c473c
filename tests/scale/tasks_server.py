"""The server of the tasks-across-workers tests: each worker process runs one copy.

    mcpkit run tests/scale/tasks_server.py --transport http --port 8001
    python tests/scale/tasks_server.py --port 8001 --auth    # bearer "alice" / "bob"

Workers share Redis (``MCPKIT_REDIS_URL``, ``MCPKIT_REDIS_PREFIX``): their tasks are
kept there. ``TASKS_HEARTBEAT`` sets the heartbeat (seconds) of running tasks. Every
tool returns the id of the process that ran it, so a test can tell where a task ran.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from mcpkit import Context, MCPServer
from mcpkit.protocol.auth import Principal
from mcpkit.server.tasks import TaskSettings

server = MCPServer(
    "scale-tasks",
    "1.0.0",
    tasks=TaskSettings(heartbeat=float(os.environ.get("TASKS_HEARTBEAT", "5")), poll_interval=0.2),
)

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@server.tool(task="optional")
async def hold(seconds: float) -> str:
    """Runs ``seconds`` seconds (or until cancelled), then says where it ran."""
    await asyncio.sleep(seconds)
    return f"held {seconds:g}s in {os.getpid()}"


@server.tool(task="optional")
async def confirm(ctx: Context) -> str:
    """Parks the task on one question, then says the answer and where it ran."""
    answer = await ctx.elicit("Go ahead?", CONFIRM)
    ok = answer.content.get("ok") if isinstance(answer.content, dict) else None
    return f"{answer.action}:{ok} in {os.getpid()}"


class TwoUsers:
    """Bearer tokens "alice" and "bob" authenticate as those subjects (no real OAuth)."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        token = (authorization or "").removeprefix("Bearer ").strip() or "anonymous"
        return Principal(subject=token, scopes=frozenset())

    def insufficient_scope(self, required: frozenset[str], resource: str) -> Any:
        raise AssertionError("no scopes here")

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource}


if __name__ == "__main__":
    from mcpkit.transports.http.runner import serve_http

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--auth", action="store_true", help="bearer tokens name the principal")
    args = parser.parse_args()
    settings: dict[str, Any] = {"auth": TwoUsers()} if args.auth else {}
    asyncio.run(serve_http(server, host="127.0.0.1", port=args.port, **settings))

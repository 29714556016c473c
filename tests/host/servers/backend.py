"""A backend for host tests, run as a real stdio subprocess.

``SERVER_NAME`` names it; every tool call is appended to ``RECORD_FILE`` (one
JSON line) so a test can prove which calls reached the server.
"""

from __future__ import annotations

import json
import os
import sys

from mcpkit import MCPServer

NAME = os.environ.get("SERVER_NAME", "backend")
RECORD = os.environ.get("RECORD_FILE")
# Set to a path: the first start creates it, every later start fails (a restart that cannot succeed).
ONLY_ONCE = os.environ.get("ONLY_ONCE")
if ONLY_ONCE:
    if os.path.exists(ONLY_ONCE):
        sys.exit(2)
    open(ONLY_ONCE, "w").close()

server = MCPServer(NAME, instructions=f"test backend {NAME}")


def record(tool: str, **arguments: object) -> None:
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as f:
            f.write(
                json.dumps({"server": NAME, "tool": tool, "arguments": arguments, "pid": os.getpid()}) + "\n"
            )


@server.tool()
def echo(text: str) -> str:
    """Echo the text back, prefixed with the server's name."""
    record("echo", text=text)
    return f"{NAME}: {text}"


@server.tool()
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    record("add", a=a, b=b)
    return a + b


@server.tool()
def drop_table(table: str) -> str:
    """A dangerous tool."""
    record("drop_table", table=table)
    return f"dropped {table}"


@server.tool()
def login(user: str, password: str) -> str:
    """Takes a secret argument."""
    record("login", user=user)
    return f"welcome {user}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails (a tool error, not a protocol error)."""
    record("fail", reason=reason)
    raise RuntimeError(reason)


@server.tool()
def crash() -> str:
    """Kill the server process."""
    record("crash")
    os._exit(1)


@server.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


@server.tool()
def grow(name: str) -> str:
    """Register a new tool ``name`` (connected clients hear tools/list_changed)."""

    def extra() -> str:
        return f"{NAME}: I am {name}"

    server.add_tool(extra, name=name, description=f"added at runtime as {name}")
    return f"added {name}"


@server.tool()
def shrink(name: str) -> str:
    """Remove the tool ``name``."""
    server.remove_tool(name)
    return f"removed {name}"


@server.resource(f"notes://{NAME}/readme", mime_type="text/plain")
def readme() -> str:
    return f"readme of {NAME}"


@server.resource(f"items://{NAME}/{{item_id}}")
def item(item_id: str) -> str:
    return f"{NAME} item {item_id}"


if os.environ.get("SHARED"):
    # Every backend started with SHARED set lists these too: a URI and a template several servers share.
    @server.resource("config://shared", mime_type="text/plain")
    def shared_config() -> str:
        return f"config of {NAME}"

    @server.resource("files://shared/{name}")
    def shared_file(name: str) -> str:
        return f"{NAME} file {name}"


@server.prompt()
def greet(person: str, mood: str = "cheerful") -> str:
    """Greet someone."""
    return f"Say hello to {person} from {NAME}, {mood}."


@server.completion()
def complete(ref: object, argument: object, context: dict[str, str]) -> list[str]:
    return [m for m in ("cheerful", "calm", "curious") if m.startswith(getattr(argument, "value", ""))]


if __name__ == "__main__":
    server.run()

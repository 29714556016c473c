"""A proxy of an ``mcpServers`` config uses an entry's ``credentials`` table (principal
subject -> environment or headers) as its ``credentials=``: each named caller's backend
session is started with that caller's own, reused; other callers share the default one."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _tokens import Tokens
from mcpkit import Client, MCPServer
from mcpkit.auth.server import BearerAuthenticator
from mcpkit.protocol import types as t
from mcpkit.proxy import ProxyServer
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(60)

ECHO = textwrap.dedent(
    """
    import os

    from mcpkit import MCPServer

    server = MCPServer("echo")


    @server.tool()
    def whoami() -> str:
        return f"{os.environ.get('BACKEND_TOKEN', 'none')} {os.getpid()}"


    if __name__ == "__main__":
        server.run()
    """
)


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


def entry(tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "echo_for_proxy.py"
    script.write_text(ECHO)
    return {
        "command": sys.executable,
        "args": [str(script)],
        "env": {"BACKEND_TOKEN": "proxy-own"},
        "credentials": {"alice": {"BACKEND_TOKEN": "alice-backend"}, "bob": {"BACKEND_TOKEN": "bob-backend"}},
    }


@pytest.mark.parametrize("servers", [1, 2])
async def test_a_config_entrys_credentials_table(tmp_path: Path, servers: int) -> None:
    names = ["echo", "other"][:servers]
    proxy = MCPServer.proxy({"mcpServers": {name: entry(tmp_path) for name in names}})
    tool = "whoami" if servers == 1 else "echo_whoami"
    async with serve_http(proxy, auth=BearerAuthenticator(Tokens())) as url:
        seen: dict[str, set[str]] = {}
        for _ in range(3):
            for name in ("alice", "bob", "carol"):
                async with Client(url, headers={"Authorization": f"Bearer {name}-token"}) as client:
                    seen.setdefault(name, set()).add(text(await client.call_tool(tool)))
    assert [len(answers) for answers in seen.values()] == [1, 1, 1]  # one backend process each
    owners = [next(iter(seen[name])).split()[0] for name in ("alice", "bob", "carol")]
    assert owners == ["alice-backend", "bob-backend", "proxy-own"]
    echo = proxy if servers == 1 else next(m.child for m in proxy._mounts if m.namespace == "echo")
    assert isinstance(echo, ProxyServer) and echo.pool.credentials is not None

"""MCP Apps (io.modelcontextprotocol/ui, SEP-1865) through a proxy: a real mcpkit backend with
a view (a process of its own over stdio, or in this process), callers of both eras. The proxy
declares the extension as the backend does, and only then; tools' ``_meta.ui`` and the views
(``ui://`` resources: MIME type, text, ``_meta`` with CSP and permissions) come through verbatim."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpkit import Client, MCPServer
from mcpkit.protocol.apps import (
    APP_MIME_TYPE,
    APPS_CLIENT_CAPABILITY,
    APPS_EXTENSION,
    resource_meta,
    tool_ui,
    visible_to,
)
from mcpkit.protocol.tasks import TASKS_EXTENSION
from mcpkit.proxy import ProxyServer
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(60)

ERAS = ["2025-11-25", "2026-07-28"]
#: What a host that renders views declares (callers without it: test_proxy_apps_declared.py).
APPS = {APPS_EXTENSION: APPS_CLIENT_CAPABILITY}

BACKEND = textwrap.dedent(
    """
    from mcpkit import MCPServer

    server = MCPServer("apps-backend")
    server.add_ui_resource(
        "ui://clock/face.html",
        "<!doctype html><p id='time'>waiting</p>",
        title="Clock face",
        csp={"connectDomains": ["https://time.example.com"], "resourceDomains": ["https://cdn.example.com"]},
        permissions=["clipboardWrite", "camera"],
        domain="clock.example.com",
        prefers_border=True,
        meta={"vendor.example/build": 7},
    )


    @server.tool(ui="ui://clock/face.html")
    def server_time() -> str:
        return "12:00"


    # The deprecated flat key besides the nested one: both come through as they are.
    @server.tool(ui="ui://clock/face.html", visibility=["app"], meta={"ui/resourceUri": "ui://clock/face.html"})
    def set_alarm(at: str) -> str:
        return f"alarm at {at}"


    @server.tool()
    def plain() -> str:
        return "no view"


    if __name__ == "__main__":
        server.run()
    """
)


def backend_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "apps_backend.py"
    script.write_text(BACKEND)
    return [sys.executable, str(script)]


def backend_server() -> MCPServer:
    namespace: dict[str, Any] = {"__name__": "apps_backend"}
    exec(BACKEND, namespace)
    server: MCPServer = namespace["server"]
    return server


async def seen(client: Client) -> dict[str, Any]:
    """What a host reads of the apps: the extension, tools' _meta, the views listed and read."""
    caps = client.server_capabilities
    assert caps is not None
    extensions = caps.extensions if isinstance(caps.extensions, dict) else {}
    resources = {r.uri: msgspec.to_builtins(r) for r in await client.list_resources()}
    views = {}
    for uri in resources:
        if uri.startswith("ui://"):
            views[uri] = [msgspec.to_builtins(c) for c in (await client.read_resource(uri)).contents]
    return {
        "extension": extensions.get(APPS_EXTENSION),
        "tools": {tool.name: tool.meta for tool in await client.list_tools()},
        "resources": resources,
        "views": views,
    }


@pytest.mark.parametrize("era", ERAS)
async def test_a_backend_app_through_the_proxy(tmp_path: Path, era: str) -> None:
    command = backend_command(tmp_path)
    async with Client(command, protocol=era, extensions=APPS) as direct:
        expected = await seen(direct)
    proxy = MCPServer.proxy(command)
    assert isinstance(proxy, ProxyServer)
    async with Client(proxy, protocol=era, extensions=APPS) as client:
        got = await seen(client)
        caps = client.server_capabilities
        assert caps is not None and isinstance(caps.extensions, dict)
        assert (TASKS_EXTENSION in caps.extensions) == (era == "2026-07-28")
        # A tool with a view works as any other through the proxy.
        result = await client.call_tool("server_time")
        assert result.content[0].text == "12:00"  # type: ignore[union-attr]
    assert got == expected
    assert got["extension"] == {}
    assert got["tools"]["server_time"] == {"ui": {"resourceUri": "ui://clock/face.html"}}
    assert got["tools"]["set_alarm"] == {
        "ui/resourceUri": "ui://clock/face.html",
        "ui": {"resourceUri": "ui://clock/face.html", "visibility": ["app"]},
    }
    assert got["tools"]["plain"] is msgspec.UNSET or got["tools"]["plain"] is None
    assert not visible_to(got["tools"]["set_alarm"], "model") and visible_to(got["tools"]["set_alarm"], "app")
    [view] = got["views"]["ui://clock/face.html"]
    assert view["mimeType"] == APP_MIME_TYPE and view["text"].startswith("<!doctype html>")
    assert view["_meta"]["vendor.example/build"] == 7
    ui = resource_meta(view["_meta"])
    assert ui is not None and msgspec.to_builtins(ui) == {
        "csp": {
            "connectDomains": ["https://time.example.com"],
            "resourceDomains": ["https://cdn.example.com"],
        },
        "permissions": {"camera": {}, "clipboardWrite": {}},
        "domain": "clock.example.com",
        "prefersBorder": True,
    }
    assert got["resources"]["ui://clock/face.html"]["_meta"] == view["_meta"]
    tool = tool_ui(got["tools"]["server_time"])
    assert tool is not None and tool.resource_uri == "ui://clock/face.html"


@pytest.mark.parametrize("era", ERAS)
async def test_a_backend_without_apps(era: str) -> None:
    backend = MCPServer("plain-backend")

    @backend.tool()
    def hello() -> str:
        return "hi"

    async with Client(MCPServer.proxy(backend), protocol=era) as client:
        caps = client.server_capabilities
        assert caps is not None
        extensions = caps.extensions if isinstance(caps.extensions, dict) else {}
        assert APPS_EXTENSION not in extensions
        assert [tool.name for tool in await client.list_tools()] == ["hello"]


async def test_the_backends_settings_and_a_change_of_mind() -> None:
    """Settings go as the backend gives them; after a reconnection to a backend that no longer
    declares the extension the proxy does not either, but a declaration of its own stays."""
    backend = backend_server()
    backend.declare_extension(APPS_EXTENSION, {"vendor.example/flag": True})
    proxy = MCPServer.proxy(backend)
    assert isinstance(proxy, ProxyServer)
    async with Client(proxy) as client:
        assert client.server_capabilities is not None
        assert client.server_capabilities.extensions[APPS_EXTENSION] == {"vendor.example/flag": True}  # type: ignore[index]
        # The backend stops declaring it (its views gone): the next connection says so.
        del backend._extensions[APPS_EXTENSION]
        await proxy.pool.default.close()
        await proxy.pool.default.get()
        assert APPS_EXTENSION not in proxy.extensions
    async with Client(proxy) as client:
        assert client.server_capabilities is not None
        assert APPS_EXTENSION not in (client.server_capabilities.extensions or {})

    # A declaration the proxy was given itself stays, whatever the backend says.
    mine = MCPServer.proxy(MCPServer("plain-backend"))
    mine.declare_extension(APPS_EXTENSION, {"vendor.example/own": 1})
    async with Client(mine) as client:
        assert client.server_capabilities is not None
        assert client.server_capabilities.extensions[APPS_EXTENSION] == {"vendor.example/own": 1}  # type: ignore[index]


@pytest.mark.parametrize("era", ERAS)
async def test_apps_through_a_proxy_served_over_http(era: str) -> None:
    """A proxy served over HTTP, in front of an HTTP backend: the initialize / server/discover
    answer carries the backend's extension (the proxy connects its backend before answering)."""
    async with serve_http(backend_server()) as backend_url:
        proxy = MCPServer.proxy(backend_url)
        async with serve_http(proxy) as url, Client(url, protocol=era, extensions=APPS) as client:
            got = await seen(client)
    assert got["extension"] == {}
    assert got["tools"]["server_time"] == {"ui": {"resourceUri": "ui://clock/face.html"}}
    [view] = got["views"]["ui://clock/face.html"]
    assert view["mimeType"] == APP_MIME_TYPE and view["_meta"]["ui"]["prefersBorder"] is True


async def test_apps_through_a_config_of_several_servers(tmp_path: Path) -> None:
    """Each mounted proxy's views are served under its name, and the parent declares the extension."""
    command, *args = backend_command(tmp_path)
    config = {"mcpServers": {name: {"command": command, "args": args} for name in ("one", "two")}}
    async with Client(MCPServer.proxy(config), extensions=APPS) as client:
        got = await seen(client)
    # The parent serves the views: a caller without apps is filtered there as by a proxy.
    async with Client(MCPServer.proxy(config)) as client:
        plain = await seen(client)
    assert plain["views"] == {} and plain["extension"] == {}
    assert "two_set_alarm" not in plain["tools"] and not plain["tools"]["two_server_time"]
    assert got["extension"] == {}
    assert got["tools"]["two_server_time"] == {"ui": {"resourceUri": "ui://two/clock/face.html"}}
    assert sorted(got["views"]) == ["ui://one/clock/face.html", "ui://two/clock/face.html"]
    [view] = got["views"]["ui://one/clock/face.html"]
    assert view["uri"] == "ui://one/clock/face.html" and view["mimeType"] == APP_MIME_TYPE
    assert view["_meta"]["ui"]["csp"]["connectDomains"] == ["https://time.example.com"]

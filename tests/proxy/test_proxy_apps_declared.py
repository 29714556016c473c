"""MCP Apps through a proxy, from a backend that serves its views only to clients that declare
the extension (SEP-1865 "Client Capabilities"): the proxy's backend sessions declare it, so the
proxy has the views; a caller that declares it gets them, one that does not gets what the
backend itself shows a client without apps. Real backends (a process over stdio, and one in
this process), callers of both eras."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpkit import Client, Context, MCPServer
from mcpkit.protocol.apps import APP_MIME_TYPE, APPS_CLIENT_CAPABILITY, APPS_EXTENSION
from mcpkit.protocol.errors import MCPError
from mcpkit.protocol.tasks import TASKS_EXTENSION
from mcpkit.proxy import ProxyServer
from mcpkit.proxy.extensions import AppsFilter

pytestmark = pytest.mark.timeout(60)

APPS = {APPS_EXTENSION: APPS_CLIENT_CAPABILITY}

# The backend's own rule, written here (not the proxy's filter): to a client that does not
# declare apps it lists no views, not its app-only tool, and its other tools without _meta.ui.
BACKEND = textwrap.dedent(
    """
    from typing import Any

    import msgspec

    from mcpkit import Context, MCPServer
    from mcpkit.middleware import Middleware


    def declares_apps(ctx: Context) -> bool:
        extensions = ctx.client_capabilities.get("extensions") or {}
        ui = extensions.get("io.modelcontextprotocol/ui") or {}
        return "text/html;profile=mcp-app" in (ui.get("mimeTypes") or [])


    class AppsHostsOnly(Middleware):
        def hides(self, ctx: Context, kind: str, name: str) -> bool:
            if declares_apps(ctx):
                return False
            return name.startswith("ui://") or name == "set_alarm"

        async def on_list_tools(self, ctx: Context, call_next: Any) -> Any:
            result = await call_next(ctx)
            if not declares_apps(ctx):
                result.tools = [
                    msgspec.structs.replace(tool, meta=msgspec.UNSET) if tool.meta else tool
                    for tool in result.tools
                ]
            return result


    server = MCPServer("apps-hosts-only", middleware=[AppsHostsOnly()])
    server.add_ui_resource(
        "ui://clock/face.html",
        "<!doctype html><p id='time'>waiting</p>",
        csp={"connectDomains": ["https://time.example.com"]},
        prefers_border=True,
    )


    @server.tool(ui="ui://clock/face.html")
    def server_time() -> str:
        return "12:00"


    @server.tool(ui="ui://clock/face.html", visibility=["app"])
    def set_alarm(at: str) -> str:
        return f"alarm at {at}"


    @server.tool()
    def plain() -> str:
        return "no view"


    @server.tool()
    def asker_declares_apps(ctx: Context) -> str:
        return "yes" if declares_apps(ctx) else "no"


    if __name__ == "__main__":
        server.run()
    """
)


def backend_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "apps_hosts_only.py"
    script.write_text(BACKEND)
    return [sys.executable, str(script)]


def backend_server() -> MCPServer:
    namespace: dict[str, Any] = {"__name__": "apps_hosts_only"}
    exec(BACKEND, namespace)
    server: MCPServer = namespace["server"]
    return server


async def seen(client: Client) -> dict[str, Any]:
    """The tools (with _meta), resources and views a client is shown."""
    resources = [msgspec.to_builtins(r) for r in await client.list_resources()]
    views = {}
    for resource in resources:
        if resource["uri"].startswith("ui://"):
            read = await client.read_resource(resource["uri"])
            views[resource["uri"]] = [msgspec.to_builtins(c) for c in read.contents]
    return {
        "tools": {tool.name: tool.meta or None for tool in await client.list_tools()},
        "resources": resources,
        "views": views,
    }


async def refused(client: Client) -> None:
    """What a caller without apps cannot reach by name either: the view and the app-only tool."""
    with pytest.raises(MCPError):
        await client.read_resource("ui://clock/face.html")
    with pytest.raises(MCPError, match="set_alarm"):
        await client.call_tool("set_alarm", {"at": "7:00"})


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_views_reach_callers_that_declare_apps_only(tmp_path: Path, era: str) -> None:
    command = backend_command(tmp_path)
    async with Client(command, protocol=era, extensions=APPS) as direct:
        with_apps = await seen(direct)
    async with Client(command, protocol=era) as direct:
        without = await seen(direct)
        await refused(direct)
    # The backend's two answers differ as the test means them to.
    assert sorted(with_apps["tools"]) == ["asker_declares_apps", "plain", "server_time", "set_alarm"]
    assert list(with_apps["views"]) == ["ui://clock/face.html"]
    assert sorted(without["tools"]) == ["asker_declares_apps", "plain", "server_time"]
    assert without["resources"] == [] and without["views"] == {}

    proxy = MCPServer.proxy(command, protocol=era)
    assert isinstance(proxy, ProxyServer)
    async with (
        Client(proxy, protocol=era, extensions=APPS) as host,
        Client(proxy, protocol=era) as plain,
    ):
        through_host = await seen(host)
        through_plain = await seen(plain)
        await refused(plain)
        # A caller with apps calls the app-only tool, and the backend heard an apps host.
        assert (await host.call_tool("set_alarm", {"at": "7:00"})).content[0].text == "alarm at 7:00"  # type: ignore[union-attr]
        assert (await host.call_tool("asker_declares_apps")).content[0].text == "yes"  # type: ignore[union-attr]
        # Tools with a view that the model may call still work for a caller without apps.
        assert (await plain.call_tool("server_time")).content[0].text == "12:00"  # type: ignore[union-attr]
        caps = plain.server_capabilities
        assert caps is not None and isinstance(caps.extensions, dict) and APPS_EXTENSION in caps.extensions
    assert through_host == with_apps
    assert through_plain == without
    [view] = through_host["views"]["ui://clock/face.html"]
    assert view["mimeType"] == APP_MIME_TYPE
    csp = {"connectDomains": ["https://time.example.com"]}
    assert view["_meta"]["ui"] == {"csp": csp, "prefersBorder": True}
    alarm = {"resourceUri": "ui://clock/face.html", "visibility": ["app"]}
    assert through_host["tools"]["set_alarm"]["ui"] == alarm
    assert any(isinstance(m, AppsFilter) for m in proxy.middleware)


async def test_a_legacy_caller_of_a_modern_backend_in_memory() -> None:
    """The eras crossed (a 2025-11-25 caller, a 2026-07-28 backend in this process): the same."""
    backend = backend_server()
    proxy = MCPServer.proxy(backend, protocol="2026-07-28")
    async with (
        Client(proxy, protocol="2025-11-25", extensions=APPS) as host,
        Client(proxy, protocol="2025-11-25") as plain,
    ):
        through_host = await seen(host)
        through_plain = await seen(plain)
        await refused(plain)
    assert list(through_host["views"]) == ["ui://clock/face.html"]
    assert through_host["tools"]["server_time"] == {"ui": {"resourceUri": "ui://clock/face.html"}}
    assert sorted(through_plain["tools"]) == ["asker_declares_apps", "plain", "server_time"]
    assert through_plain["tools"]["server_time"] is None
    assert through_plain["resources"] == []


async def test_a_declaration_without_the_html_type_is_no_apps_host() -> None:
    """SEP-1865: a host lists the view types it renders; one without text/html;profile=mcp-app
    renders none of this revision's views, and is filtered as a caller without apps."""
    proxy = MCPServer.proxy(backend_server())
    other = {APPS_EXTENSION: {"mimeTypes": ["text/x-other"]}}
    async with Client(proxy, extensions=other) as client:
        got = await seen(client)
    assert got["views"] == {} and "set_alarm" not in got["tools"]


async def test_a_backend_without_apps_gets_no_filter() -> None:
    """Nothing is filtered (nor the proxy's fast paths given up) for a backend that does not
    declare the extension, though the proxy's sessions declare it to every backend."""
    backend = MCPServer("plain-backend")

    @backend.tool()
    def hello() -> str:
        return "hi"

    proxy = MCPServer.proxy(backend)
    async with Client(proxy) as client:
        assert [tool.name for tool in await client.list_tools()] == ["hello"]
    assert not any(isinstance(m, AppsFilter) for m in proxy.middleware)
    assert proxy.pool.extensions == {APPS_EXTENSION: APPS_CLIENT_CAPABILITY}


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_client_declares_its_extensions_beside_tasks(era: str) -> None:
    """``Client(extensions=...)``: in ``initialize`` (legacy) and in every request (modern), where
    the tasks extension is declared beside them, not in their place."""
    server = MCPServer("extensions")

    @server.tool()
    def declared(ctx: Context) -> list[str]:
        return sorted(ctx.client_capabilities.get("extensions") or {})

    async with Client(server, protocol=era, extensions=APPS) as client:
        result = await client.call_tool("declared")
    expected = sorted([APPS_EXTENSION, TASKS_EXTENSION] if era == "2026-07-28" else [APPS_EXTENSION])
    assert result.structured_content == {"result": expected}

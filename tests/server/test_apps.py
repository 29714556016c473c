"""MCP Apps on the server (server/apps.py): a ``ui://`` view served as
``text/html;profile=mcp-app`` with its ``_meta.ui`` in ``resources/list`` and in the read
contents, tools bound to it (``_meta.ui.resourceUri``, visibility), the extension in the
capabilities, and the errors for what cannot work, in both eras."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from mcpkit import MCPError, MCPServer
from mcpkit.protocol.apps import APP_MIME_TYPE, APPS_EXTENSION, AppCsp, AppPermissions, UiToolMeta, tool_ui
from mcpkit.testing import connect

ERAS = ["2025-11-25", "2026-07-28"]
PAGE = "<!doctype html><html><body><p id='out'>waiting</p></body></html>"


def build(tmp_path: Path) -> MCPServer:
    server = MCPServer("apps")
    server.add_ui_resource(
        "ui://weather/dashboard.html",
        PAGE,
        title="Weather dashboard",
        description="Shows the forecast.",
        csp={"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.example.com"]},
        permissions=["clipboardWrite"],
        prefers_border=True,
    )
    page = tmp_path / "view.html"
    page.write_text("<!doctype html><p>from a file</p>", encoding="utf-8")
    server.add_ui_resource("ui://weather/file.html", path=page)

    @server.ui_resource("ui://weather/generated.html")
    async def generated() -> str:
        """Built on every read."""
        return "<!doctype html><p>generated</p>"

    @server.tool(ui="ui://weather/dashboard.html")
    def forecast(city: str) -> str:
        """The forecast for a city."""
        return f"sunny in {city}"

    @server.tool(ui="ui://weather/dashboard.html", visibility=["app"])
    def refresh() -> str:
        return "refreshed"

    @server.tool()
    def plain() -> str:
        return "no view"

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_views_and_bound_tools_in_both_eras(era: str, tmp_path: Path) -> None:
    async with connect(build(tmp_path), protocol=era) as client:
        caps = client.server_capabilities
        assert caps is not None and caps.extensions is not msgspec.UNSET
        assert caps.extensions[APPS_EXTENSION] == {}

        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["forecast"].meta == {"ui": {"resourceUri": "ui://weather/dashboard.html"}}
        assert tools["refresh"].meta == {
            "ui": {"resourceUri": "ui://weather/dashboard.html", "visibility": ["app"]}
        }
        assert tools["plain"].meta is msgspec.UNSET
        # The deprecated flat key is not written (SEP-1865: "will be removed before GA").
        assert "ui/resourceUri" not in (tools["forecast"].meta or {})

        listed = {r.uri: r for r in await client.list_resources()}
        view = listed["ui://weather/dashboard.html"]
        assert view.mime_type == APP_MIME_TYPE
        assert view.title == "Weather dashboard" and view.description == "Shows the forecast."
        expected_ui = {
            "csp": {
                "connectDomains": ["https://api.example.com"],
                "resourceDomains": ["https://*.cdn.example.com"],
            },
            "permissions": {"clipboardWrite": {}},
            "prefersBorder": True,
        }
        assert view.meta == {"ui": expected_ui}
        assert listed["ui://weather/generated.html"].description == "Built on every read."
        assert listed["ui://weather/file.html"].meta is msgspec.UNSET

        contents = (await client.read_resource("ui://weather/dashboard.html")).contents
        assert len(contents) == 1
        assert contents[0].mime_type == APP_MIME_TYPE
        assert contents[0].text == PAGE
        assert contents[0].meta == {"ui": expected_ui}
        assert (await client.read_resource("ui://weather/file.html")).contents[
            0
        ].text == "<!doctype html><p>from a file</p>"
        generated = (await client.read_resource("ui://weather/generated.html")).contents
        assert generated[0].text == "<!doctype html><p>generated</p>"
        assert generated[0].mime_type == APP_MIME_TYPE

        # The tool still answers with text for hosts without the extension.
        result = await client.call_tool("forecast", {"city": "Oslo"})
        assert result.content[0].text == "sunny in Oslo"  # type: ignore[union-attr]


async def test_a_file_view_is_read_again_on_every_read(tmp_path: Path) -> None:
    server = build(tmp_path)
    async with connect(server) as client:
        (tmp_path / "view.html").write_text("<p>edited</p>", encoding="utf-8")
        assert (await client.read_resource("ui://weather/file.html")).contents[0].text == "<p>edited</p>"


def test_a_tool_bound_to_an_undeclared_view_is_refused_at_registration() -> None:
    server = MCPServer("apps")
    server.add_ui_resource("ui://a/one.html", PAGE)
    with pytest.raises(
        ValueError, match=r"tool 'show' is bound to ui://a/two\.html.*declared: ui://a/one\.html"
    ):

        @server.tool(ui="ui://a/two.html")
        def show() -> str:
            return ""

    assert not server.has_tool("show")
    # An ordinary resource with a ui:// URI is not a view either.
    server.resource("ui://a/plain", mime_type="text/html")(lambda: "<p></p>")
    with pytest.raises(ValueError, match="not a declared UI resource"):
        server.add_tool(lambda: "", name="other", ui="ui://a/plain")
    with pytest.raises(ValueError, match="starts with 'ui://'"):
        server.add_tool(lambda: "", name="web", ui="https://example.com/app.html")


def test_bad_views_are_refused_with_the_reason(tmp_path: Path) -> None:
    server = MCPServer("apps")
    with pytest.raises(ValueError, match="starts with 'ui://'"):
        server.add_ui_resource("https://example.com/app.html", PAGE)
    with pytest.raises(ValueError, match="exactly one"):
        server.add_ui_resource("ui://a/x.html")
    with pytest.raises(ValueError, match="exactly one"):
        server.add_ui_resource("ui://a/x.html", PAGE, path=tmp_path / "x.html")
    with pytest.raises(FileNotFoundError, match="no such file"):
        server.add_ui_resource("ui://a/x.html", path=tmp_path / "missing.html")
    with pytest.raises(ValueError, match="not an origin"):
        server.add_ui_resource(
            "ui://a/x.html", PAGE, csp={"connectDomains": ["https://a.example.com; script-src *"]}
        )
    with pytest.raises(ValueError, match="not an origin"):
        server.add_ui_resource("ui://a/x.html", PAGE, csp=AppCsp(resource_domains=["*"]))
    with pytest.raises(ValueError, match="unknown field"):
        server.add_ui_resource("ui://a/x.html", PAGE, csp={"scriptDomains": ["https://a.example.com"]})
    with pytest.raises(ValueError, match="unknown feature"):
        server.add_ui_resource("ui://a/x.html", PAGE, permissions=["usb"])
    with pytest.raises(TypeError, match="not one string"):
        server.add_ui_resource("ui://a/x.html", PAGE, permissions="camera")
    with pytest.raises(ValueError, match="visibility"):
        server.add_ui_resource("ui://a/x.html", PAGE)
        server.add_tool(lambda: "", name="t", ui="ui://a/x.html", visibility=["agent"])  # type: ignore[list-item]
    assert server.list_ui_resources() == ["ui://a/x.html"]


async def test_a_view_function_that_returns_no_text_fails_the_read() -> None:
    server = MCPServer("apps")
    server.add_ui_resource("ui://a/x.html", lambda: b"<p>bytes</p>")  # type: ignore[arg-type, return-value]
    async with connect(server) as client:
        # The server logs why; the client learns only that the read failed.
        with pytest.raises(MCPError, match="Internal error"):
            await client.read_resource("ui://a/x.html")


def test_visibility_without_a_view_and_reading_it_back() -> None:
    server = MCPServer("apps")

    @server.tool(visibility=["app"])
    def hidden() -> str:
        return ""

    definition = server._tools.get("hidden").definition
    ui = tool_ui(definition.meta)
    assert ui is not None and ui.visibility == ["app"] and ui.resource_uri is msgspec.UNSET
    assert APPS_EXTENSION not in server.extensions  # no view, nothing declared


def test_typed_inputs_are_copied_not_changed() -> None:
    server = MCPServer("apps")
    csp = AppCsp(connect_domains=["https://API.example.com/"])
    server.add_ui_resource("ui://a/x.html", PAGE, csp=csp, permissions=AppPermissions(camera={}))
    assert csp.connect_domains == ["https://API.example.com/"]
    listed = server._resources.resources["ui://a/x.html"][0]
    assert listed.meta == {
        "ui": {"csp": {"connectDomains": ["https://api.example.com"]}, "permissions": {"camera": {}}}
    }
    bound = UiToolMeta(resource_uri="ui://a/x.html")
    server.add_tool(lambda: "", name="t", ui=bound, visibility=["model"])  # type: ignore[arg-type]
    assert bound.visibility is msgspec.UNSET
    assert server._tools.get("t").definition.meta == {
        "ui": {"resourceUri": "ui://a/x.html", "visibility": ["model"]}
    }


@pytest.mark.parametrize("era", ERAS)
async def test_mounted_tools_name_their_views_under_the_mounted_uri(era: str, tmp_path: Path) -> None:
    parent = MCPServer("parent")
    parent.mount(build(tmp_path), "weather")
    async with connect(parent, protocol=era) as client:
        caps = client.server_capabilities
        assert caps is not None and caps.extensions is not msgspec.UNSET
        assert APPS_EXTENSION in caps.extensions
        tools = {tool.name: tool for tool in await client.list_tools()}
        view = tools["weather_forecast"].meta["ui"]["resourceUri"]  # type: ignore[index]
        assert view != "ui://weather/dashboard.html"  # the child's URI is not the parent's
        assert view in {r.uri for r in await client.list_resources()}
        contents = (await client.read_resource(view)).contents
        assert contents[0].mime_type == APP_MIME_TYPE and contents[0].text == PAGE
        assert tools["weather_refresh"].meta["ui"]["visibility"] == ["app"]  # type: ignore[index]

"""The ASGI app mounted inside FastAPI and Starlette routes, sharing the parent's lifespan,
under real uvicorn: every endpoint works below the mount path, in both eras and over the
legacy HTTP+SSE transport, beside the web app's own routes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from mcpkit import Client, Context, MCPServer
from mcpkit.testing._uvicorn import bound_port, start_server, stop_server


def mcp_server(events: list[str]) -> MCPServer:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, str]]:
        events.append("mcp up")
        yield {"db": "connected"}
        events.append("mcp down")

    server = MCPServer("inside", lifespan=lifespan)

    @server.tool()
    def state(ctx: Context) -> str:
        return str(ctx.lifespan_context["db"])

    return server


def fastapi_app(events: list[str]) -> FastAPI:
    server = mcp_server(events)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("web up")
        async with server.running():  # the mounted app's lifespan, inside the parent's
            yield
        events.append("web down")

    app = FastAPI(lifespan=lifespan)

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    app.mount("/agents", server.asgi_app())
    return app


def starlette_app(events: list[str]) -> Starlette:
    server = mcp_server(events)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        events.append("web up")
        async with server.running():
            yield
        events.append("web down")

    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse('{"hello":"world"}')

    return Starlette(
        routes=[Route("/hello", hello), Mount("/agents", app=server.asgi_app())],
        lifespan=lifespan,
    )


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
    server, task = await start_server(config)
    try:
        yield f"http://127.0.0.1:{bound_port(server)}"
    finally:
        await stop_server(server, task)


@pytest.mark.parametrize("make", [fastapi_app, starlette_app], ids=["fastapi", "starlette"])
async def test_mounted_in_a_web_app(make: Callable[[list[str]], Any]) -> None:
    events: list[str] = []
    async with serving(make(events)) as base:
        assert events == ["web up", "mcp up"]
        async with httpx.AsyncClient() as web:
            assert (await web.get(f"{base}/hello")).json() == {"hello": "world"}
            assert (await web.get(f"{base}/agents/healthz")).status_code == 200
        for protocol in ("modern", "legacy"):
            async with Client(f"{base}/agents/mcp", protocol=protocol) as client:  # type: ignore[arg-type]
                result = await client.call_tool("state", {})
                assert result.content[0].text == "connected"  # type: ignore[union-attr]
        # The legacy HTTP+SSE transport: its endpoint event names the mounted message path.
        async with Client(f"{base}/agents/sse", transport="sse") as client:
            result = await client.call_tool("state", {})
            assert result.content[0].text == "connected"  # type: ignore[union-attr]
    assert events == ["web up", "mcp up", "mcp down", "web down"]

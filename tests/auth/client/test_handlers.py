"""Authorization handlers: headless (read Location) and browser (loopback callback server)."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from oauth_world import World, rpc

from mcpkit.auth.client import (
    AuthorizationError,
    AuthorizationHandler,
    BrowserAuthorizationHandler,
    HeadlessAuthorizationHandler,
    OAuthClientAuth,
)

AUTH_URL = "https://auth.example.com/authorize?state=s1&client_id=c"


def test_handlers_satisfy_the_protocol() -> None:
    assert isinstance(HeadlessAuthorizationHandler(), AuthorizationHandler)
    assert isinstance(BrowserAuthorizationHandler(), AuthorizationHandler)


async def test_headless_reads_location() -> None:
    handler = HeadlessAuthorizationHandler("http://127.0.0.1:3030/callback")
    assert await handler.redirect_uri() == "http://127.0.0.1:3030/callback"
    request = handler.authorization_request(AUTH_URL)
    assert request.method == "GET" and str(request.url) == AUTH_URL
    redirect = httpx.Response(
        302, headers={"location": "http://127.0.0.1:3030/callback?code=c&state=s1&iss=x"}
    )
    assert await handler.authorization_response(AUTH_URL, redirect) == {
        "code": "c",
        "state": "s1",
        "iss": "x",
    }


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<form>login</form>"),
        httpx.Response(400, json={"error": "invalid_request"}),
        httpx.Response(302, headers={"location": "https://evil.example.com/callback?code=c&state=s1"}),
        httpx.Response(302, headers={"location": "http://127.0.0.1:3031/callback?code=c"}),
        httpx.Response(302, headers={"location": "/callback?code=c"}),  # relative: on the AS, not ours
        None,
    ],
)
async def test_headless_refuses_anything_but_our_redirect(response: httpx.Response | None) -> None:
    with pytest.raises(AuthorizationError):
        await HeadlessAuthorizationHandler().authorization_response(AUTH_URL, response)


def test_browser_handler_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError):
        BrowserAuthorizationHandler(host="0.0.0.0")
    with pytest.raises(ValueError):
        BrowserAuthorizationHandler(host="192.168.1.10")


async def test_browser_callback_one_shot_with_state_check() -> None:
    calls: list[str] = []
    handler = BrowserAuthorizationHandler(open_url=lambda url: bool(calls.append(url)) or True, timeout=5)
    redirect = await handler.redirect_uri()
    assert redirect.startswith("http://127.0.0.1:") and redirect.endswith("/callback")
    assert await handler.redirect_uri() == redirect  # stable: registered once
    pending = asyncio.ensure_future(handler.authorization_response(AUTH_URL, None))
    async with httpx.AsyncClient() as http:
        for _ in range(100):
            try:
                wrong_path = await http.get(redirect.replace("/callback", "/other"))
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.01)
        assert wrong_path.status_code == 404
        assert (await http.post(redirect)).status_code == 405
        assert (await http.get(f"{redirect}?code=evil&state=forged")).status_code == 400
        assert not pending.done()  # a bogus callback does not end the flow
        ok = await http.get(f"{redirect}?code=abc&state=s1&iss=https%3A%2F%2Fauth.example.com")
        assert ok.status_code == 200 and "close this window" in ok.text
        assert await pending == {"code": "abc", "state": "s1", "iss": "https://auth.example.com"}
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{redirect}?code=again&state=s1")  # one-shot: closed
    assert calls == [AUTH_URL]


async def test_browser_timeout_and_unopenable_browser(caplog: pytest.LogCaptureFixture) -> None:
    handler = BrowserAuthorizationHandler(open_url=lambda url: False, timeout=0.2)
    with (
        caplog.at_level(logging.WARNING, "mcpkit.auth.client"),
        pytest.raises(AuthorizationError, match="no authorization callback"),
    ):
        await handler.authorization_response(AUTH_URL, None)
    assert "open this URL" in caplog.text


@pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,x"])
async def test_browser_never_opens_dangerous_schemes(url: str) -> None:
    opened: list[str] = []
    handler = BrowserAuthorizationHandler(open_url=lambda u: bool(opened.append(u)), timeout=0.2)
    with pytest.raises(AuthorizationError, match="refusing"):
        await handler.authorization_response(url, None)
    assert opened == []


async def test_browser_handler_end_to_end(world: World) -> None:
    """The 'browser' follows the AS's redirect to the loopback callback, as a real one would."""

    def browser(url: str) -> bool:
        with httpx.Client() as agent:
            at_as = agent.get(url)
            assert at_as.status_code == 302
            agent.get(at_as.headers["location"])
        return True

    handler = BrowserAuthorizationHandler(open_url=browser, timeout=10)
    auth = OAuthClientAuth(world.rs.mcp_url, handler=handler)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
    register = next(s for s in world.auth.seen if s.path == "/register")
    doc = json.loads(register.body)
    assert doc["redirect_uris"] == [await handler.redirect_uri()] and doc["application_type"] == "native"
    token = next(s for s in world.auth.seen if s.path == "/token")
    assert token.form["redirect_uri"] == await handler.redirect_uri()

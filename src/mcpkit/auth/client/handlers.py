"""How the user agent reaches the authorization endpoint and the redirect comes back.

An :class:`AuthorizationHandler` is sans-IO friendly: it may ask the auth flow to
send a request for it (:meth:`~AuthorizationHandler.authorization_request`), then
turns the outcome into the redirect's query parameters. The flow validates those
(``iss``, ``state``) — handlers only transport them.

* :class:`HeadlessAuthorizationHandler` (default): GETs the authorization URL
  without following redirects and reads ``code``/``state``/``iss`` from the
  ``Location`` of the immediate 302 — for tests, services, and authorization
  servers that auto-approve (the MCP conformance AS does).
* :class:`BrowserAuthorizationHandler`: opens the system browser with
  :func:`webbrowser.open` (never a shell: CVE-2025-6514) and catches the redirect
  on a one-shot loopback HTTP server (RFC 8252 §7.3).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import webbrowser
from collections.abc import Callable
from typing import Protocol, runtime_checkable
from urllib.parse import urljoin, urlsplit

import httpx

from ._http import build_request
from .authcode import redirect_params
from .errors import AuthorizationError
from .urlpolicy import HostClass, classify_host

__all__ = ["AuthorizationHandler", "BrowserAuthorizationHandler", "HeadlessAuthorizationHandler"]

logger = logging.getLogger("mcpkit.auth.client")

DEFAULT_REDIRECT_URI = "http://127.0.0.1:3030/callback"


@runtime_checkable
class AuthorizationHandler(Protocol):
    """Drives the front-channel part of the authorization code flow."""

    async def redirect_uri(self) -> str:
        """The redirect URI to register and to send (stable across calls)."""
        ...

    def authorization_request(self, url: str) -> httpx.Request | None:
        """A request for the auth flow to send on the handler's behalf, or None."""
        ...

    async def authorization_response(self, url: str, response: httpx.Response | None) -> dict[str, str]:
        """The query parameters the authorization server redirected back with."""
        ...


def _without_query(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path}"


class HeadlessAuthorizationHandler:
    """Fetch the authorization URL and read the redirect from ``Location`` (no browser)."""

    def __init__(self, redirect_uri: str = DEFAULT_REDIRECT_URI, *, timeout: float = 30.0) -> None:
        self._redirect_uri = redirect_uri
        self.timeout = timeout

    async def redirect_uri(self) -> str:
        """The redirect URI given to the constructor."""
        return self._redirect_uri

    def authorization_request(self, url: str) -> httpx.Request:
        """A GET of the authorization URL for the auth flow to send (the 302 is read, not followed)."""
        return build_request("GET", url, timeout=self.timeout, headers={"accept": "text/html, */*"})

    async def authorization_response(self, url: str, response: httpx.Response | None) -> dict[str, str]:
        """The query parameters of the redirect to ``redirect_uri`` in ``response``'s ``Location``;
        :class:`AuthorizationError` if the endpoint did not redirect there."""
        if response is None or not response.is_redirect:
            status = response.status_code if response is not None else "no response"
            raise AuthorizationError(
                f"authorization endpoint answered {status} instead of redirecting: it needs user "
                "interaction (use BrowserAuthorizationHandler)"
            )
        location = urljoin(url, response.headers["location"])
        # The AS must send the user agent back to our redirect URI; anything else is
        # not ours to read (and is never fetched).
        if _without_query(location) != _without_query(self._redirect_uri):
            raise AuthorizationError("authorization server redirected somewhere other than redirect_uri")
        return redirect_params(location)


_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>Authorization complete</title>"
    b"<p>Authorization complete. You can close this window.</p>"
)


class BrowserAuthorizationHandler:
    """Open the system browser; receive the redirect on ``http://127.0.0.1:<port><path>``.

    ``port=0`` picks a free port once and keeps it, so the registered redirect URI
    stays valid for later authorizations (step-up). The callback server listens only
    while an authorization is pending, accepts exactly one callback whose ``state``
    matches the pending request (other requests get 4xx and are ignored, so a local
    process cannot abort the flow with a bogus callback), then closes; it gives up
    after ``timeout`` seconds. ``open_url`` replaces :func:`webbrowser.open` (which
    never invokes a shell); it must not pass the URL through a shell either.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/callback",
        timeout: float = 300.0,
        open_url: Callable[[str], bool] | None = None,
    ) -> None:
        if classify_host(host) is not HostClass.LOOPBACK:
            raise ValueError("the callback server must listen on a loopback address")
        self.host, self.port, self.path, self.timeout = host, port, path, timeout
        self._open = open_url or webbrowser.open

    async def redirect_uri(self) -> str:
        """``http://<host>:<port><path>`` on loopback; ``port=0`` picks a free port on the first call."""
        if self.port == 0:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((self.host, 0))
                self.port = probe.getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    def authorization_request(self, url: str) -> None:
        """None: the browser, not the auth flow, fetches the authorization URL."""

    async def authorization_response(self, url: str, response: httpx.Response | None) -> dict[str, str]:
        """Open ``url`` in the browser and return the query parameters of the one callback with the
        expected ``state``; :class:`AuthorizationError` after ``timeout`` seconds."""
        scheme = urlsplit(url).scheme.lower()
        if scheme not in ("https", "http"):  # defence in depth; the flow vetted it already
            raise AuthorizationError(f"refusing to open a {scheme!r} URL")
        await self.redirect_uri()
        expected_state = redirect_params(url).get("state")
        result: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        serve = functools.partial(self._serve, result, expected_state)
        server = await asyncio.start_server(serve, self.host, self.port)
        try:
            if not await asyncio.to_thread(self._open, url):
                logger.warning("could not open a browser; open this URL to authorize: %s", url)
            async with asyncio.timeout(self.timeout):
                return await result
        except TimeoutError:
            raise AuthorizationError(f"no authorization callback within {self.timeout:g}s") from None
        finally:
            server.close()
            await server.wait_closed()

    async def _serve(
        self,
        result: asyncio.Future[dict[str, str]],
        expected_state: str | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        status, body = b"400 Bad Request", b"bad request"
        try:
            async with asyncio.timeout(10):
                request_line = await reader.readline()
                for _ in range(100):  # headers: read and ignore
                    if (await reader.readline()) in (b"\r\n", b"\n", b""):
                        break
            parts = request_line.decode("latin-1").split()
            if len(parts) != 3 or parts[0] != "GET":
                status, body = b"405 Method Not Allowed", b"method not allowed"
            elif urlsplit(parts[1]).path != self.path:
                status, body = b"404 Not Found", b"not found"
            elif result.done():
                status, body = b"410 Gone", b"already handled"
            else:
                params = redirect_params(parts[1])
                if expected_state is not None and params.get("state") != expected_state:
                    status, body = b"400 Bad Request", b"state mismatch"
                else:
                    result.set_result(params)
                    status, body = b"200 OK", _PAGE
        except (TimeoutError, AuthorizationError, ValueError, ConnectionError):
            pass
        try:
            writer.write(
                b"HTTP/1.1 " + status + b"\r\ncontent-type: text/html; charset=utf-8\r\n"
                b"cache-control: no-store\r\nconnection: close\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

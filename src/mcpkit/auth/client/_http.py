"""Sans-IO plumbing: flows are generators of *effects*; one driver runs them in ``httpx.Auth``.

A flow step is a plain generator (so steps compose with ``yield from`` and
return values) yielding:

* an ``httpx.Request`` — the MCP request itself: sent by httpx, its response
  handed back unread (it may be an SSE stream that must reach the caller intact);
* a :class:`Fetch` — an OAuth-side request (metadata, registration, token): its
  body is read, bounded, before the step sees it;
* any awaitable — local async work (DNS checks, token store, a browser callback).

httpx only lets an auth flow *send* requests through the client it belongs to,
with that client's redirect setting for all of them. OAuth traffic must not
follow redirects unchecked (SSRF), so :func:`get_document` follows them itself,
re-vetting each hop, and a response that httpx already redirected is refused:
use a client with ``follow_redirects=False`` (httpx's default, and mcpkit's).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urljoin

import httpx

from .errors import DiscoveryError, OAuthError
from .urlpolicy import UrlPolicy

__all__ = ["Fetch", "Step", "build_request", "drive", "get_document", "response_json"]

T = TypeVar("T")
Step = Generator[Any, Any, T]

#: OAuth documents are small; a hostile server must not make us buffer gigabytes.
MAX_BODY = 1 << 20
MAX_REDIRECTS = 3


@dataclass(frozen=True)
class Fetch:
    """An OAuth-side request; the step receives the response with its body read."""

    request: httpx.Request
    max_body: int = MAX_BODY


class _Capped(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int, url: str) -> None:
        self._inner, self._limit, self._url = inner, limit, url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            total += len(chunk)
            if total > self._limit:
                raise OAuthError(f"response from {self._url} exceeds {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


async def read_bounded(response: httpx.Response, request: httpx.Request, limit: int) -> None:
    """Read the body of an OAuth-side response, refusing oversize or encoded bodies."""
    url = str(request.url)
    if response.request is not request:
        raise OAuthError(
            f"the HTTP client followed a redirect from {url} unchecked; OAuth needs follow_redirects=False"
        )
    # We asked for identity: a compressed body could expand far beyond the cap.
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise OAuthError(f"response from {url} is {encoding}-encoded; refused")
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise OAuthError(f"response from {url} exceeds {limit} bytes")
    if isinstance(response.stream, httpx.AsyncByteStream):
        response.stream = _Capped(response.stream, limit, url)
    await response.aread()


async def drive(step: Step[None]) -> AsyncGenerator[httpx.Request, httpx.Response]:
    """Run a flow step as an httpx async auth flow."""
    send: Any = None
    throw: Exception | None = None
    try:
        while True:
            try:
                effect = step.throw(throw) if throw is not None else step.send(send)
            except StopIteration:
                return
            send, throw = None, None
            if isinstance(effect, httpx.Request):
                send = yield effect
                continue
            try:
                if isinstance(effect, Fetch):
                    response = yield effect.request
                    await read_bounded(response, effect.request, effect.max_body)
                    send = response
                else:
                    send = await effect
            except Exception as exc:  # handed to the step, which may recover or re-raise
                throw = exc
    finally:
        step.close()


def build_request(
    method: str,
    url: str,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    json_body: Any = None,
) -> httpx.Request:
    """An OAuth-side request with its own timeout (a bare ``httpx.Request`` has none)."""
    merged = {"accept": "application/json", "accept-encoding": "identity", **(headers or {})}
    return httpx.Request(
        method,
        url,
        headers=merged,
        data=form,
        json=json_body,
        extensions={"timeout": httpx.Timeout(timeout).as_dict()},
    )


def response_json(response: httpx.Response) -> Any:
    """The JSON body, or None when there is none or it does not parse."""
    try:
        return json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return None


def get_document(url: str, policy: UrlPolicy, purpose: str, timeout: float) -> Step[tuple[int, Any]]:
    """GET a JSON document, following up to 3 redirects, each hop re-vetted by ``policy``."""
    for _ in range(MAX_REDIRECTS + 1):
        yield policy.check_resolved(url, purpose=purpose)
        response: httpx.Response = yield Fetch(build_request("GET", url, timeout=timeout))
        location = response.headers.get("location")
        if response.is_redirect and location:
            url = urljoin(url, location)
            continue
        return response.status_code, response_json(response)
    raise DiscoveryError(f"{purpose}: too many redirects")

"""Fetching through the guard: every hop checked, the connection pinned to the checked address.

How the connection is pinned (no DNS-rebinding window). For each hop the guard
resolves the host once and checks every address (:func:`~.guard.check_url`).
The request is then sent to a copy of the URL whose host is the checked
*address literal*, so httpx and httpcore never resolve the name: the socket is
opened to that address and nothing else. What the origin server sees is
unchanged:

* the ``Host`` header is set explicitly to the URL's own host (and port, when
  the URL writes one), so virtual hosting works;
* over https the request carries httpcore's ``sni_hostname`` extension with the
  URL's host name: the TLS handshake sends that name as SNI, and the
  certificate is verified against that name (Python's ``ssl`` uses
  ``server_hostname`` for both), not against the address.

A fresh client (connection pool) serves each hop, so a connection opened for
one host name is never reused for another that happens to share its address
and port. The client ignores the environment (``trust_env=False``): no proxy
from ``HTTP_PROXY`` gets to resolve names on its own. Redirects are not
followed by httpx; :meth:`Fetcher.get` follows them itself, checking each
``Location`` as a new hop, up to a bounded count.

Bodies are read raw and decompressed here with a bound on the *decoded* size,
so a small gzip bomb cannot become gigabytes in memory.
"""

from __future__ import annotations

import ssl
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .guard import AddressPolicy, Resolver, Target, check_url, system_resolver

if TYPE_CHECKING:
    import httpx

__all__ = ["REDIRECT_STATUSES", "FetchError", "Fetcher", "Page"]

#: Responses whose ``Location`` is followed (as a GET).
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

_ACCEPT = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8"


class FetchError(Exception):
    """A fetch failed (network, status, size); ``str(exc)`` is the message for the model."""


@dataclass(frozen=True)
class Page:
    """A fetched response: the body (at most ``max_bytes``, decompressed) and what describes it."""

    #: The URL that answered (after redirects).
    url: str
    status: int
    content_type: str
    #: The charset the ``Content-Type`` header names, if any.
    charset: str | None
    body: bytes
    #: Whether the body was cut at ``max_bytes`` (the rest was not read).
    cut: bool = False


@dataclass(frozen=True)
class _Redirect:
    location: str


class _Decoder:
    """Undo one ``Content-Encoding`` (gzip or deflate), never producing more than asked for."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._first = True
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding)
        self._zlib = zlib.decompressobj(wbits) if wbits is not None else None

    def feed(self, data: bytes, room: int) -> bytes:
        if self._zlib is None:
            return data[:room]
        try:
            return self._zlib.decompress(data, room)
        except zlib.error:
            if self.encoding == "deflate" and self._first:
                # "deflate" is sent both zlib-wrapped (as RFC 9110 says) and raw, in the wild.
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                self._first = False
                return self.feed(data, room)
            raise FetchError(f"the response's {self.encoding} body is corrupt") from None
        finally:
            self._first = False


def _decoder(header: str | None) -> _Decoder:
    codings = [c.strip().lower() for c in (header or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Decoder("identity")
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return _Decoder("gzip" if codings[0] == "x-gzip" else codings[0])
    raise FetchError(f"the response uses a content encoding this server does not decode ({header})")


class Fetcher:
    """GET URLs through the SSRF guard, following redirects itself.

    ``policy`` decides which addresses may be reached; ``resolver`` turns names into
    addresses once per hop (the system's ``getaddrinfo`` by default); ``ca_file``
    adds trusted certificates (PEM) instead of the default bundle; ``timeout`` bounds
    each network operation (the caller bounds the whole fetch).
    """

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        resolver: Resolver | None = None,
        ca_file: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.policy = policy
        self.resolver: Resolver = resolver or system_resolver
        self.ca_file = ca_file
        self.timeout = timeout
        self._ssl: ssl.SSLContext | None = None

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS settings every https hop uses (built once: loading a CA bundle takes time)."""
        if self._ssl is None:
            if self.ca_file is not None:
                self._ssl = ssl.create_default_context(cafile=self.ca_file)
            else:
                import httpx

                self._ssl = httpx.create_ssl_context(trust_env=False)
        return self._ssl

    async def get(self, url: str, *, user_agent: str, max_bytes: int, max_redirects: int) -> Page:
        """Fetch ``url``: each hop checked by the guard, at most ``max_redirects`` redirects,
        at most ``max_bytes`` of body. Raises :class:`~.guard.FetchRefused` (the guard said no) or
        :class:`FetchError`."""
        current: str | httpx.URL = url
        for _ in range(max_redirects + 1):
            target = await check_url(current, self.policy, self.resolver)
            answer = await self._hop(target, user_agent, max_bytes)
            if isinstance(answer, Page):
                return answer
            try:
                current = target.url.join(answer.location)
            except Exception:
                raise FetchError(f"{target.url} redirected to an invalid URL: {answer.location!r}") from None
        raise FetchError(f"Failed to fetch {url}: more than {max_redirects} redirects (--max-redirects)")

    async def _hop(self, target: Target, user_agent: str, max_bytes: int) -> Page | _Redirect:
        import httpx

        headers = {
            "Host": target.host_header,
            "User-Agent": user_agent,
            "Accept": _ACCEPT,
            "Accept-Encoding": "gzip, deflate",
        }
        extensions = {}
        if target.url.scheme == "https" and target.by_name:
            extensions["sni_hostname"] = target.host
        failure: Exception | None = None
        for address in target.addresses:
            pinned = target.url.copy_with(host=str(address))
            async with httpx.AsyncClient(
                verify=self.ssl_context(),
                trust_env=False,
                follow_redirects=False,
                timeout=httpx.Timeout(self.timeout),
            ) as client:
                request = client.build_request("GET", pinned, headers=headers, extensions=extensions)
                try:
                    response = await client.send(request, stream=True)
                except httpx.ConnectError as exc:
                    failure = exc  # this address did not answer: try the next checked one
                    continue
                except httpx.HTTPError as exc:
                    raise FetchError(f"Failed to fetch {target.url}: {_describe(exc)}") from None
                try:
                    return await _answer(target, response, max_bytes)
                except httpx.HTTPError as exc:
                    raise FetchError(f"Failed to fetch {target.url}: {_describe(exc)}") from None
                finally:
                    await response.aclose()
        raise FetchError(f"Failed to fetch {target.url}: {_describe(failure)}")


async def _answer(target: Target, response: httpx.Response, max_bytes: int) -> Page | _Redirect:
    location = response.headers.get("location")
    if response.status_code in REDIRECT_STATUSES and location:
        return _Redirect(location)
    body, cut = await _read(response, max_bytes)
    return Page(
        url=str(target.url),
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        charset=response.charset_encoding,
        body=body,
        cut=cut,
    )


async def _read(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    decoder = _decoder(response.headers.get("content-encoding"))
    body = bytearray()
    received = 0
    async for chunk in response.aiter_raw():
        received += len(chunk)
        body += decoder.feed(chunk, max_bytes + 1 - len(body))
        if len(body) > max_bytes or received > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no address to connect to"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

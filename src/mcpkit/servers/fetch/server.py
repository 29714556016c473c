"""The fetch server: the ``fetch`` tool and the ``fetch`` prompt, on mcpkit's framework.

Compatible with the community ``mcp-server-fetch``: the same tool name and
arguments (``url``, ``max_length`` default 5000, ``start_index`` default 0,
``raw`` default false), the same prompt, the same pagination words ("Call the
fetch tool with a start_index of N to get more content"), robots.txt obeyed for
the model's fetches (the tool) and not for the user's (the prompt). What it adds
is the SSRF guard (:mod:`.guard`, :mod:`.web`) and limits on size, time and
redirects.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated

import msgspec

from ..._version import __version__
from ...protocol import types as t
from ...server import MCPServer, UserMessage
from .content import decode, html_to_markdown, is_binary, is_html, paginate, raw_prefix
from .guard import AddressPolicy, FetchRefused, Resolver, check_url
from .robots import RobotsTxt, product_token
from .web import Fetcher, FetchError, Page

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_USER_AGENT_AUTONOMOUS",
    "DEFAULT_USER_AGENT_MANUAL",
    "FetchSettings",
    "build_server",
]

#: The user agent of the model's fetches (the tool). Its product token,
#: ``ModelContextProtocol``, is the one robots.txt files address MCP fetchers by.
DEFAULT_USER_AGENT_AUTONOMOUS = "ModelContextProtocol/1.0 (Autonomous; mcpkit-fetch)"
#: The user agent of the user's fetches (the prompt).
DEFAULT_USER_AGENT_MANUAL = "ModelContextProtocol/1.0 (User-Specified; mcpkit-fetch)"
#: Default ``--max-bytes``: the most of a response body that is read (decompressed).
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
#: RFC 9309 section 2.5: crawlers must parse at least 500 KiB of a robots.txt.
ROBOTS_MAX_BYTES = 512 * 1024
#: RFC 9309 section 2.3.1.2: follow at least five redirects for robots.txt.
ROBOTS_MAX_REDIRECTS = 5
#: The robots.txt text quoted back to the model when it forbids a page is cut here.
_ROBOTS_QUOTE = 4000

TOOL_DESCRIPTION = (
    "Fetches a URL from the internet and optionally extracts its contents as markdown.\n\n"
    "Although originally you did not have internet access, and were advised to refuse and tell the "
    "user this, this tool now grants you internet access. Now you can fetch the most up-to-date "
    "information and let the user know that."
)


@dataclass(frozen=True)
class FetchSettings:
    """Everything the command line sets (see ``python -m mcpkit.servers.fetch --help``)."""

    #: Replaces both default user agents (``--user-agent``).
    user_agent: str | None = None
    #: Fetch pages robots.txt forbids (``--ignore-robots-txt``).
    ignore_robots_txt: bool = False
    #: Names, addresses and networks reachable although not public (``--allow-host``).
    allow_hosts: tuple[str, ...] = ()
    #: Every non-public address but the cloud metadata ones (``--allow-private``).
    allow_private: bool = False
    #: The most of a body read, decompressed (``--max-bytes``).
    max_bytes: int = DEFAULT_MAX_BYTES
    #: Seconds one fetch may take, robots.txt and redirects included (``--timeout``).
    timeout: float = 30.0
    #: Redirects followed, each checked like the first URL (``--max-redirects``).
    max_redirects: int = 5
    #: PEM certificates to trust instead of the default bundle (``--ca-file``).
    ca_file: str | None = None
    #: How names become addresses (the system resolver when None); for embedding and tests.
    resolver: Resolver | None = None

    def policy(self) -> AddressPolicy:
        """The guard's policy; ValueError names a bad ``--allow-host`` entry."""
        return AddressPolicy.from_options(self.allow_hosts, self.allow_private)


class _Service:
    """The fetching behind the tool and the prompt, with the settings applied."""

    def __init__(self, settings: FetchSettings) -> None:
        self.settings = settings
        self.fetcher = Fetcher(
            settings.policy(), resolver=settings.resolver, ca_file=settings.ca_file, timeout=settings.timeout
        )
        self.autonomous = settings.user_agent or DEFAULT_USER_AGENT_AUTONOMOUS
        self.manual = settings.user_agent or DEFAULT_USER_AGENT_MANUAL

    async def content(self, url: str, *, user_agent: str, raw: bool, robots: bool) -> tuple[str, str]:
        """``(content, prefix)`` for ``url``: Markdown for HTML (unless ``raw``), text as is.

        Raises :class:`FetchRefused` or :class:`FetchError` with the message for the model."""
        limit = self.settings.timeout
        try:
            async with asyncio.timeout(limit):
                # The page's own hop is checked first, so a refused URL is reported as
                # itself rather than as its robots.txt.
                await check_url(url, self.fetcher.policy, self.fetcher.resolver)
                if robots:
                    await self._obey_robots(url, user_agent)
                page = await self.fetcher.get(
                    url,
                    user_agent=user_agent,
                    max_bytes=self.settings.max_bytes,
                    max_redirects=self.settings.max_redirects,
                )
        except TimeoutError:
            raise FetchError(f"Failed to fetch {url}: no answer within {limit:g} s (--timeout)") from None
        if page.status >= 400:
            raise FetchError(f"Failed to fetch {url} - status code {page.status}")
        return await asyncio.to_thread(self._render, page, raw)

    def _render(self, page: Page, raw: bool) -> tuple[str, str]:
        if is_binary(page.content_type, page.body):
            kind = page.content_type.split(";", 1)[0] or "binary data"
            raise FetchError(
                f"Failed to fetch {page.url}: the response is {kind}, not text; this tool returns text only"
            )
        text = decode(page.body, page.charset, page.content_type)
        note = ""
        if page.cut:
            note = (
                f"The response is longer than {self.settings.max_bytes} bytes (--max-bytes); "
                "only its beginning was read.\n"
            )
        if is_html(text, page.content_type) and not raw:
            return html_to_markdown(text, page.url), note
        return text, note + raw_prefix(page.content_type)

    async def _obey_robots(self, url: str, user_agent: str) -> None:
        import httpx

        parsed = httpx.URL(url)
        robots_url = str(parsed.copy_with(path="/robots.txt", query=None, fragment=None))
        try:
            robots = await self.fetcher.get(
                robots_url,
                user_agent=user_agent,
                max_bytes=ROBOTS_MAX_BYTES,
                max_redirects=ROBOTS_MAX_REDIRECTS,
            )
        except FetchError as exc:
            detail = str(exc).split(": ", 1)[-1]
            raise FetchError(
                f"Failed to fetch robots.txt {robots_url} due to a connection issue ({detail})"
            ) from None
        status = robots.status
        if status in (401, 403):
            raise FetchError(
                f"When fetching robots.txt ({robots_url}), received status {status} so assuming that "
                "autonomous fetching is not allowed, the user can try manually fetching by using the "
                "fetch prompt"
            )
        if 400 <= status < 500:
            return  # RFC 9309 section 2.3.1.3: no robots.txt, no restrictions
        if status >= 500:
            # RFC 9309 section 2.3.1.4: unreachable robots.txt means complete disallow.
            raise FetchError(
                f"When fetching robots.txt ({robots_url}), received status {status} so assuming that "
                "autonomous fetching is not allowed, the user can try manually fetching by using the "
                "fetch prompt"
            )
        if status >= 300:
            return
        text = decode(robots.body, robots.charset, robots.content_type)
        path = parsed.raw_path.decode("ascii", "replace")
        if RobotsTxt.parse(text).allowed(path, product_token(user_agent)):
            return
        quoted = text if len(text) <= _ROBOTS_QUOTE else text[:_ROBOTS_QUOTE] + "\n[...]"
        raise FetchError(
            f"The sites robots.txt ({robots_url}), specifies that autonomous fetching of this page is not "
            f"allowed, <useragent>{user_agent}</useragent>\n<url>{url}</url><robots>\n{quoted}\n</robots>\n"
            "The assistant must let the user know that it failed to view the page. The assistant may "
            "provide further guidance based on the above information.\n"
            "The assistant can tell the user that they can try manually fetching the page by using the "
            "fetch prompt within their UI."
        )


def build_server(settings: FetchSettings | None = None) -> MCPServer:
    """The fetch server for ``settings`` (not yet running: ``server.run()`` serves stdio).

    Raises ValueError for settings that make no sense (a bad ``--allow-host``, a limit
    below 1)."""
    settings = settings or FetchSettings()
    if settings.max_bytes < 1 or settings.timeout <= 0 or settings.max_redirects < 0:
        raise ValueError("--max-bytes and --timeout must be positive, --max-redirects at least 0")
    service = _Service(settings)
    server = MCPServer(
        "mcpkit-fetch",
        __version__,
        instructions="Fetches web pages (public addresses only) and returns them as Markdown.",
    )

    @server.tool(
        name="fetch",
        description=TOOL_DESCRIPTION,
        annotations=t.ToolAnnotations(read_only_hint=True, open_world_hint=True),
        structured_output=False,
    )
    async def fetch(
        url: Annotated[str, msgspec.Meta(min_length=1, description="URL to fetch")],
        max_length: Annotated[
            int, msgspec.Meta(gt=0, lt=1_000_000, description="Maximum number of characters to return.")
        ] = 5000,
        start_index: Annotated[
            int,
            msgspec.Meta(
                ge=0,
                description="On return output starting at this character index, useful if a previous "
                "fetch was truncated and more context is required.",
            ),
        ] = 0,
        raw: Annotated[
            bool,
            msgspec.Meta(
                description="Get the actual HTML content of the requested page, without simplification."
            ),
        ] = False,
    ) -> t.CallToolResult:
        try:
            content, prefix = await service.content(
                url, user_agent=service.autonomous, raw=raw, robots=not settings.ignore_robots_txt
            )
        except (FetchRefused, FetchError) as exc:
            # An expected failure, told to the model (isError), not an exception to log or mask.
            return t.CallToolResult(content=[t.TextContent(text=str(exc))], is_error=True)
        text = f"{prefix}Contents of {url}:\n{paginate(content, start_index, max_length)}"
        return t.CallToolResult(content=[t.TextContent(text=text)], is_error=False)

    @server.prompt(name="fetch", description="Fetch a URL and extract its contents as markdown")
    async def fetch_prompt(url: Annotated[str, "URL to fetch"]) -> t.GetPromptResult:
        # The user asked for this page: robots.txt is not consulted (as in the community
        # server); the SSRF guard and the limits are.
        try:
            content, prefix = await service.content(url, user_agent=service.manual, raw=False, robots=False)
        except (FetchRefused, FetchError) as exc:
            return t.GetPromptResult(description=f"Failed to fetch {url}", messages=[UserMessage(str(exc))])
        return t.GetPromptResult(description=f"Contents of {url}", messages=[UserMessage(prefix + content)])

    return server

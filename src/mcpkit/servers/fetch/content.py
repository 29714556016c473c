"""What a fetched page becomes for the model: text, HTML simplified to Markdown, one page of it."""

from __future__ import annotations

import codecs
import re
from typing import Any

__all__ = [
    "NO_MORE_CONTENT",
    "SIMPLIFY_FAILED",
    "decode",
    "html_to_markdown",
    "is_binary",
    "is_html",
    "paginate",
    "raw_prefix",
]

#: What the tool answers for a start_index at or past the end (the community server's words).
NO_MORE_CONTENT = "<error>No more content available.</error>"
#: What the tool answers when an HTML page has no text left once simplified.
SIMPLIFY_FAILED = "<error>Page failed to be simplified from HTML</error>"

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_BINARY_MAJOR = ("image/", "audio/", "video/", "font/", "model/")
_BINARY_TYPES = frozenset(
    {
        "application/octet-stream",
        "application/pdf",
        "application/zip",
        "application/gzip",
        "application/x-tar",
        "application/x-7z-compressed",
        "application/vnd.ms-excel",
        "application/msword",
        "application/wasm",
    }
)
# Elements that never hold the page's readable text.
_NOISE = ("script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "canvas", "head")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*){2,}")


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_binary(content_type: str, body: bytes) -> bool:
    """Whether a response is not text (an image, a PDF, an archive...): the tool returns text only."""
    media = _media_type(content_type)
    if media.startswith(_BINARY_MAJOR) or media in _BINARY_TYPES:
        return True
    if media.startswith("text/") or media.endswith(("json", "xml", "javascript", "ecmascript")):
        return False
    return b"\x00" in body[:1024]


def decode(body: bytes, charset: str | None, content_type: str) -> str:
    """The body as text: the header's charset, else an HTML ``<meta charset>``, else UTF-8;
    undecodable bytes become U+FFFD."""
    candidates = [charset]
    if charset is None and ("html" in _media_type(content_type) or not content_type):
        found = _META_CHARSET.search(body[:4096])
        candidates.append(found.group(1).decode("ascii") if found else None)
    for name in candidates:
        if not name:
            continue
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        return body.decode(name, errors="replace")
    return body.decode("utf-8", errors="replace")


def is_html(text: str, content_type: str) -> bool:
    """Whether the page is HTML, as the community server decides: ``<html`` near the start,
    an HTML content type, or no content type at all."""
    return "<html" in text[:100].lower() or "text/html" in content_type.lower() or not content_type


def raw_prefix(content_type: str) -> str:
    """The line before content returned as is (the community server's words)."""
    return f"Content type {content_type} cannot be simplified to markdown, but here is the raw content:\n"


def html_to_markdown(html: str, base_url: str | None = None) -> str:
    """Markdown for the readable part of an HTML page.

    Scripts, styles, navigation and other non-text elements are dropped; the ``<main>``
    element is kept when the page has one, else the body. Links and images are made
    absolute against ``base_url`` so the model can fetch them; inline ``data:`` images
    are dropped (they are megabytes of base64, not text).
    """
    from urllib.parse import urljoin

    import markdownify
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all([*_NOISE, "nav", "aside"]):
        tag.decompose()
    root: Any = soup.find("main") or soup.find("body") or soup
    for tag in root.find_all(["a", "img"]):
        attribute = "href" if tag.name == "a" else "src"
        value = tag.get(attribute)
        if not isinstance(value, str):
            continue
        if value.strip().lower().startswith(("data:", "javascript:")):
            if tag.name == "img":
                tag.decompose()
            else:
                del tag[attribute]
        elif base_url:
            tag[attribute] = urljoin(base_url, value.strip())
    converter = markdownify.MarkdownConverter(heading_style=markdownify.ATX)
    text = str(converter.convert_soup(root))
    text = _BLANK_LINES.sub("\n\n", text).strip()
    return text or SIMPLIFY_FAILED


def paginate(content: str, start_index: int, max_length: int) -> str:
    """One window of ``content``; when more follows, the note telling the model where to resume
    (the same words as the community server, so prompts written for it keep working)."""
    if start_index >= len(content):
        return NO_MORE_CONTENT
    window = content[start_index : start_index + max_length]
    end = start_index + len(window)
    if len(window) == max_length and end < len(content):
        window += (
            f"\n\n<error>Content truncated. Call the fetch tool with a start_index of {end} "
            "to get more content.</error>"
        )
    return window

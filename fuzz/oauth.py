"""OAuth as a client reads it from a server: ``WWW-Authenticate`` and the metadata documents.

Everything here comes from the (possibly hostile) server. Invariants:

* :func:`parse_www_authenticate` and :func:`bearer_challenge` never raise, and take linear time;
* a challenge written by mcpkit's server side (:func:`mcpkit.auth.server.challenge.bearer_challenge`)
  holds no CR, LF or other control character whatever its inputs, and reads back to the same
  ``resource_metadata``, ``error`` and ``scope`` for header-safe values; any other
  ``resource_metadata`` reads back with its control and non-ASCII characters percent-encoded
  (never dropped: that would name another URL);
* the PRM URLs the client would fetch hold no character a URI cannot (a ``resource_metadata``
  that has one is ignored, not silently altered by ``urljoin``);
* the metadata parsers return a document or raise :class:`DiscoveryError` only;
* the discovery URLs built from a server's ``resource_metadata``, and from an issuer the URL
  policy let through, are a list; resource matching answers True or False.

Input layout: fields = a header value, a JSON document, a URL from the server, a text.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from hypothesis import strategies as st

from mcpkit.auth.client.challenge import bearer_challenge, parse_www_authenticate
from mcpkit.auth.client.discovery import (
    authorization_server_metadata_urls,
    protected_resource_metadata_urls,
    resource_matches,
)
from mcpkit.auth.client.errors import DiscoveryError, UnsafeURLError
from mcpkit.auth.client.metadata import parse_auth_server_metadata, parse_protected_resource_metadata
from mcpkit.auth.client.urlpolicy import UrlPolicy
from mcpkit.auth.server.challenge import bearer_challenge as write_challenge

from ._harness import Finding, Target, corpus_of, fields, joined, json_values, timed

SERVER_URL = "https://mcp.example.com/mcp"
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")
# Used with fullmatch: "$" also matches before a final newline, which let "ou\n" pass as
# header-safe and expect it back verbatim (the finding regress-newline-url).
_SAFE = re.compile(r"[\x20-\x7e]*")
_NOT_URI = re.compile(r'[^\x21-\x7e]|["<>\\^`{|}]')
_POLICY = UrlPolicy(allow_loopback=True, allow_private=True, allow_insecure_http=True, resolve=False)


def _check_header(value: str) -> None:
    parse_www_authenticate([value])
    bearer_challenge([value, value])


def _percent_encoded(url: str) -> str:
    """``url`` as the writer must put it in a header: non-printable-ASCII characters as UTF-8 %XX."""
    return "".join(
        ch
        if " " <= ch <= "~"
        else "".join(f"%{b:02X}" for b in ("\ufffd" if "\ud800" <= ch <= "\udfff" else ch).encode())
        for ch in url
    )


def _check_round_trip(url: str, text: str) -> None:
    scopes = [s for s in text.split(" ") if s]
    header = write_challenge(resource_metadata=url, scope=scopes, error=text, description=text, realm=text)
    if _CONTROLS.search(header) or not header.isascii():
        raise Finding(f"a written challenge holds a control or non-ASCII character: {header!r}")
    read = bearer_challenge([header])
    if read is None:
        raise Finding(f"a written challenge does not read back: {header!r}")
    if read.resource_metadata != _percent_encoded(url):
        raise Finding(f"resource_metadata {url!r} read back as {read.resource_metadata!r}")
    if _SAFE.fullmatch(text) and read.error != text:
        raise Finding(f"error {text!r} read back as {read.error!r}")
    if _SAFE.fullmatch(text) and sorted(set(read.scope or [])) != sorted(set(scopes)):
        raise Finding(f"scope {scopes!r} read back as {read.scope!r}")


def _check_metadata(doc: Any, url: str) -> None:
    try:
        parse_protected_resource_metadata(doc)
    except DiscoveryError:
        pass
    try:
        parse_auth_server_metadata(doc, url)
    except DiscoveryError:
        pass


def _check_urls(url: str) -> None:
    try:
        candidates = protected_resource_metadata_urls(SERVER_URL, url)
    except DiscoveryError:
        candidates = []
    for candidate in candidates:
        if _NOT_URI.search(candidate):
            raise Finding(f"resource_metadata {url!r} made the client fetch {candidate!r}")
    if resource_matches(url, SERVER_URL) not in (True, False):
        raise Finding("resource_matches answered neither True nor False")


def one_input(data: bytes) -> None:
    header, document, url, text = fields(data, 4)
    _check_header(header)
    _check_round_trip(url, text)
    try:
        doc = json.loads(document)
    except (ValueError, RecursionError):
        doc = document
    _check_metadata(doc, url)
    _check_urls(url)
    try:
        _POLICY.check(url, purpose="authorization server")
    except UnsafeURLError:
        return
    # What the client does with an issuer the policy let through (auth/client/_base.py).
    urlsplit(url)
    authorization_server_metadata_urls(url)


_headers = st.lists(
    st.sampled_from(
        ['Bearer', ' ', ',', 'realm="x"', 'error="invalid_token"', 'scope="a b"', 'resource_metadata=',
         '"https://a/.well-known/oauth-protected-resource"', '\\"', '"', '=', 'Basic', 'abc==', 'Bearer ,,']
    ),
    max_size=10,
).map("".join)  # fmt: skip
_urls = st.one_of(
    st.sampled_from(
        ["https://mcp.example.com/mcp", "https://mcp.example.com", "http://[", "https://[::1]:99/x",
         "https://MCP.example.com:443/mcp/", "/relative", "https://a#frag", "https://a?q=1", "http://a:99999"]
    ),
    st.text(max_size=30),
)  # fmt: skip
_documents = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "resource": st.one_of(_urls, json_values),
            "authorization_servers": st.one_of(st.lists(_urls, max_size=2), json_values),
            "issuer": st.one_of(_urls, json_values),
            "authorization_endpoint": st.one_of(_urls, json_values),
            "token_endpoint": st.one_of(_urls, json_values),
            "code_challenge_methods_supported": st.one_of(st.just(["S256"]), json_values),
            "scopes_supported": json_values,
        },
    ),
    json_values,
).map(json.dumps)
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(joined, _headers, _documents, _urls, st.text(max_size=20)),
    st.builds(joined, st.text(max_size=40), st.text(max_size=40), st.text(max_size=20), st.text(max_size=20)),
    st.sampled_from(corpus_of("oauth") or [b"Bearer"]),
)

TARGET = Target(
    "oauth",
    timed(one_input),
    strategy,
    ("mcpkit.auth.client.challenge", "mcpkit.auth.client.metadata", "mcpkit.auth.client.discovery"),
)

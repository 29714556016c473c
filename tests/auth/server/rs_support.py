"""Helpers for the resource-server tests: signing keys, token minting, a tiny
authorization server (JWKS, metadata, introspection) run for real by uvicorn,
and raw MCP requests over httpx.

Own module name (not conftest.py) so tests can import it; unique across the
test tree because test directories are not packages.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from mcpkit.testing._uvicorn import bound_port, start_server, stop_server

ISSUER = "https://as.example.test"
RESOURCE = "https://mcp.example.test/mcp"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


# -- keys and tokens ---------------------------------------------------------------------


@dataclass
class Signer:
    """A private key that mints JWT access tokens, and its public JWK."""

    private: Any
    alg: str
    kid: str | None

    @classmethod
    def rsa(cls, kid: str | None = "rsa-1", alg: str = "RS256") -> Signer:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048), alg, kid)

    @classmethod
    def ec(cls, kid: str | None = "ec-1") -> Signer:
        return cls(ec.generate_private_key(ec.SECP256R1()), "ES256", kid)

    @classmethod
    def ed25519(cls, kid: str | None = "ed-1") -> Signer:
        return cls(ed25519.Ed25519PrivateKey.generate(), "EdDSA", kid)

    @property
    def public(self) -> Any:
        return self.private.public_key()

    @property
    def public_pem(self) -> bytes:
        pem: bytes = self.public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return pem

    def jwk(self, *, with_alg: bool = True, **extra: Any) -> dict[str, Any]:
        key = _to_jwk(self.public)
        if self.kid is not None:
            key["kid"] = self.kid
        if with_alg:
            key["alg"] = self.alg
        key["use"] = "sig"
        return key | extra

    def mint(self, headers: dict[str, Any] | None = None, **claims: Any) -> str:
        return jwt.encode(
            claims_for(**claims),
            self.private,
            algorithm=self.alg,
            headers={**({"kid": self.kid} if self.kid else {}), **(headers or {})},
        )


def _to_jwk(public: Any) -> dict[str, Any]:
    if isinstance(public, rsa.RSAPublicKey):
        return json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(public))  # type: ignore[no-any-return]
    if isinstance(public, ec.EllipticCurvePublicKey):
        return json.loads(jwt.algorithms.ECAlgorithm.to_jwk(public))  # type: ignore[no-any-return]
    return json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(public))  # type: ignore[no-any-return]


_DROP = object()


def claims_for(**claims: Any) -> dict[str, Any]:
    """Valid access-token claims for RESOURCE, overridden by ``claims`` (``_DROP`` removes one)."""
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "alice",
        "client_id": "client-a",
        "scope": "mcp:read",
        "iat": now,
        "exp": now + 300,
    }
    base.update(claims)
    return {key: value for key, value in base.items() if value is not _DROP}


def drop() -> Any:
    return _DROP


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned_token(**claims: Any) -> str:
    """``alg: none`` (RFC 7519 section 6): no signature at all."""
    header = b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{b64url(json.dumps(claims_for(**claims)).encode())}."


def hmac_token(secret: bytes, alg: str = "HS256", kid: str | None = None, **claims: Any) -> str:
    """An HS* token MACed with arbitrary bytes (e.g. a public key's PEM: algorithm confusion)."""
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signing_input = (
        f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims_for(**claims)).encode())}"
    )
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}[alg]
    return f"{signing_input}.{b64url(hmac.new(secret, signing_input.encode(), digest).digest())}"


def tamper(token: str) -> str:
    """The same header and signature over a payload with more scopes."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["scope"] = "mcp:read mcp:write mcp:admin"
    return f"{header}.{b64url(json.dumps(claims).encode())}.{signature}"


# -- a small authorization server -----------------------------------------------------------


@dataclass
class FakeAS:
    """An ASGI authorization server: JWKS, RFC 8414 metadata, RFC 7662 introspection."""

    issuer: str = ISSUER
    jwks: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    #: token -> introspection answer
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    client: tuple[str, str] = ("rs", "rs-secret")
    hits: dict[str, int] = field(default_factory=dict)
    forms: list[dict[str, str]] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)
    fail: bool = False
    delay: float = 0.0
    base_url: str = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        self.hits[path] = self.hits.get(path, 0) + 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            await _reply(send, 503, {"error": "down"})
        elif path == "/jwks.json":
            await _reply(send, 200, self.jwks)
        elif path == "/.well-known/oauth-authorization-server":
            await _reply(send, 200, {"issuer": self.issuer, "jwks_uri": f"{self.base_url}/jwks.json"})
        elif path == "/introspect":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            form = dict(parse_qsl(body.decode()))
            self.forms.append(form)
            self.auth_headers.append(headers.get("authorization"))
            await _reply(send, 200, self.tokens.get(form.get("token", ""), {"active": False}))
        else:
            await _reply(send, 404, {"error": "not found"})


async def _reply(send: Any, status: int, document: Any) -> None:
    data = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})


@contextlib.asynccontextmanager
async def serve_asgi(app: Callable[..., Awaitable[None]]) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on a free loopback port; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
    server, task = await start_server(config)
    try:
        yield f"http://127.0.0.1:{bound_port(server)}"
    finally:
        await stop_server(server, task)


# -- raw MCP requests -------------------------------------------------------------------------


def modern_call(
    tool: str, arguments: dict[str, Any] | None = None, **params: Any
) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a modern (2026-07-28) tools/call that can answer elicitations."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "rs-tests", "version": "0"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments or {}, "_meta": meta, **params},
    }
    headers = {
        "accept": "application/json",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return headers, body


def legacy_headers(session_id: str | None = None) -> dict[str, str]:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if session_id is not None:
        headers["mcp-session-id"] = session_id
        headers["mcp-protocol-version"] = LEGACY
    return headers


def initialize() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "rs", "version": "0"},
        },
    }


def legacy_call(request_id: int, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments or {}},
    }


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def result_text(document: dict[str, Any]) -> str:
    assert "result" in document, document
    text: str = document["result"]["content"][0]["text"]
    return text


def challenge_params(header: str) -> dict[str, str]:
    """The parameters of a ``Bearer`` challenge (quoted-strings unescaped)."""
    assert header.startswith("Bearer"), header
    params: dict[str, str] = {}
    rest = header[len("Bearer") :].strip()
    while rest:
        name, _, rest = rest.partition("=")
        assert rest.startswith('"'), header
        value, i = [], 1
        while rest[i] != '"':
            if rest[i] == "\\":
                i += 1
            value.append(rest[i])
            i += 1
        params[name.strip()] = "".join(value)
        rest = rest[i + 1 :].lstrip().removeprefix(",").lstrip()
    return params

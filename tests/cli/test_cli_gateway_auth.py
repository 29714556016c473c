"""``mcpkit gateway --transport http --auth-...``: the gateway as an OAuth protected resource,
run as its own process, checking JWTs against a key set served here; a caller the config
gives credentials gets its own backend session, others share the gateway's."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cli_helpers import MCPKIT, Run, base_env, free_port, wait_for_port
from cryptography.hazmat.primitives.asymmetric import rsa

from mcpkit import Client
from mcpkit.protocol import types as t

pytestmark = pytest.mark.timeout(90)

ECHO = textwrap.dedent(
    """
    import os

    from mcpkit import MCPServer

    server = MCPServer("echo")


    @server.tool()
    def whoami() -> str:
        return f"{os.environ.get('BACKEND_TOKEN', 'none')} {os.getpid()}"


    if __name__ == "__main__":
        server.run()
    """
)


class KeySet:
    """An RSA key that signs access tokens, its JWKS served on loopback (the issuer's)."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        document = json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = self.path == "/jwks.json"
                self.send_response(200 if found else 404)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(document if found else b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.jwks_url = f"{self.issuer}/jwks.json"

    def token(self, subject: str, audience: str, scope: str = "mcp") -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": audience,
            "scope": scope,
            "iat": now,
            "exp": now + 300,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})


@pytest.fixture
def keys() -> Iterator[KeySet]:
    keyset = KeySet()
    thread = threading.Thread(target=keyset.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield keyset
    finally:
        keyset.http.shutdown()
        keyset.http.server_close()
        thread.join(timeout=10)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    script = tmp_path / "echo_backend.py"
    script.write_text(ECHO)
    echo = {
        "command": sys.executable,
        "args": [str(script)],
        "env": {"BACKEND_TOKEN": "gateway-own"},
        "credentials": {"alice": {"BACKEND_TOKEN": "${ALICE_BACKEND_TOKEN}"}},
    }
    path = tmp_path / "team.json"
    path.write_text(json.dumps({"mcpServers": {"echo": echo}}))
    return path


class Started:
    """A gateway process; ``err``: what it wrote on stderr, once it has stopped."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.err = ""


@contextlib.contextmanager
def gateway(config: Path, port: int, *options: str) -> Iterator[Started]:
    command = [*MCPKIT, "gateway", str(config), "--transport", "http", "--port", str(port), *options]
    proc = subprocess.Popen(
        command,
        env=base_env({"ALICE_BACKEND_TOKEN": "alice-backend"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = Started(proc)
    try:
        wait_for_port(port, proc)
        yield started
    finally:
        proc.terminate()
        started.err = proc.communicate(timeout=15)[1]


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


async def test_an_oauth_protected_gateway(config: Path, keys: KeySet) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    options = ["--auth-issuer", keys.issuer, "--auth-jwks-url", keys.jwks_url, "--auth-scope", "mcp"]
    with gateway(config, port, *options, "--resource-url", url):
        async with httpx.AsyncClient() as http:
            # No token: 401, and the challenge points at the protected-resource metadata.
            answer = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert answer.status_code == 401
            challenge = answer.headers["www-authenticate"]
            metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
            assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge
            metadata = (await http.get(metadata_url)).json()
            assert metadata["resource"] == url
            assert metadata["authorization_servers"] == [keys.issuer]
            assert metadata["scopes_supported"] == ["mcp"]
            # A token for another resource, or without the scope, is refused.
            for bad in (
                keys.token("alice", "https://elsewhere.example/mcp"),
                keys.token("alice", url, "other"),
            ):
                refused = await http.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={"Authorization": f"Bearer {bad}"},
                )
                assert refused.status_code in (401, 403), refused.text

        def caller(subject: str, protocol: str) -> Client:
            return Client(
                url, headers={"Authorization": f"Bearer {keys.token(subject, url)}"}, protocol=protocol
            )

        async with caller("alice", "2026-07-28") as alice, caller("bob", "2025-11-25") as bob:
            assert "mcp__echo__whoami" in {tool.name for tool in await alice.list_tools()}
            assert "mcp__echo__whoami" in {tool.name for tool in await bob.list_tools()}
            first = text(await alice.call_tool("mcp__echo__whoami"))
            again = text(await alice.call_tool("mcp__echo__whoami"))
            shared = text(await bob.call_tool("mcp__echo__whoami"))
        # Alice's credentials entry: a backend process of her own, reused; bob has none: the
        # gateway's own connection, another process.
        assert first.split()[0] == "alice-backend" and again == first
        assert shared.split()[0] == "gateway-own" and shared.split()[1] != first.split()[1]


def test_the_start_up_line_names_the_checks(config: Path, keys: KeySet) -> None:
    port = free_port()
    with gateway(config, port, "--auth-issuer", keys.issuer) as started:
        # Without --resource-url on loopback: the audience is the URL the caller reached.
        answer = httpx.post(
            f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        assert answer.status_code == 401
    assert f"OAuth protected: JWTs of {keys.issuer}" in started.err


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--auth-issuer", "https://as.example.com"], {}, "add --transport http"),
        (["--transport", "http", "--resource-url", "https://gw.example.com/mcp"], {}, "needs --auth-issuer"),
        (
            [
                "--transport",
                "http",
                "--auth-introspection-url",
                "https://as.example.com/introspect",
                "--auth-jwks-url",
                "https://as.example.com/jwks",
            ],
            {},
            "not both",
        ),
        (
            [
                "--transport",
                "http",
                "--auth-introspection-url",
                "https://as.example.com/introspect",
                "--auth-server",
                "https://as.example.com",
                "--auth-client-id",
                "gw",
                "--auth-client-secret-env",
                "GW_SECRET",
            ],
            {"GW_SECRET": ""},
            "$GW_SECRET is not set (or empty)",
        ),
        (
            ["--transport", "http", "--auth-introspection-url", "https://as.example.com/introspect"],
            {},
            "--auth-server",
        ),
        (
            ["--transport", "http", "--host", "0.0.0.0", "--auth-issuer", "https://as.example.com"],
            {},
            "needs --resource-url",
        ),
        (["--transport", "http", "--auth-issuer", "http://as.example.com"], {}, "https"),
    ],
)
def test_auth_usage_errors(
    mcpkit: Run, config: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    r = mcpkit("gateway", str(config), *args, env=env)
    assert r.code == 2 and message in r.stderr, r

"""The public API, pinned: an accidental removal or addition of a public name fails here.

Changing the API on purpose means changing this list in the same commit.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import mcpkit

PUBLIC: dict[str, list[str]] = {
    "mcpkit": [
        "AssistantMessage",
        "Audio",
        "Client",
        "ClientSession",
        "Context",
        "Elicit",
        "FastMCP",
        "File",
        "Image",
        "ListRoots",
        "MCPError",
        "MCPServer",
        "ProtocolVersion",
        "Sample",
        "StdioServerParameters",
        "UserMessage",
        "__version__",
        "stdio_client",
    ],
    "mcpkit.auth": [
        "BearerAuthenticator",
        "BrowserAuthorizationHandler",
        "ClientCredentialsAuth",
        "FileTokenStore",
        "HeadlessAuthorizationHandler",
        "InMemoryTokenStore",
        "IntrospectionVerifier",
        "JWTVerifier",
        "OAuthClientAuth",
        "OAuthError",
        "StaticTokenVerifier",
        "TokenVerificationError",
        "TokenVerifier",
        "VerifierUnavailableError",
        "bearer_auth",
        "jwt_auth",
    ],
    "mcpkit.auth.client": [
        "AuthServerMetadata",
        "AuthorizationError",
        "AuthorizationHandler",
        "BrowserAuthorizationHandler",
        "ClientCredentialsAuth",
        "ClientRegistration",
        "DiscoveryError",
        "FileTokenStore",
        "HeadlessAuthorizationHandler",
        "InMemoryTokenStore",
        "OAuthClientAuth",
        "OAuthError",
        "OAuthOptions",
        "ProtectedResourceMetadata",
        "RegistrationError",
        "TokenError",
        "TokenSet",
        "TokenStore",
        "UnsafeURLError",
        "UrlPolicy",
    ],
    "mcpkit.auth.server": [
        "BearerAuthenticator",
        "IntrospectionVerifier",
        "JWKSCache",
        "JWTVerifier",
        "StaticTokenVerifier",
        "TokenVerificationError",
        "TokenVerifier",
        "VerifierUnavailableError",
        "bearer_auth",
        "bearer_challenge",
        "jwt_auth",
        "metadata_url",
        "parse_bearer",
    ],
    "mcpkit.client": [
        "Client",
        "ClientHandlers",
        "ClientOptions",
        "ClientSession",
        "InProcessServer",
        "Skill",
        "SkillVerificationError",
        "StdioServerParameters",
        "TaskHandle",
        "stdio_client",
    ],
    "mcpkit.host": [
        "ApprovalRequest",
        "AuditLog",
        "Backend",
        "ConfigError",
        "Gateway",
        "Host",
        "HostEvent",
        "HostPrompt",
        "HostResource",
        "HostTemplate",
        "HostTool",
        "PermissionDenied",
        "PinChange",
        "PinStore",
        "Policy",
        "RestartPolicy",
        "ServerSpec",
        "ServerStatus",
        "ServerUnavailable",
        "State",
        "UnknownName",
        "Verdict",
        "audit_servers",
        "build_gateway",
        "detect_format",
        "load_config",
        "parse_config",
        "sanitize",
    ],
    "mcpkit.inspector": ["Inspector", "InspectorApp", "main", "run_inspector"],
    "mcpkit.middleware": [
        "AccessLog",
        "CallNext",
        "ComponentKind",
        "ConcurrencyLimit",
        "ErrorMasking",
        "Limiter",
        "Middleware",
        "NotifyNext",
        "Rate",
        "RateLimit",
        "RateLimitExceeded",
        "ResponseCache",
        "ResponseSizeLimit",
        "Timeout",
        "Visibility",
    ],
    "mcpkit.proxy": ["Credentials", "Pool", "ProxyServer", "Session", "proxy"],
    "mcpkit.server": [
        "AssistantMessage",
        "Audio",
        "Context",
        "Elicit",
        "File",
        "Image",
        "InputRequest",
        "ListRoots",
        "MCPServer",
        "Sample",
        "UserMessage",
    ],
    "mcpkit.server.openapi": [
        "DEFAULT_MAX_RESPONSE_BYTES",
        "HeadersFor",
        "OpenAPIError",
        "RouteMap",
        "from_asgi",
        "from_openapi",
    ],
    "mcpkit.servers": ["SERVERS"],
    "mcpkit.servers.fetch": [
        "AddressPolicy",
        "FetchError",
        "FetchRefused",
        "FetchSettings",
        "Fetcher",
        "build_parser",
        "build_server",
        "check_url",
        "main",
        "parse_ipv4_number",
        "settings_from_args",
    ],
    "mcpkit.servers.filesystem": ["READ_TOOLS", "WRITE_TOOLS", "build_parser", "build_server", "main"],
    "mcpkit.servers.skills": ["build_parser", "build_server", "main"],
    "mcpkit.servers.openapi": ["build_parser", "build_server", "main"],
    "mcpkit.servers.sql": [
        "Backend",
        "Checked",
        "Limits",
        "Refused",
        "build_parser",
        "build_server",
        "check_read_only",
        "check_write",
        "main",
        "open_backend",
    ],
    "mcpkit.telemetry": ["configure", "disable", "enabled", "extract", "inject", "refresh"],
    "mcpkit.testing": ["MemoryChannel", "connect", "memory_channel_pair", "serve_http"],
    "mcpkit.testing.soak": ["SoakConfig", "SoakReport", "run_soak"],
    "mcpkit.transports.http": ["HTTPSettings", "StreamableHTTPApp"],
}


def _packages() -> list[str]:
    subpackages = pkgutil.walk_packages(mcpkit.__path__, "mcpkit.")
    return ["mcpkit", *(info.name for info in subpackages if info.ispkg)]


def test_exactly_these_packages_declare_a_public_api() -> None:
    declaring = sorted(name for name in _packages() if hasattr(importlib.import_module(name), "__all__"))
    assert declaring == sorted(PUBLIC)


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_all_is_pinned_and_sorted(package: str) -> None:
    exported = importlib.import_module(package).__all__
    assert list(exported) == PUBLIC[package], "the public API changed: update PUBLIC on purpose"
    assert list(exported) == sorted(exported)
    assert len(set(exported)) == len(exported)


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_every_public_name_imports(package: str) -> None:
    module = importlib.import_module(package)
    for name in PUBLIC[package]:
        assert getattr(module, name) is not None, f"{package}.{name}"
        namespace: dict[str, object] = {}
        exec(f"from {package} import {name}", namespace)
        assert namespace[name] is getattr(module, name)


def test_fastmcp_is_mcpserver() -> None:
    assert mcpkit.FastMCP is mcpkit.MCPServer

"""``mcpkit gateway --transport http --auth-...``: the gateway served as an OAuth protected
resource, so it knows who each caller is (the token's principal: audit lines, and each
caller's own backend session where a server's config has ``credentials`` for them).

Two ways to check a token, both :mod:`mcpkit.auth.server`'s: JWT access tokens checked here
against the issuer's keys (``--auth-issuer``, ``--auth-jwks-url``), or opaque tokens asked of
the authorization server (``--auth-introspection-url``, RFC 7662). No secret is taken on the
command line, where other users of the machine can read it (``ps``) and shells keep it: the
introspection client secret is read from the environment variable ``--auth-client-secret-env``
names. The options are refused with stdio, which has no HTTP to carry a token.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._output import EXIT_USAGE, CLIError

__all__ = ["add_auth_options", "gateway_auth"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")

#: The options of the group, by ``args`` attribute (each one means "authorization wanted").
_OPTIONS = (
    "auth_issuer",
    "auth_jwks_url",
    "auth_audience",
    "auth_introspection_url",
    "auth_client_id",
    "auth_client_secret_env",
    "auth_scope",
    "auth_server",
    "resource_url",
)


def add_auth_options(parser: argparse.ArgumentParser) -> None:
    """The ``--auth-*`` options and ``--resource-url`` of ``mcpkit gateway``."""
    group = parser.add_argument_group(
        "authorization (with --transport http)",
        "Serve the gateway as an OAuth protected resource: every request needs a bearer token, "
        "401 without one, with the protected-resource metadata at "
        "/.well-known/oauth-protected-resource/mcp. Give --auth-issuer (JWT access tokens) or "
        "--auth-introspection-url (opaque tokens). A caller's subject names it in the audit log "
        "and picks its entry of a server's 'credentials' in the config.",
    )
    group.add_argument(
        "--auth-issuer",
        action="append",
        default=[],
        metavar="URL",
        help="issuer of the JWT access tokens accepted (repeatable)",
    )
    group.add_argument(
        "--auth-jwks-url",
        metavar="URL",
        help="the issuer's key set (default: the jwks_uri of its metadata)",
    )
    group.add_argument(
        "--auth-audience",
        action="append",
        default=[],
        metavar="AUD",
        help="audience a token must name (repeatable; default: the resource URL)",
    )
    group.add_argument(
        "--auth-introspection-url",
        metavar="URL",
        help="RFC 7662 endpoint asked about each token (opaque tokens), in place of JWT checks",
    )
    group.add_argument(
        "--auth-client-id", metavar="ID", help="the gateway's client id at the introspection endpoint"
    )
    group.add_argument(
        "--auth-client-secret-env",
        metavar="VAR",
        help="environment variable holding that client's secret (never given on the command line)",
    )
    group.add_argument(
        "--auth-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="scope every request needs (repeatable)",
    )
    group.add_argument(
        "--auth-server",
        action="append",
        default=[],
        metavar="URL",
        help="authorization server named in the metadata (repeatable; default: the issuers)",
    )
    group.add_argument(
        "--resource-url",
        metavar="URL",
        help="the endpoint's public URL, e.g. https://gw.example.com/mcp: the metadata's resource "
        "and the default audience (required when --host is not a loopback address)",
    )


def gateway_auth(args: argparse.Namespace) -> tuple[Any, str]:
    """The authenticator the gateway is served with (None: no ``--auth-*`` option), and how
    it checks tokens (for the start-up line)."""
    if not any(getattr(args, name) for name in _OPTIONS):
        return None, ""
    if args.transport != "http":
        raise CLIError(
            "--auth-* options and --resource-url protect the gateway's HTTP endpoint: "
            "add --transport http (over stdio there is no token to check)",
            EXIT_USAGE,
        )
    issuers: list[str] = list(args.auth_issuer)
    introspection: str | None = args.auth_introspection_url
    if not issuers and introspection is None:
        raise CLIError(
            "authorization needs --auth-issuer (JWT access tokens) or --auth-introspection-url "
            "(opaque tokens)",
            EXIT_USAGE,
        )
    if introspection is not None and args.auth_jwks_url:
        raise CLIError("give --auth-jwks-url (JWTs) or --auth-introspection-url, not both", EXIT_USAGE)
    if introspection is None and (args.auth_client_id or args.auth_client_secret_env):
        raise CLIError(
            "--auth-client-id and --auth-client-secret-env are for --auth-introspection-url",
            EXIT_USAGE,
        )
    if args.resource_url is None and args.host not in _LOOPBACK:
        # The audience would otherwise come from each request's Host header.
        raise CLIError(
            f"--host {args.host} with authorization needs --resource-url (the endpoint's public URL, "
            "which tokens must be issued for)",
            EXIT_USAGE,
        )
    servers = list(args.auth_server) or issuers
    audience = list(args.auth_audience) or None
    try:
        if introspection is None:
            from ..auth.server import jwt_auth

            auth = jwt_auth(
                issuers,
                args.auth_jwks_url,
                audience=audience,
                authorization_servers=servers,
                required_scopes=args.auth_scope,
            )
            return auth, f"JWTs of {', '.join(issuers)}"
        if not servers:
            raise CLIError(
                "name the authorization server clients get tokens from: --auth-server URL (or --auth-issuer)",
                EXIT_USAGE,
            )
        from ..auth.server import BearerAuthenticator, IntrospectionVerifier

        verifier = IntrospectionVerifier(
            introspection,
            client_id=args.auth_client_id,
            client_secret=_secret(args.auth_client_secret_env),
            auth_method="client_secret_basic" if args.auth_client_id else "none",
            issuer=issuers or None,
            audience=audience,
        )
        auth = BearerAuthenticator(verifier, authorization_servers=servers, required_scopes=args.auth_scope)
        return auth, f"tokens introspected at {introspection}"
    except ImportError as exc:
        raise CLIError(
            f"authorization needs the http extra ({exc})", EXIT_USAGE, hint="pip install 'mcpkit[http]'"
        ) from None
    except ValueError as exc:
        raise CLIError(f"authorization: {exc}", EXIT_USAGE) from None


def _secret(variable: str | None) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        # (the variable's name only: never a value)
        raise CLIError(f"--auth-client-secret-env: ${variable} is not set (or empty)", EXIT_USAGE)
    return value

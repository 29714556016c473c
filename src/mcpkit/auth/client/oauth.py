"""``OAuthClientAuth``: the OAuth 2.1 authorization-code client for MCP over HTTP.

Plug it into any ``httpx.AsyncClient`` talking to an MCP server::

    auth = OAuthClientAuth("https://mcp.example.com/mcp", client_metadata_url="https://app.example/client.json")
    async with httpx.AsyncClient(auth=auth) as http:
        ...  # every request to the server authorises itself on 401 / 403

Client identity, in the order MCP "Client Registration" prescribes: pre-registered
credentials (constructor), a Client ID Metadata Document URL when the AS says
``client_id_metadata_document_supported``, else Dynamic Client Registration
(RFC 7591; deprecated but ubiquitous). Registrations are kept per issuer and
never presented to another authorization server; pre-registered credentials
are bound to the first issuer they are used with (or ``client_issuer``) and a
different issuer is an error, as MCP "Authorization Server Binding" advises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack
from urllib.parse import urlsplit

import httpx

from ._base import Binding, OAuthBase
from ._http import Fetch, Step, build_request, response_json
from .authcode import AuthorizationRequest, authorization_url, validate_authorization_response
from .errors import RegistrationError
from .handlers import AuthorizationHandler, HeadlessAuthorizationHandler
from .metadata import require_pkce_s256
from .options import OAuthOptions, OAuthSettings
from .pkce import PKCE, make_state
from .registration import (
    SECRET_METHODS,
    apply_client_auth,
    choose_auth_method,
    registration_from_response,
    registration_request,
)
from .scopes import format_scope, with_offline_access
from .tokens import ClientRegistration, TokenSet, oauth_error

__all__ = ["OAuthClientAuth"]


class OAuthClientAuth(OAuthBase):
    """OAuth 2.1 authorization code + PKCE for MCP, as an ``httpx.Auth``.

    ``server_url`` is the MCP endpoint (default: the URL of the first request);
    tokens are only attached to requests for its origin.

    URL safety (:mod:`.urlpolicy`) applies to every URL a server hands us. The MCP
    server's own origin is trusted (the user chose it). Elsewhere: https only, except
    plain http to loopback; loopback hosts only when ``allow_loopback`` — which
    defaults to True exactly when the MCP server URL is itself loopback (local
    development: server and AS on 127.0.0.1), False otherwise; private, link-local,
    metadata and other non-public addresses only with ``allow_private``; plain http
    to non-loopback hosts only with ``allow_insecure_http``. Hostnames are resolved
    (``loop.getaddrinfo``) and every address checked, unless ``resolve_hostnames``
    is False.

    ``handler`` drives the browser leg (default :class:`HeadlessAuthorizationHandler`).
    ``client_id``/``client_secret`` are pre-registered credentials (bound to
    ``client_issuer``, or to the first issuer used); ``client_metadata_url`` is the
    Client ID Metadata Document URL; otherwise dynamic registration with
    ``client_name`` plus ``client_metadata`` fields. ``scopes`` overrides the initial
    scope selection (challenge ``scope``, else PRM ``scopes_supported``, else none);
    ``offline_access`` adds that scope when the AS lists it. At most
    ``max_authorization_attempts`` authorizations run per request; tokens are
    refreshed ``refresh_margin`` seconds before expiry (at most half their lifetime).
    These settings, shared with :class:`ClientCredentialsAuth`, are the fields of
    :class:`OAuthOptions`: give them as keywords or as ``options`` (keywords win).
    One instance serves one event loop.
    """

    def __init__(
        self,
        server_url: str | None = None,
        *,
        handler: AuthorizationHandler | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_issuer: str | None = None,
        token_endpoint_auth_method: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mcpkit",
        client_metadata: Mapping[str, Any] | None = None,
        offline_access: bool = True,
        options: OAuthOptions | None = None,
        **settings: Unpack[OAuthSettings],
    ) -> None:
        super().__init__(server_url, options=options, **settings)
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret needs client_id")
        if token_endpoint_auth_method not in (None, *SECRET_METHODS, "none"):
            raise ValueError(f"unsupported token_endpoint_auth_method {token_endpoint_auth_method!r}")
        if token_endpoint_auth_method in SECRET_METHODS and not client_secret:
            raise ValueError(f"{token_endpoint_auth_method} needs client_secret")
        if client_metadata_url is not None:
            parts = urlsplit(client_metadata_url)
            # CIMD §3 / MCP: an https URL with a path component.
            if parts.scheme != "https" or not parts.netloc or parts.path in ("", "/") or parts.fragment:
                raise ValueError("client_metadata_url must be an https URL with a path")
        self.handler: AuthorizationHandler = handler or HeadlessAuthorizationHandler()
        self.client_id = client_id
        self.client_secret = client_secret
        self.client_issuer = client_issuer
        self.token_endpoint_auth_method = token_endpoint_auth_method
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.client_metadata = dict(client_metadata or {})
        self.offline_access = offline_access
        self._clients: dict[str, ClientRegistration] = {}

    # -- client identity ------------------------------------------------------------

    def _client_identity(self, binding: Binding) -> Step[tuple[ClientRegistration, str]]:
        """The registration to use with ``binding.issuer`` and the redirect URI it covers."""
        issuer, metadata = binding.issuer, binding.metadata
        redirect_uri: str = yield self.handler.redirect_uri()
        if self.client_id is not None:
            if self.client_issuer is None:
                self.client_issuer = issuer  # bound on first use
            if self.client_issuer != issuer:
                raise RegistrationError(
                    f"pre-registered client {self.client_id!r} belongs to {self.client_issuer}, "
                    f"but the resource now names {issuer}; refusing to present it there"
                )
            method = self.token_endpoint_auth_method or choose_auth_method(
                metadata.token_endpoint_auth_methods_supported, self.client_secret is not None
            )
            client = ClientRegistration(
                issuer, self.client_id, self.client_secret, method, [redirect_uri], source="pre-registered"
            )
            return client, redirect_uri
        if self.client_metadata_url is not None and metadata.client_id_metadata_document_supported:
            # CIMD client ids are portable across authorization servers (MCP "Authorization Server Binding").
            client = ClientRegistration(
                issuer, self.client_metadata_url, None, "none", [redirect_uri], source="cimd"
            )
            return client, redirect_uri
        known = self._clients.get(issuer)
        if known is None:
            known = yield self.token_store.load_client(issuer)
        if known is not None and known.usable_for(issuer, redirect_uri):
            self._clients[issuer] = known
            return known, redirect_uri
        return (yield from self._register(binding, redirect_uri)), redirect_uri

    def _register(self, binding: Binding, redirect_uri: str) -> Step[ClientRegistration]:
        """RFC 7591 §3.1 dynamic registration at ``binding``'s authorization server."""
        endpoint = binding.metadata.registration_endpoint
        if endpoint is None:
            raise RegistrationError(
                f"no client identity for {binding.issuer}: no pre-registered credentials, no Client ID "
                "Metadata Document support, no registration_endpoint"
            )
        yield self.policy.check_resolved(endpoint, purpose="registration endpoint")
        body = registration_request(binding.metadata, redirect_uri, self.client_name, self.client_metadata)
        response: httpx.Response = yield Fetch(
            build_request("POST", endpoint, timeout=self.timeout, json_body=body)
        )
        doc = response_json(response)
        if response.status_code not in (200, 201):
            error, description = oauth_error(doc)
            raise RegistrationError(
                f"registration at {binding.issuer} refused (HTTP {response.status_code})"
                + (f": {error}" if error else "")
                + (f" ({description})" if description else "")
            )
        client = registration_from_response(doc, binding.issuer, redirect_uri, body)
        self._clients[binding.issuer] = client
        yield self.token_store.save_client(binding.issuer, client)
        return client

    # -- OAuthBase hooks ----------------------------------------------------------------

    def _obtain(self, binding: Binding, scopes: list[str] | None) -> Step[TokenSet]:
        """Authorization code grant with PKCE S256 (OAuth 2.1 §4.1), ``resource`` per RFC 8707."""
        metadata = binding.metadata
        require_pkce_s256(metadata)  # before registering anywhere
        assert metadata.authorization_endpoint is not None
        client, redirect_uri = yield from self._client_identity(binding)
        pkce = PKCE.generate()
        request = AuthorizationRequest(
            client_id=client.client_id,
            redirect_uri=redirect_uri,
            state=make_state(),  # fresh per attempt, compared once, then gone: single use
            code_challenge=pkce.challenge,
            resource=binding.resource,
            issuer=metadata.issuer,  # recorded before redirecting (RFC 9207 §2.4)
            iss_supported=metadata.authorization_response_iss_parameter_supported,
            scope=format_scope(with_offline_access(scopes, metadata.scopes_supported, self.offline_access)),
        )
        url = authorization_url(metadata.authorization_endpoint, request)
        yield self.policy.check_resolved(url, purpose="authorization endpoint")
        outgoing = self.handler.authorization_request(url)
        response = (yield Fetch(outgoing)) if outgoing is not None else None
        params: dict[str, str] = yield self.handler.authorization_response(url, response)
        code = validate_authorization_response(params, request)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": pkce.verifier,
            "resource": binding.resource,
        }
        return (yield from self._token_request(binding, form, scopes))

    def _authenticate_client(
        self, binding: Binding, form: dict[str, str], headers: dict[str, str]
    ) -> Step[None]:
        client, _ = yield from self._client_identity(binding)
        apply_client_auth(client, form, headers)

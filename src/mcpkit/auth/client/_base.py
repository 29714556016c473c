"""The ``httpx.Auth`` skeleton shared by the authorization-code and client-credentials clients.

Per MCP request (MCP 2026-07-28 "Authorization Flow Steps"):

1. attach the current access token — refreshed first when it is about to expire;
2. on **401** (RFC 6750 §3.1 ``invalid_token`` or no token): rediscover (the
   protected resource may have moved to another authorization server — MCP
   "Authorization Server Binding"), try a stored token for the new binding, then
   one refresh, then a full authorization;
3. on **403** ``insufficient_scope``: step up with the union of the previously
   requested scopes and the challenged ones (MCP "Step-Up Authorization Flow");
4. retry the request; at most ``max_authorization_attempts`` full
   authorizations per request, then :class:`AuthorizationError`; a scope set that
   exhausted them is not tried again (MCP security best practices: "cache denied
   elevations").

Tokens are only attached to requests for the MCP server's origin, and only
after discovery named the same resource and issuer they were issued for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass, replace
from typing import Literal, Unpack
from urllib.parse import urlsplit

import httpx

from ._http import Fetch, Step, build_request, drive, get_document, response_json
from .challenge import BearerChallenge, bearer_challenge
from .discovery import (
    authorization_server_metadata_urls,
    canonical_server_url,
    protected_resource_metadata_urls,
    resource_matches,
)
from .errors import AuthorizationError, DiscoveryError, TokenError
from .metadata import (
    AuthServerMetadata,
    ProtectedResourceMetadata,
    parse_auth_server_metadata,
    parse_protected_resource_metadata,
)
from .options import OAuthOptions, OAuthSettings
from .scopes import covers, format_scope, initial_scopes, union_scopes
from .store import InMemoryTokenStore, TokenStore
from .tokens import TokenSet, oauth_error, parse_token_response
from .urlpolicy import HostClass, UrlPolicy, classify_host, origin_of

__all__ = ["Binding", "OAuthBase"]

logger = logging.getLogger("mcpkit.auth.client")

Kind = Literal["unauthorized", "step-up"]


@dataclass(frozen=True)
class Binding:
    """What discovery established: the resource's metadata and its authorization server's."""

    resource_metadata: ProtectedResourceMetadata
    metadata: AuthServerMetadata

    @property
    def resource(self) -> str:
        return self.resource_metadata.resource

    @property
    def issuer(self) -> str:
        return self.metadata.issuer


@dataclass
class _Attempt:
    """Per-request bookkeeping."""

    authorizations: int = 0
    refreshed: bool = False
    tried_stored: bool = False


class OAuthBase(httpx.Auth):
    """Discovery, token lifecycle and the retry loop; subclasses obtain tokens."""

    requires_request_body = False
    requires_response_body = False

    def __init__(
        self,
        server_url: str | None = None,
        *,
        options: OAuthOptions | None = None,
        **settings: Unpack[OAuthSettings],
    ) -> None:
        options = (options or OAuthOptions()).with_settings(settings)
        #: What this client was configured with (keywords applied).
        self.options = options
        self.server_url = canonical_server_url(server_url) if server_url else None
        self.scopes = list(options.scopes) if options.scopes else None
        self.token_store: TokenStore = (
            options.token_store if options.token_store is not None else InMemoryTokenStore()
        )
        self.max_authorization_attempts = options.max_authorization_attempts
        self.timeout = options.timeout
        self.refresh_margin = options.refresh_margin
        self._policy: UrlPolicy | None = None
        #: The current discovery result, the tokens for it (None until discovery ran).
        self.binding: Binding | None = None
        self.tokens: TokenSet | None = None
        self._denied: list[frozenset[str]] = []
        self._lock = asyncio.Lock()

    # -- configuration -----------------------------------------------------------

    @property
    def policy(self) -> UrlPolicy:
        """The URL policy (fixed once the server URL is known)."""
        if self._policy is None:
            raise RuntimeError("the server URL is not known yet")
        return self._policy

    def _bind_server(self, url: httpx.URL) -> str:
        if self.server_url is None:
            self.server_url = str(url.copy_with(query=None, fragment=None))
        if self._policy is None:
            options = self.options
            loopback = options.allow_loopback
            if loopback is None:
                # Documented rule: loopback AS/metadata only when the MCP server itself is loopback.
                try:
                    host = httpx.URL(self.server_url).host
                    loopback = classify_host(host) is HostClass.LOOPBACK
                except ValueError:
                    loopback = False
            self._policy = UrlPolicy(
                allow_loopback=loopback,
                allow_private=options.allow_private,
                allow_insecure_http=options.allow_insecure_http,
                trusted_origins=frozenset({origin_of(self.server_url)}),
                resolve=options.resolve_hostnames,
            )
        return self.server_url

    # -- httpx.Auth ----------------------------------------------------------------

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError(f"{type(self).__name__} needs an httpx.AsyncClient")

    def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """httpx's entry point: the flow of :meth:`_flow`, driven (see ``_http``)."""
        return drive(self._flow(request))

    def _flow(self, request: httpx.Request) -> Step[None]:
        server_url = self._bind_server(request.url)
        if origin_of(request.url) != origin_of(server_url):
            yield request  # not the MCP server: never send its token elsewhere
            return
        sent = yield from self._fresh_token()
        self._attach(request, sent)
        response: httpx.Response = yield request
        attempt = _Attempt()
        while True:
            kind, challenge = _classify(response)
            if kind is None:
                return
            yield self._lock.acquire()
            try:
                tokens = yield from self._renew(kind, challenge, sent, attempt)
            finally:
                self._lock.release()
            sent = tokens
            self._attach(request, tokens)
            response = yield request

    @staticmethod
    def _attach(request: httpx.Request, tokens: TokenSet | None) -> None:
        if tokens is None:
            request.headers.pop("authorization", None)
        else:
            request.headers["authorization"] = f"Bearer {tokens.access_token}"  # OAuth 2.1 §5.1.1

    # -- token lifecycle -------------------------------------------------------------

    def _fresh_token(self) -> Step[TokenSet | None]:
        """The token to send: refreshed ahead of expiry when possible; never a dead one."""
        tokens = self.tokens
        if tokens is None or not tokens.needs_refresh(self.refresh_margin):
            return tokens
        if tokens.refresh_token and self.binding is not None:
            yield self._lock.acquire()
            try:
                if self.tokens is tokens:  # nobody renewed it while we waited
                    yield from self._refresh(self.binding, tokens)
            finally:
                self._lock.release()
            tokens = self.tokens
        return None if tokens is None or tokens.expires_within(0) else tokens

    def _renew(
        self, kind: Kind, challenge: BearerChallenge, sent: TokenSet | None, attempt: _Attempt
    ) -> Step[TokenSet]:
        """New tokens for a retry; raises :class:`AuthorizationError` when giving up.

        Giving up raises rather than handing back the 401/403: the caller learns why,
        and transports that report ``httpx.HTTPError`` per request fail that request
        instead of reading an error body as if it were the server's answer.
        """
        current = self.tokens
        if (
            current is not None
            and current is not sent
            and not current.expires_within(0)
            and (kind == "unauthorized" or covers(current.scope, challenge.scope))
        ):
            return current  # a concurrent request renewed it while we waited for the lock
        prior = (sent.requested_scope or sent.scope) if sent is not None else None
        if attempt.authorizations >= self.max_authorization_attempts:
            if kind == "step-up":
                self._denied.append(frozenset(union_scopes(prior, challenge.scope) or ()))
            raise AuthorizationError(
                f"{'insufficient scope' if kind == 'step-up' else 'still unauthorized'} after "
                f"{attempt.authorizations} authorization attempts; giving up",
                error=challenge.error,
            )
        if kind == "step-up" and self.binding is not None:
            binding = self.binding
            scopes = union_scopes(prior, challenge.scope)
            if any(frozenset(scopes or ()) <= denied for denied in self._denied):
                # MCP security best practices: cache denied elevations, do not loop.
                raise AuthorizationError(
                    f"scope {format_scope(scopes)!r} was already refused; not re-authorizing",
                    error=challenge.error,
                )
        else:
            binding = yield from self._discover(challenge)
            stored = self.tokens
            if stored is not None and stored is not sent and not attempt.tried_stored:
                attempt.tried_stored = True
                if not stored.expires_within(0):
                    return stored
            if stored is not None and stored.refresh_token and not attempt.refreshed:
                attempt.refreshed = True
                refreshed = yield from self._refresh(binding, stored)
                if refreshed is not None:
                    return refreshed
            prior = (stored.requested_scope or stored.scope) if stored is not None else None
            selected = initial_scopes(
                challenge.scope, binding.resource_metadata.scopes_supported, self.scopes
            )
            scopes = union_scopes(prior, selected)
        attempt.authorizations += 1
        logger.info("authorizing with %s for %s (scope %s)", binding.issuer, binding.resource, scopes)
        return (yield from self._obtain(binding, scopes))

    def _refresh(self, binding: Binding, tokens: TokenSet) -> Step[TokenSet | None]:
        """RFC 6749 §6 refresh with the same ``resource`` (RFC 8707 §2); None when refused."""
        assert tokens.refresh_token is not None
        form = {
            "grant_type": "refresh_token",
            "refresh_token": tokens.refresh_token,
            "resource": binding.resource,
        }
        try:
            return (yield from self._token_request(binding, form, tokens.requested_scope, tokens))
        except TokenError as exc:
            logger.info("refresh refused by %s: %s", binding.issuer, exc)
            if exc.status is not None and exc.status < 500:  # a refused grant, not an outage
                self.tokens = replace(tokens, refresh_token=None)
                yield self.token_store.save_tokens(binding.resource, binding.issuer, self.tokens)
            return None

    def _token_request(
        self,
        binding: Binding,
        form: dict[str, str],
        requested: list[str] | None,
        previous: TokenSet | None = None,
    ) -> Step[TokenSet]:
        endpoint = binding.metadata.token_endpoint
        if endpoint is None:
            raise DiscoveryError(f"authorization server {binding.issuer} has no token_endpoint")
        yield self.policy.check_resolved(endpoint, purpose="token endpoint")
        headers: dict[str, str] = {}
        yield from self._authenticate_client(binding, form, headers)
        request = build_request("POST", endpoint, timeout=self.timeout, headers=headers, form=form)
        response: httpx.Response = yield Fetch(request)
        doc = response_json(response)
        if response.status_code != 200:
            error, description = oauth_error(doc)
            detail = f": {error}" + (f" ({description})" if description else "") if error else ""
            grant, status = form["grant_type"], response.status_code
            raise TokenError(
                f"token endpoint refused the {grant} grant (HTTP {status}){detail}",
                error,
                description,
                response.status_code,
            )
        tokens = parse_token_response(doc, requested, previous)
        self.tokens = tokens
        yield self.token_store.save_tokens(binding.resource, binding.issuer, tokens)
        return tokens

    # -- discovery -------------------------------------------------------------------

    def _discover(self, challenge: BearerChallenge) -> Step[Binding]:
        """PRM (RFC 9728) then AS metadata (RFC 8414 / OIDC); swaps tokens if the binding moved."""
        assert self.server_url is not None
        prm: ProtectedResourceMetadata | None = None
        for url in protected_resource_metadata_urls(self.server_url, challenge.resource_metadata):
            status, doc = yield from get_document(
                url, self.policy, "protected resource metadata", self.timeout
            )
            if status == 200 and isinstance(doc, dict):
                prm = parse_protected_resource_metadata(doc)
                break
        if prm is None:
            raise DiscoveryError(f"no protected resource metadata found for {self.server_url}")
        if not resource_matches(prm.resource, self.server_url):
            # RFC 9728 §7.3: metadata for another resource; abort before any authorization request.
            raise DiscoveryError(f"protected resource {prm.resource!r} does not match {self.server_url!r}")
        issuer = prm.authorization_servers[0]  # RFC 9728 §7.6: the client's choice; the first
        self.policy.check(issuer, purpose="authorization server")
        if urlsplit(issuer).query:
            raise DiscoveryError(f"issuer {issuer!r} has a query component (RFC 8414 §2)")
        previous = self.binding
        if previous is not None and previous.issuer == issuer:
            metadata = previous.metadata
        else:
            metadata = yield from self._fetch_metadata(issuer)
        binding = Binding(prm, metadata)
        if previous is None or (previous.resource, previous.issuer) != (binding.resource, binding.issuer):
            if previous is not None:
                logger.info("authorization moved from %s to %s", previous.issuer, binding.issuer)
            self.tokens = yield self.token_store.load_tokens(binding.resource, binding.issuer)
            self._denied.clear()
        self.binding = binding
        return binding

    def _fetch_metadata(self, issuer: str) -> Step[AuthServerMetadata]:
        for url in authorization_server_metadata_urls(issuer):
            status, doc = yield from get_document(
                url, self.policy, "authorization server metadata", self.timeout
            )
            if status == 200 and isinstance(doc, dict):
                metadata = parse_auth_server_metadata(doc, issuer)
                for name, endpoint in metadata.endpoints().items():
                    self.policy.check(endpoint, purpose=name)
                return metadata
        raise DiscoveryError(f"no authorization server metadata found for issuer {issuer}")

    # -- subclass hooks ------------------------------------------------------------------

    def _obtain(self, binding: Binding, scopes: list[str] | None) -> Step[TokenSet]:
        """A full authorization yielding new tokens."""
        raise NotImplementedError

    def _authenticate_client(
        self, binding: Binding, form: dict[str, str], headers: dict[str, str]
    ) -> Step[None]:
        """Add client authentication to a token-endpoint request."""
        raise NotImplementedError


def _classify(response: httpx.Response) -> tuple[Kind | None, BearerChallenge]:
    values = response.headers.get_list("www-authenticate")
    challenge = bearer_challenge(values)
    if response.status_code == 401 and (challenge is not None or not values):
        return "unauthorized", challenge or BearerChallenge()
    if response.status_code == 403 and challenge is not None and challenge.error == "insufficient_scope":
        return "step-up", challenge
    return None, BearerChallenge()

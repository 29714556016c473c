"""Which era and revision a request is served under: :class:`ServerLifecycle`."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    MCPError,
)
from mcpkit.protocol.lifecycle import (
    LEGACY_ONLY_METHODS,
    MODERN_ONLY_METHODS,
    Era,
    LifecycleState,
    ServerLifecycle,
)
from mcpkit.protocol.meta import CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL, PROGRESS_TOKEN, PROTOCOL_VERSION
from mcpkit.protocol.versions import (
    ALL_VERSIONS,
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ProtocolVersion,
    negotiate_legacy,
    parse_version,
)

V = ProtocolVersion
CLIENT = {"name": "test-client", "version": "1.0"}


def init_params(version: str = "2025-06-18", **extra: Any) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {"roots": {}}, "clientInfo": CLIENT, **extra}


def modern_meta(version: Any = "2026-07-28", **extra: Any) -> dict[str, Any]:
    return {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: {"sampling": {}}, CLIENT_INFO: CLIENT, **extra}


def initialized(version: str = "2025-06-18") -> ServerLifecycle:
    lifecycle = ServerLifecycle()
    lifecycle.scope("initialize", None)
    lifecycle.initialize(init_params(version))
    lifecycle.initialized()
    return lifecycle


def refusal(lifecycle: ServerLifecycle, method: str, meta: dict[str, Any] | None) -> MCPError:
    with pytest.raises(MCPError) as info:
        lifecycle.scope(method, meta)
    return info.value


# -- versions ----------------------------------------------------------------------


def test_versions_are_ordered_and_split_into_eras() -> None:
    assert [v.value for v in ALL_VERSIONS] == sorted(v.value for v in ALL_VERSIONS)
    assert LEGACY_VERSIONS == (V.V2024_11_05, V.V2025_03_26, V.V2025_06_18, V.V2025_11_25)
    assert MODERN_VERSIONS == (V.V2026_07_28,)
    assert LATEST_LEGACY is V.V2025_11_25
    assert V.V2025_06_18.at_least(V.V2025_03_26)
    assert not V.V2025_03_26.at_least(V.V2025_06_18)


@pytest.mark.parametrize("value", ["1900-01-01", "2025-11-25 ", "", None, 20250618, ["2025-06-18"]])
def test_parse_version_refuses_unknown_values(value: Any) -> None:
    assert parse_version(value) is None


def test_parse_version_knows_every_revision() -> None:
    assert all(parse_version(v.value) is v for v in ALL_VERSIONS)


# -- legacy negotiation ------------------------------------------------------------


@pytest.mark.parametrize("version", LEGACY_VERSIONS, ids=str)
def test_supported_legacy_version_is_echoed(version: ProtocolVersion) -> None:
    lifecycle = ServerLifecycle()
    assert lifecycle.initialize(init_params(version.value)) is version
    assert lifecycle.version is version
    assert lifecycle.state is LifecycleState.INITIALIZING
    assert lifecycle.client_capabilities == {"roots": {}}
    assert lifecycle.client_info == CLIENT


@pytest.mark.parametrize("requested", ["1900-01-01", "2099-01-01", "2026-07-28", "latest"])
def test_unknown_or_modern_version_negotiates_newest_legacy(requested: str) -> None:
    assert ServerLifecycle().initialize(init_params(requested)) is LATEST_LEGACY


def test_negotiation_is_limited_to_the_supported_legacy_versions() -> None:
    lifecycle = ServerLifecycle((V.V2024_11_05, V.V2025_03_26, V.V2026_07_28))
    assert lifecycle.initialize(init_params("2025-06-18")) is V.V2025_03_26
    assert negotiate_legacy("2024-11-05", (V.V2024_11_05, V.V2025_03_26)) is V.V2024_11_05
    assert negotiate_legacy(None, (V.V2024_11_05,)) is V.V2024_11_05


def test_initialized_notification_completes_the_handshake() -> None:
    lifecycle = ServerLifecycle()
    lifecycle.initialized()  # before initialize: ignored
    assert lifecycle.state is LifecycleState.NEW
    lifecycle.initialize(init_params())
    lifecycle.initialized()
    assert lifecycle.state is LifecycleState.READY
    lifecycle.initialized()
    assert lifecycle.state is LifecycleState.READY


def test_initialize_twice_is_refused() -> None:
    lifecycle = ServerLifecycle()
    lifecycle.initialize(init_params("2025-03-26"))
    with pytest.raises(MCPError) as info:
        lifecycle.initialize(init_params("2025-06-18"))
    assert info.value.code == INVALID_REQUEST
    assert lifecycle.version is V.V2025_03_26  # the first negotiation stands
    lifecycle.initialized()
    with pytest.raises(MCPError):
        lifecycle.initialize(init_params())


@pytest.mark.parametrize(
    "params",
    [
        {"capabilities": {}, "clientInfo": CLIENT},
        {"protocolVersion": 20250618, "capabilities": {}, "clientInfo": CLIENT},
        {"protocolVersion": "2025-06-18", "clientInfo": CLIENT},
        {"protocolVersion": "2025-06-18", "capabilities": [], "clientInfo": CLIENT},
    ],
    ids=["no-version", "numeric-version", "no-capabilities", "list-capabilities"],
)
def test_malformed_initialize_is_invalid_params(params: dict[str, Any]) -> None:
    lifecycle = ServerLifecycle()
    with pytest.raises(MCPError) as info:
        lifecycle.initialize(params)
    assert info.value.code == INVALID_PARAMS
    assert lifecycle.state is LifecycleState.NEW


def test_non_object_client_info_is_dropped() -> None:
    lifecycle = ServerLifecycle()
    lifecycle.initialize(init_params(clientInfo="me"))
    assert lifecycle.client_info is None


def test_modern_only_server_refuses_initialize_naming_its_versions() -> None:
    lifecycle = ServerLifecycle((V.V2026_07_28,))
    with pytest.raises(MCPError) as info:
        lifecycle.initialize(init_params())
    assert info.value.code == INVALID_REQUEST
    assert "2026-07-28" in info.value.message


# -- before initialize ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["initialize", "ping"])
def test_initialize_and_ping_are_served_before_initialize(method: str) -> None:
    scope = ServerLifecycle().scope(method, None)
    assert scope.era is Era.LEGACY
    assert scope.version is LATEST_LEGACY


@pytest.mark.parametrize(
    "method", ["tools/list", "tools/call", "resources/read", "logging/setLevel", "server/discover"]
)
@pytest.mark.parametrize(
    "meta", [None, {}, {PROGRESS_TOKEN: 1}], ids=["no-meta", "empty-meta", "progress-only"]
)
def test_other_requests_before_initialize_are_invalid_params(
    method: str, meta: dict[str, Any] | None
) -> None:
    error = refusal(ServerLifecycle(), method, meta)
    assert error.code == INVALID_PARAMS
    assert PROTOCOL_VERSION in error.message


def test_requests_are_served_between_initialize_and_initialized() -> None:
    lifecycle = ServerLifecycle()
    lifecycle.initialize(init_params("2025-03-26"))
    scope = lifecycle.scope("tools/list", None)
    assert (scope.era, scope.version) == (Era.LEGACY, V.V2025_03_26)


# -- legacy sessions -----------------------------------------------------------------


def test_legacy_scope_carries_the_session_state() -> None:
    lifecycle = initialized("2025-06-18")
    lifecycle.log_level = "warning"
    scope = lifecycle.scope("tools/call", {PROGRESS_TOKEN: "tok"})
    assert scope.era is Era.LEGACY
    assert not scope.is_modern
    assert scope.version is V.V2025_06_18
    assert scope.client_capabilities == {"roots": {}}
    assert scope.client_info == CLIENT
    assert scope.log_level == "warning"
    assert scope.progress_token == "tok"


@pytest.mark.parametrize("method", sorted(LEGACY_ONLY_METHODS - {"initialize"}))
def test_legacy_only_methods_are_served_in_a_legacy_session(method: str) -> None:
    assert initialized().scope(method, None).era is Era.LEGACY


@pytest.mark.parametrize("method", sorted(MODERN_ONLY_METHODS))
def test_modern_only_methods_are_not_found_in_a_legacy_session(method: str) -> None:
    assert refusal(initialized(), method, None).code == METHOD_NOT_FOUND


def test_initialize_with_modern_meta_still_selects_legacy() -> None:
    """2026-07-28 basic/versioning: an initialize request selects legacy semantics."""
    scope = ServerLifecycle().scope("initialize", modern_meta())
    assert scope.era is Era.LEGACY


# -- modern requests -------------------------------------------------------------------


def test_modern_request_is_served_modern_without_initialize() -> None:
    lifecycle = ServerLifecycle()
    meta = modern_meta(**{LOG_LEVEL: "info", PROGRESS_TOKEN: 5})
    scope = lifecycle.scope("tools/call", meta)
    assert scope.era is Era.MODERN
    assert scope.is_modern
    assert scope.version is V.V2026_07_28
    assert scope.client_capabilities == {"sampling": {}}
    assert scope.client_info == CLIENT
    assert scope.log_level == "info"
    assert scope.progress_token == 5
    assert lifecycle.state is LifecycleState.NEW  # stateless: nothing remembered
    assert lifecycle.version is None


def test_modern_request_needs_no_client_info_or_log_level() -> None:
    scope = ServerLifecycle().scope("tools/list", {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}})
    assert (scope.era, scope.client_info, scope.log_level, scope.progress_token) == (
        Era.MODERN,
        None,
        None,
        None,
    )


def test_modern_request_in_a_legacy_session_is_served_modern() -> None:
    """A dual-era server MAY serve both eras on one connection (basic/versioning)."""
    lifecycle = initialized("2025-06-18")
    scope = lifecycle.scope("tools/list", modern_meta())
    assert (scope.era, scope.version) == (Era.MODERN, V.V2026_07_28)
    assert lifecycle.scope("tools/list", None).version is V.V2025_06_18


@pytest.mark.parametrize("method", sorted(MODERN_ONLY_METHODS))
def test_modern_only_methods_are_served_modern(method: str) -> None:
    assert ServerLifecycle().scope(method, modern_meta()).era is Era.MODERN


@pytest.mark.parametrize(
    "capabilities", [None, "sampling", ["sampling"], 1], ids=["null", "string", "list", "int"]
)
def test_modern_request_with_invalid_client_capabilities_is_invalid_params(capabilities: Any) -> None:
    meta = modern_meta()
    meta[CLIENT_CAPABILITIES] = capabilities
    error = refusal(ServerLifecycle(), "tools/list", meta)
    assert error.code == INVALID_PARAMS
    assert CLIENT_CAPABILITIES in error.message


def test_modern_request_without_client_capabilities_is_invalid_params() -> None:
    error = refusal(ServerLifecycle(), "tools/list", {PROTOCOL_VERSION: "2026-07-28", CLIENT_INFO: CLIENT})
    assert error.code == INVALID_PARAMS


@pytest.mark.parametrize("requested", ["1900-01-01", "2099-12-31", "2025-11-25", "2024-11-05", ""])
def test_unsupported_modern_version_lists_supported_versions(requested: Any) -> None:
    lifecycle = ServerLifecycle()
    error = refusal(lifecycle, "tools/list", modern_meta(requested))
    assert error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert error.data == {"supported": [v.value for v in reversed(ALL_VERSIONS)], "requested": requested}
    assert error.data["supported"][0] == "2026-07-28"  # newest first, like the spec's example


def test_unsupported_version_is_checked_before_capabilities() -> None:
    error = refusal(ServerLifecycle(), "tools/list", {PROTOCOL_VERSION: "1900-01-01"})
    assert error.code == UNSUPPORTED_PROTOCOL_VERSION


def test_legacy_only_server_refuses_modern_requests_with_its_versions() -> None:
    lifecycle = ServerLifecycle(LEGACY_VERSIONS)
    error = refusal(lifecycle, "tools/list", modern_meta())
    assert error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert error.data["supported"] == [v.value for v in reversed(LEGACY_VERSIONS)]


@pytest.mark.parametrize("method", sorted(LEGACY_ONLY_METHODS - {"initialize"}))
def test_legacy_only_methods_are_not_found_in_modern_requests(method: str) -> None:
    assert refusal(ServerLifecycle(), method, modern_meta()).code == METHOD_NOT_FOUND
    assert refusal(initialized(), method, modern_meta()).code == METHOD_NOT_FOUND


def test_supported_names_are_newest_first() -> None:
    assert ServerLifecycle().supported_names() == [v.value for v in reversed(ALL_VERSIONS)]


@pytest.mark.parametrize("level", ["verbose", "INFO", 3])
def test_modern_request_with_unknown_log_level_is_invalid_params(level: Any) -> None:
    assert refusal(ServerLifecycle(), "tools/list", modern_meta(**{LOG_LEVEL: level})).code == INVALID_PARAMS


def test_modern_only_server_refuses_ping_without_meta() -> None:
    assert refusal(ServerLifecycle((V.V2026_07_28,)), "ping", None).code == INVALID_PARAMS

"""MCP Apps vocabulary (protocol/apps.py): the ``_meta.ui`` shapes on the wire, reading a
tool's view (and the deprecated flat key), visibility, and the host's CSP and ``allow`` list."""

from __future__ import annotations

import msgspec
import pytest

from mcpkit.protocol.apps import (
    APP_MIME_TYPE,
    APPS_EXTENSION,
    AppCsp,
    AppPermissions,
    UiResourceMeta,
    allow_attribute,
    check_csp_source,
    check_ui_uri,
    content_security_policy,
    is_ui_uri,
    resource_meta,
    tool_ui,
    visible_to,
)


def directives(policy: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in policy.split(";"):
        name, *values = part.split()
        assert name not in out, f"directive {name} twice"
        out[name] = values
    return out


def test_names_are_the_extensions() -> None:
    assert APPS_EXTENSION == "io.modelcontextprotocol/ui"
    assert APP_MIME_TYPE == "text/html;profile=mcp-app"


def test_resource_meta_is_camel_case_on_the_wire_and_round_trips() -> None:
    meta = UiResourceMeta(
        csp=AppCsp(connect_domains=["https://api.example.com"], base_uri_domains=["https://cdn.example.com"]),
        permissions=AppPermissions(clipboard_write={}, camera={}),
        domain="abc.example.net",
        prefers_border=False,
    )
    wire = msgspec.json.decode(msgspec.json.encode(meta))
    assert wire == {
        "csp": {"connectDomains": ["https://api.example.com"], "baseUriDomains": ["https://cdn.example.com"]},
        "permissions": {"camera": {}, "clipboardWrite": {}},
        "domain": "abc.example.net",
        "prefersBorder": False,
    }
    assert resource_meta({"ui": wire}) == meta
    assert resource_meta({}) is None and resource_meta(None) is None
    with pytest.raises(ValueError, match=r"_meta\.ui"):
        resource_meta({"ui": {"csp": {"connectDomains": "https://one.string"}}})


def test_ui_uris() -> None:
    assert is_ui_uri("ui://weather/dashboard") and not is_ui_uri("ui://") and not is_ui_uri("https://x")
    assert check_ui_uri("ui://a/b.html") == "ui://a/b.html"
    for bad in ("https://a", "file:///etc/passwd", "ui://", "ui://a b", "ui://{x}", 3):
        with pytest.raises(ValueError):
            check_ui_uri(bad)


def test_a_tools_view_nested_flat_and_malformed() -> None:
    ui = tool_ui({"ui": {"resourceUri": "ui://v", "visibility": ["app"]}})
    assert ui is not None and ui.resource_uri == "ui://v" and ui.visibility == ["app"]
    legacy = tool_ui({"ui/resourceUri": "ui://old"})
    assert legacy is not None and legacy.resource_uri == "ui://old"
    # The nested key wins over the deprecated flat one.
    both = tool_ui({"ui": {"resourceUri": "ui://new"}, "ui/resourceUri": "ui://old"})
    assert both is not None and both.resource_uri == "ui://new"
    assert tool_ui({"other": 1}) is None and tool_ui(None) is None
    with pytest.raises(ValueError):
        tool_ui({"ui": {"resourceUri": "https://not-a-view"}})
    with pytest.raises(ValueError):
        tool_ui({"ui": {"visibility": ["everyone"]}})


def test_visibility_defaults_to_model_and_app_and_malformed_allows_nobody() -> None:
    assert visible_to(None, "model") and visible_to(None, "app")
    assert visible_to({"ui": {"resourceUri": "ui://v"}}, "app")
    app_only = {"ui": {"visibility": ["app"]}}
    assert visible_to(app_only, "app") and not visible_to(app_only, "model")
    assert not visible_to({"ui": {"visibility": ["model"]}}, "app")
    assert not visible_to({"ui": {"visibility": "app"}}, "app")


def test_the_default_policy_denies_the_network_and_the_hosts_own_origin() -> None:
    policy, problems = content_security_policy(None)
    assert problems == []
    d = directives(policy)
    assert d["sandbox"] == ["allow-scripts"]  # opaque origin however the document is loaded
    assert d["default-src"] == ["'none'"]
    assert d["connect-src"] == ["'none'"]
    assert d["frame-src"] == ["'none'"]
    assert d["object-src"] == ["'none'"] and d["form-action"] == ["'none'"]
    assert d["script-src"] == ["'unsafe-inline'"]
    assert "'self'" not in policy.replace("frame-ancestors 'self'", "")
    assert "'unsafe-eval'" not in policy


def test_declared_domains_land_in_their_directives() -> None:
    policy, problems = content_security_policy(
        AppCsp(
            connect_domains=["https://api.example.com", "wss://live.example.com:8443"],
            resource_domains=["https://*.cdn.example.com"],
            frame_domains=["https://www.youtube.com"],
            base_uri_domains=["https://cdn.example.com"],
        )
    )
    assert problems == []
    d = directives(policy)
    assert d["connect-src"] == ["https://api.example.com", "wss://live.example.com:8443"]
    for name in ("script-src", "style-src", "img-src", "font-src", "media-src"):
        assert "https://*.cdn.example.com" in d[name]
    assert d["frame-src"] == ["https://www.youtube.com"]
    assert d["base-uri"] == ["https://cdn.example.com"]


@pytest.mark.parametrize(
    "source",
    [
        "*",
        "https:",
        "'unsafe-eval'",
        "'self'",
        "https://a.example.com; script-src *",
        "https://a.example.com,https://b",
        "https://a.example.com/path",
        "javascript://x",
        "data:",
        "https://*",
        "https://a b",
    ],
)
def test_sources_that_are_not_one_origin_are_refused_and_never_reach_the_policy(source: str) -> None:
    with pytest.raises(ValueError):
        check_csp_source(source)
    policy, problems = content_security_policy(AppCsp(connect_domains=[source]))
    assert len(problems) == 1 and "connectDomains" in problems[0]
    assert directives(policy)["connect-src"] == ["'none'"]


def test_allow_attribute_from_permissions() -> None:
    assert allow_attribute(None) == "" and allow_attribute(AppPermissions()) == ""
    allow = allow_attribute(AppPermissions(microphone={}, clipboard_write={}))
    assert allow == "microphone 'src'; clipboard-write 'src'"

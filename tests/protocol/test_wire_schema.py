"""What a server sends validates against every revision's schema.

Representative results are built once with the mcpkit types and shaped for each
revision the way :class:`mcpkit.server.dispatcher.ServerDispatcher` does:
:func:`mcpkit.protocol.wire.downgrade` before 2025-11-25, plain
``msgspec.to_builtins`` from 2025-11-25 on, plus ``resultType``, the server's
``_meta`` identity and the cache hints in 2026-07-28. The JSON-RPC response is
then validated against ``tests/data/schemas/<revision>.json``: the envelope
definition and the specific result definition.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from mcpkit.protocol import types as t
from mcpkit.protocol.meta import SERVER_INFO
from mcpkit.protocol.versions import ALL_VERSIONS, ProtocolVersion
from mcpkit.protocol.wire import downgrade, needs_downgrade

V = ProtocolVersion
SCHEMAS = Path(__file__).resolve().parent.parent / "data" / "schemas"

# -- representative results ------------------------------------------------------

ICONS = [t.Icon(src="https://example.com/icon.png", mime_type="image/png", sizes=["48x48"], theme="light")]
ANNOTATIONS = t.Annotations(
    audience=["user", "assistant"], priority=0.5, last_modified="2025-01-12T15:00:58Z"
)
SERVER = t.Implementation(
    name="example-server",
    version="1.0.0",
    title="Example Server",
    description="Serves examples",
    website_url="https://example.com",
    icons=ICONS,
)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA="


def _capabilities() -> t.ServerCapabilities:
    return t.ServerCapabilities(
        logging={},
        completions={},
        prompts={"listChanged": True},
        resources={"subscribe": True, "listChanged": True},
        tools={"listChanged": True},
    )


def _content() -> list[Any]:
    """One block of every kind, with every optional field set."""
    return [
        t.TextContent(text="It is 22.5 °C", annotations=ANNOTATIONS),
        t.ImageContent(data=PNG, mime_type="image/png", annotations=ANNOTATIONS),
        t.AudioContent(data=WAV, mime_type="audio/wav"),
        t.ResourceLink(
            uri="file:///project/README.md",
            name="README.md",
            title="Read me",
            description="Project documentation",
            mime_type="text/markdown",
            size=1234,
            icons=ICONS,
            annotations=ANNOTATIONS,
        ),
        t.EmbeddedResource(
            resource=t.TextResourceContents("file:///project/main.rs", "fn main() {}", "text/x-rust"),
            annotations=ANNOTATIONS,
        ),
        t.EmbeddedResource(resource=t.BlobResourceContents("file:///project/logo.png", PNG, "image/png")),
    ]


def _tool() -> t.Tool:
    return t.Tool(
        name="get_weather",
        title="Weather",
        description="Current weather for a city",
        # A property called "title": user data that downgrade must not touch.
        input_schema={
            "type": "object",
            "properties": {"city": {"type": "string"}, "title": {"type": "string"}},
            "required": ["city"],
        },
        output_schema={
            "type": "object",
            "properties": {"temperature": {"type": "number"}, "title": {"type": "string"}},
            "required": ["temperature"],
        },
        annotations=t.ToolAnnotations(
            title="Weather lookup",
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=True,
        ),
        icons=ICONS,
    )


def _initialize_result() -> t.InitializeResult:
    return t.InitializeResult(
        protocol_version="(set per revision)",
        capabilities=_capabilities(),
        server_info=SERVER,
        instructions="Use get_weather for forecasts.",
    )


def _discover_result() -> t.DiscoverResult:
    return t.DiscoverResult(
        supported_versions=[v.value for v in reversed(ALL_VERSIONS)],
        capabilities=t.ServerCapabilities(tools={}, resources={}, prompts={}, logging={}, completions={}),
        instructions="Use get_weather for forecasts.",
    )


def _list_tools_result() -> t.ListToolsResult:
    return t.ListToolsResult(
        tools=[_tool(), t.Tool(name="ping", input_schema={"type": "object"})], next_cursor="Mg=="
    )


def _call_tool_result() -> t.CallToolResult:
    return t.CallToolResult(
        content=_content(),
        structured_content={"temperature": 22.5, "title": "Paris"},
        is_error=False,
    )


def _list_resources_result() -> t.ListResourcesResult:
    return t.ListResourcesResult(
        resources=[
            t.Resource(
                uri="file:///project/README.md",
                name="README.md",
                title="Read me",
                description="Project documentation",
                mime_type="text/markdown",
                size=1234,
                annotations=ANNOTATIONS,
                icons=ICONS,
            ),
            t.Resource(uri="file:///project/logo.png", name="logo.png"),
        ],
        next_cursor="Mg==",
    )


def _list_resource_templates_result() -> t.ListResourceTemplatesResult:
    return t.ListResourceTemplatesResult(
        resource_templates=[
            t.ResourceTemplate(
                uri_template="file:///project/{path}",
                name="project-files",
                title="Project files",
                description="Any file of the project",
                mime_type="application/octet-stream",
                annotations=ANNOTATIONS,
                icons=ICONS,
            )
        ]
    )


def _read_resource_result() -> t.ReadResourceResult:
    return t.ReadResourceResult(
        contents=[
            t.TextResourceContents("file:///project/main.rs", "fn main() {}", "text/x-rust"),
            t.BlobResourceContents("file:///project/logo.png", PNG, "image/png"),
        ]
    )


def _list_prompts_result() -> t.ListPromptsResult:
    return t.ListPromptsResult(
        prompts=[
            t.Prompt(
                name="code_review",
                title="Code review",
                description="Review a piece of code",
                arguments=[
                    t.PromptArgument(name="code", title="Code", description="The code", required=True),
                    t.PromptArgument(name="language"),
                ],
                icons=ICONS,
            )
        ]
    )


def _get_prompt_result() -> t.GetPromptResult:
    return t.GetPromptResult(
        description="Code review prompt",
        messages=[t.PromptMessage(role="user", content=block) for block in _content()]
        + [t.PromptMessage(role="assistant", content=t.TextContent(text="Looks good."))],
    )


def _complete_result() -> t.CompleteResult:
    return t.CompleteResult(completion=t.Completion(values=["python", "pytorch"], total=10, has_more=True))


#: Schema result type -> factory of a representative value (fresh each call: cases mutate it).
CASES: dict[str, Callable[[], Any]] = {
    "InitializeResult": _initialize_result,
    "DiscoverResult": _discover_result,
    "ListToolsResult": _list_tools_result,
    "CallToolResult": _call_tool_result,
    "ListResourcesResult": _list_resources_result,
    "ListResourceTemplatesResult": _list_resource_templates_result,
    "ReadResourceResult": _read_resource_result,
    "ListPromptsResult": _list_prompts_result,
    "GetPromptResult": _get_prompt_result,
    "CompleteResult": _complete_result,
    "EmptyResult": t.EmptyResult,
}


def _applies(name: str, version: ProtocolVersion) -> bool:
    if name == "InitializeResult":
        return not version.is_modern
    if name == "DiscoverResult":
        return version.is_modern
    return True


def server_output(name: str, version: ProtocolVersion) -> Any:
    """The result ``name`` as the server sends it at ``version`` (builtins)."""
    result = CASES[name]()
    if name == "InitializeResult":
        result.protocol_version = version.value
    if version.is_modern:
        # ServerDispatcher._finish for modern requests.
        result.result_type = "complete"
        result.meta = {SERVER_INFO: msgspec.to_builtins(SERVER)}
        if hasattr(result, "ttl_ms"):
            result.ttl_ms = 60_000
            result.cache_scope = "public"
        return msgspec.to_builtins(result)
    if needs_downgrade(version):
        return downgrade(result, version)
    return msgspec.to_builtins(result)


def envelope(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "result": result}


# -- validation ----------------------------------------------------------------


@functools.cache
def _schema(version: ProtocolVersion) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{version.value}.json").read_text())


def _defs_key(schema: dict[str, Any]) -> str:
    return "$defs" if "$defs" in schema else "definitions"


def _response_validator(root: dict[str, Any], result_type: str) -> Any:
    """Validates a JSON-RPC result response whose result is a ``result_type``.

    The whole schema is the root, so every ``$ref`` inside resolves; the
    envelope and the result type are referenced through ``allOf`` (a sibling
    ``$ref`` would be ignored in draft-07).
    """
    key = _defs_key(root)
    envelope_type = "JSONRPCResultResponse" if "JSONRPCResultResponse" in root[key] else "JSONRPCResponse"
    assert result_type in root[key], f"{result_type} is not a type of this revision"
    schema = {
        **root,
        "allOf": [
            {"$ref": f"#/{key}/{envelope_type}"},
            {"properties": {"result": {"$ref": f"#/{key}/{result_type}"}}},
        ],
    }
    return jsonschema.validators.validator_for(root)(schema)


@functools.cache
def validator(version: ProtocolVersion, result_type: str) -> Any:
    return _response_validator(_schema(version), result_type)


# Keys whose values are open by design (user data, extension points): left open
# by the strict check below.
_OPEN_PROPERTIES = frozenset({"_meta", "inputSchema", "outputSchema", "structuredContent", "experimental"})


def _close(node: Any) -> None:
    """Forbid undeclared keys in every object schema that lists ``properties``."""
    if isinstance(node, list):
        for item in node:
            _close(item)
    elif isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    if name not in _OPEN_PROPERTIES:
                        _close(sub)
            else:
                _close(value)


@functools.cache
def _closed_schema(version: ProtocolVersion) -> dict[str, Any]:
    root = copy.deepcopy(_schema(version))
    for name, definition in root[_defs_key(root)].items():
        if not name.endswith("MetaObject"):  # 2026-07-28 _meta objects are open
            _close(definition)
    return root


@functools.cache
def strict_validator(version: ProtocolVersion, result_type: str) -> Any:
    return _response_validator(_closed_schema(version), result_type)


def validation_errors(check: Any, instance: Any) -> list[str]:
    out = []
    for error in check.iter_errors(instance):
        best = jsonschema.exceptions.best_match([error])
        where = "/".join(str(p) for p in best.absolute_path)
        out.append(f"at {where or '<root>'}: {best.message}")
    return out


def _cases() -> list[Any]:
    out = []
    for version in ALL_VERSIONS:
        for name in CASES:
            if not _applies(name, version):
                continue
            out.append(pytest.param(version, name, id=f"{version.value}-{name}"))
    return out


# -- tests ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ALL_VERSIONS, ids=str)
def test_schema_is_valid_json_schema(version: ProtocolVersion) -> None:
    schema = _schema(version)
    jsonschema.validators.validator_for(schema).check_schema(schema)


def test_every_case_runs_at_every_revision() -> None:
    names = {name for _, name in (p.values for p in _cases())}
    assert names == CASES.keys()
    assert len(_cases()) == len(ALL_VERSIONS) * (len(CASES) - 1)


@pytest.mark.parametrize(("version", "name"), _cases())
def test_server_result_matches_revision_schema(version: ProtocolVersion, name: str) -> None:
    message = envelope(server_output(name, version))
    assert validation_errors(validator(version, name), message) == []


@pytest.mark.parametrize(("version", "name"), _cases())
def test_server_result_has_no_keys_the_revision_lacks(version: ProtocolVersion, name: str) -> None:
    """Stricter than the schema: objects may only carry keys the revision declares.

    The schemas allow unknown keys, but wire.downgrade exists to drop what an
    older revision does not define; this finds what it misses.
    """
    message = envelope(server_output(name, version))
    assert validation_errors(strict_validator(version, name), message) == []


def test_downgrade_keeps_tool_annotations_title_in_2025_03_26() -> None:
    out = downgrade(t.ListToolsResult(tools=[_tool()]), V.V2025_03_26)
    assert out["tools"][0]["annotations"]["title"] == "Weather lookup"


@pytest.mark.parametrize("version", [v for v in ALL_VERSIONS if needs_downgrade(v)], ids=str)
def test_downgrade_leaves_user_data_alone(version: ProtocolVersion) -> None:
    out = downgrade(t.ListToolsResult(tools=[_tool()]), version)
    assert out["tools"][0]["inputSchema"] == _tool().input_schema
    called = downgrade(_call_tool_result(), version)
    if version >= V.V2025_06_18:
        assert called["structuredContent"] == {"temperature": 22.5, "title": "Paris"}


# -- the harness rejects what it should --------------------------------------------


@pytest.mark.parametrize("version", ALL_VERSIONS, ids=str)
def test_validator_rejects_result_without_required_field(version: ProtocolVersion) -> None:
    message = envelope({"isError": False})
    assert validation_errors(validator(version, "CallToolResult"), message) != []


@pytest.mark.parametrize("version", [v for v in ALL_VERSIONS if v < V.V2025_06_18], ids=str)
def test_newer_content_blocks_are_invalid_without_downgrade(version: ProtocolVersion) -> None:
    """resource_link (2025-06-18) and, before 2025-03-26, audio fail the older schema raw."""
    raw = envelope(msgspec.to_builtins(_call_tool_result()))
    problems = validation_errors(validator(version, "CallToolResult"), raw)
    assert any("content/3" in p for p in problems), problems
    assert (
        validation_errors(
            validator(version, "CallToolResult"), envelope(downgrade(_call_tool_result(), version))
        )
        == []
    )


def test_modern_result_needs_result_type() -> None:
    result = msgspec.to_builtins(_call_tool_result())
    assert validation_errors(validator(V.V2026_07_28, "CallToolResult"), envelope(result)) != []


@pytest.mark.parametrize("name", ["ListToolsResult", "ReadResourceResult", "DiscoverResult"])
def test_modern_cacheable_result_needs_cache_hints(name: str) -> None:
    result = CASES[name]()
    result.result_type = "complete"
    assert validation_errors(validator(V.V2026_07_28, name), envelope(msgspec.to_builtins(result))) != []

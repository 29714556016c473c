"""The specification's example messages against the mcpkit types.

Each file ``tests/data/spec-examples/<revision>/<Type>/<name>.json`` is an
example of the schema type ``<Type>`` (see ``tests/data/README.md``). Every
example directory must be classified below, in exactly one of:

- :data:`STRUCTS`: a standalone value; it decodes into the mcpkit type and
  re-encodes to the same JSON value.
- :data:`ERROR_OBJECTS`: the ``error`` member of an error response.
- :data:`MESSAGES`: a whole JSON-RPC message; ``decode_message`` classifies it,
  its params/result decode with the per-method type, and the ``encode_*``
  helpers rebuild the same message.
- :data:`INPUT_REQUEST_MAPS` / :data:`INPUT_RESPONSE_MAPS`: 2026-07-28
  multi round-trip maps of embedded requests / results.
- :data:`NOT_MODELLED`: types mcpkit has no Struct for, each with the reason.

A directory that is in none of them fails
:func:`test_every_example_directory_is_classified`, so a new example in a
refreshed copy of the specification cannot be skipped silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from mcpkit.protocol import errors
from mcpkit.protocol import types as t
from mcpkit.protocol.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    Response,
    decode_message,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
)

DATA = Path(__file__).resolve().parent.parent / "data"
EXAMPLES = DATA / "spec-examples"
SCHEMAS = DATA / "schemas"

# -- classification ------------------------------------------------------------

#: Schema type name -> the mcpkit type that decodes it (a Struct or a tagged union).
STRUCTS: dict[str, Any] = {
    # Content blocks and their parts.
    "TextContent": t.TextContent,
    "ImageContent": t.ImageContent,
    "AudioContent": t.AudioContent,
    "ResourceLink": t.ResourceLink,
    "EmbeddedResource": t.EmbeddedResource,
    "ContentBlock": t.ContentBlock,
    "ToolUseContent": t.ToolUseContent,
    "ToolResultContent": t.ToolResultContent,
    # The spec's two contents types differ only in text/blob: one Struct decodes both.
    "TextResourceContents": t.ResourceContents,
    "BlobResourceContents": t.ResourceContents,
    "ResourceContents": t.ResourceContents,
    "Annotations": t.Annotations,
    "Icon": t.Icon,
    "Implementation": t.Implementation,
    # Capabilities and lifecycle.
    "ClientCapabilities": t.ClientCapabilities,
    "ServerCapabilities": t.ServerCapabilities,
    "InitializeRequestParams": t.InitializeRequestParams,
    "InitializeResult": t.InitializeResult,
    "DiscoverResult": t.DiscoverResult,
    # Features.
    "Tool": t.Tool,
    "ToolAnnotations": t.ToolAnnotations,
    "Resource": t.Resource,
    "ResourceTemplate": t.ResourceTemplate,
    "Prompt": t.Prompt,
    "PromptArgument": t.PromptArgument,
    "PromptMessage": t.PromptMessage,
    "Root": t.Root,
    "SamplingMessage": t.SamplingMessage,
    # Results.
    "Result": t.Result,
    "EmptyResult": t.EmptyResult,
    "CallToolResult": t.CallToolResult,
    "CompleteResult": t.CompleteResult,
    "CreateMessageResult": t.CreateMessageResult,
    "ElicitResult": t.ElicitResult,
    "GetPromptResult": t.GetPromptResult,
    "ListPromptsResult": t.ListPromptsResult,
    "ListResourceTemplatesResult": t.ListResourceTemplatesResult,
    "ListResourcesResult": t.ListResourcesResult,
    "ListRootsResult": t.ListRootsResult,
    "ListToolsResult": t.ListToolsResult,
    "ReadResourceResult": t.ReadResourceResult,
    # subscriptions/listen answers, when the stream closes, with nothing but _meta.
    "SubscriptionsListenResult": t.EmptyResult,
    # Params.
    "CallToolRequestParams": t.CallToolParams,
    "CancelledNotificationParams": t.CancelledParams,
    "CompleteRequestParams": t.CompleteParams,
    "CreateMessageRequestParams": t.CreateMessageParams,
    "ElicitRequestParams": t.ElicitParams,
    "ElicitRequestFormParams": t.ElicitParams,
    "ElicitRequestURLParams": t.ElicitParams,
    "GetPromptRequestParams": t.GetPromptParams,
    "LoggingMessageNotificationParams": t.LoggingMessageParams,
    "PaginatedRequestParams": t.PaginatedParams,
    "ProgressNotificationParams": t.ProgressParams,
    "ReadResourceRequestParams": t.UriParams,
    "SubscribeRequestParams": t.UriParams,
    "UnsubscribeRequestParams": t.UriParams,
    "ResourceUpdatedNotificationParams": t.ResourceUpdatedParams,
    "SetLevelRequestParams": t.SetLevelParams,
}

CONTENT_BLOCKS = (t.TextContent, t.ImageContent, t.AudioContent, t.ResourceLink, t.EmbeddedResource)

#: Bare JSON-RPC error objects -> the code they must carry (mcpkit's constant).
ERROR_OBJECTS: dict[str, int] = {
    "ParseError": errors.PARSE_ERROR,
    "InvalidRequestError": errors.INVALID_REQUEST,
    "MethodNotFoundError": errors.METHOD_NOT_FOUND,
    "InvalidParamsError": errors.INVALID_PARAMS,
    "InternalError": errors.INTERNAL_ERROR,
}


@dataclass(frozen=True)
class RequestMessage:
    method: str


@dataclass(frozen=True)
class NotificationMessage:
    method: str


@dataclass(frozen=True)
class ResultMessage:
    result_type: Any


@dataclass(frozen=True)
class ErrorMessage:
    code: int


#: Whole JSON-RPC messages -> what ``decode_message`` must make of them.
MESSAGES: dict[str, RequestMessage | NotificationMessage | ResultMessage | ErrorMessage] = {
    # Client requests.
    "InitializeRequest": RequestMessage("initialize"),
    "PingRequest": RequestMessage("ping"),
    "DiscoverRequest": RequestMessage("server/discover"),
    "CallToolRequest": RequestMessage("tools/call"),
    "CompleteRequest": RequestMessage("completion/complete"),
    "GetPromptRequest": RequestMessage("prompts/get"),
    "ListPromptsRequest": RequestMessage("prompts/list"),
    "ListResourceTemplatesRequest": RequestMessage("resources/templates/list"),
    "ListResourcesRequest": RequestMessage("resources/list"),
    "ListToolsRequest": RequestMessage("tools/list"),
    "ReadResourceRequest": RequestMessage("resources/read"),
    "SubscribeRequest": RequestMessage("resources/subscribe"),
    "UnsubscribeRequest": RequestMessage("resources/unsubscribe"),
    "SetLevelRequest": RequestMessage("logging/setLevel"),
    "SubscriptionsListenRequest": RequestMessage("subscriptions/listen"),
    # Server requests; in 2026-07-28 they are InputRequests ({method, params}, no envelope).
    "CreateMessageRequest": RequestMessage("sampling/createMessage"),
    "ElicitRequest": RequestMessage("elicitation/create"),
    "ListRootsRequest": RequestMessage("roots/list"),
    # Notifications.
    "InitializedNotification": NotificationMessage("notifications/initialized"),
    "CancelledNotification": NotificationMessage("notifications/cancelled"),
    "ProgressNotification": NotificationMessage("notifications/progress"),
    "LoggingMessageNotification": NotificationMessage("notifications/message"),
    "PromptListChangedNotification": NotificationMessage("notifications/prompts/list_changed"),
    "ResourceListChangedNotification": NotificationMessage("notifications/resources/list_changed"),
    "ResourceUpdatedNotification": NotificationMessage("notifications/resources/updated"),
    "ToolListChangedNotification": NotificationMessage("notifications/tools/list_changed"),
    "RootsListChangedNotification": NotificationMessage("notifications/roots/list_changed"),
    "SubscriptionsAcknowledgedNotification": NotificationMessage("notifications/subscriptions/acknowledged"),
    # Result responses (2026-07-28 names them <Result>Response).
    "CallToolResultResponse": ResultMessage(t.CallToolResult),
    "CompleteResultResponse": ResultMessage(t.CompleteResult),
    "DiscoverResultResponse": ResultMessage(t.DiscoverResult),
    "GetPromptResultResponse": ResultMessage(t.GetPromptResult),
    "ListPromptsResultResponse": ResultMessage(t.ListPromptsResult),
    "ListResourceTemplatesResultResponse": ResultMessage(t.ListResourceTemplatesResult),
    "ListResourcesResultResponse": ResultMessage(t.ListResourcesResult),
    "ListToolsResultResponse": ResultMessage(t.ListToolsResult),
    "ReadResourceResultResponse": ResultMessage(t.ReadResourceResult),
    "SubscriptionsListenResultResponse": ResultMessage(t.EmptyResult),
    # Error responses.
    "HeaderMismatchError": ErrorMessage(errors.HEADER_MISMATCH),
    "MissingRequiredClientCapabilityError": ErrorMessage(errors.MISSING_CLIENT_CAPABILITY),
    "UnsupportedProtocolVersionError": ErrorMessage(errors.UNSUPPORTED_PROTOCOL_VERSION),
}

#: Method -> the params Struct the server or client decodes it with.
PARAMS_BY_METHOD: dict[str, Any] = {
    "initialize": t.InitializeRequestParams,
    "ping": t.Params,
    "server/discover": t.Params,
    "tools/list": t.PaginatedParams,
    "tools/call": t.CallToolParams,
    "resources/list": t.PaginatedParams,
    "resources/templates/list": t.PaginatedParams,
    "resources/read": t.UriParams,
    "resources/subscribe": t.UriParams,
    "resources/unsubscribe": t.UriParams,
    "prompts/list": t.PaginatedParams,
    "prompts/get": t.GetPromptParams,
    "completion/complete": t.CompleteParams,
    "logging/setLevel": t.SetLevelParams,
    "sampling/createMessage": t.CreateMessageParams,
    "elicitation/create": t.ElicitParams,
    "roots/list": t.Params,
    "notifications/initialized": t.Params,
    "notifications/cancelled": t.CancelledParams,
    "notifications/progress": t.ProgressParams,
    "notifications/message": t.LoggingMessageParams,
    "notifications/prompts/list_changed": t.Params,
    "notifications/resources/list_changed": t.Params,
    "notifications/resources/updated": t.ResourceUpdatedParams,
    "notifications/tools/list_changed": t.Params,
    "notifications/roots/list_changed": t.Params,
}

#: Methods whose params have no Struct: only the envelope of their examples is checked.
PARAMS_NOT_MODELLED: dict[str, str] = {
    "subscriptions/listen": "SubscriptionsListenRequestParams (the `notifications` filter) has no Struct; "
    "mcpkit does not serve subscriptions/listen yet",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotificationParams has no Struct",
}

#: 2026-07-28 InputRequests: a map of embedded {method, params} server requests.
INPUT_REQUEST_MAPS = frozenset({"InputRequests"})
#: 2026-07-28 InputResponses: a map of results, each one of these types.
INPUT_RESPONSE_MAPS = frozenset({"InputResponses"})
INPUT_RESPONSE_TYPES = (t.CreateMessageResult, t.ListRootsResult, t.ElicitResult)
#: Methods that may be embedded as InputRequests (2026-07-28 schema, InputRequest).
INPUT_REQUEST_METHODS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})

#: Schema types mcpkit deliberately has no Struct for, and why. Their examples
#: are still validated against the schema (test_example_matches_its_schema_definition).
_ELICITATION_SCHEMA = "elicitation requestedSchema property; ElicitParams.requested_schema is a plain dict"
NOT_MODELLED: dict[str, str] = {
    # Elicitation primitive schemas, passed through to the client untouched.
    "BooleanSchema": _ELICITATION_SCHEMA,
    "NumberSchema": _ELICITATION_SCHEMA,
    "StringSchema": _ELICITATION_SCHEMA,
    "TitledMultiSelectEnumSchema": _ELICITATION_SCHEMA,
    "TitledSingleSelectEnumSchema": _ELICITATION_SCHEMA,
    "UntitledMultiSelectEnumSchema": _ELICITATION_SCHEMA,
    "UntitledSingleSelectEnumSchema": _ELICITATION_SCHEMA,
    "ModelPreferences": "CreateMessageParams.model_preferences is a plain dict",
    "InputRequiredResult": "no Struct for the 2026-07-28 multi round-trip result "
    "(resultType 'input_required' with inputRequests/requestState); mcpkit never sends it yet",
}

# -- helpers -------------------------------------------------------------------


def _example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*/*/*.json"))


def _example_dirs() -> list[tuple[str, str]]:
    return sorted({(p.parent.parent.name, p.parent.name) for p in _example_files()})


def _as_params(paths: list[Path]) -> list[Any]:
    return [pytest.param(p, id=f"{p.parent.parent.name}/{p.parent.name}/{p.stem}") for p in paths]


def _files_of(kinds: Any) -> list[Path]:
    """Example files whose type directory is in ``kinds`` (a table or a set of names)."""
    return [p for p in _example_files() if p.parent.name in kinds]


def _files_in(kinds: Any) -> list[Any]:
    """:func:`_files_of` as pytest params named ``<revision>/<Type>/<name>``."""
    return _as_params(_files_of(kinds))


def _revision(path: Path) -> str:
    return path.parent.parent.name


def _kind(path: Path) -> str:
    return path.parent.name


def _schema(revision: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{revision}.json").read_text())


def _definitions(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["$defs"] if "$defs" in schema else schema["definitions"]


def same_json(a: Any, b: Any) -> bool:
    """JSON value equality: 50 equals 50.0 (JSON has one number type), but
    ``true`` is not ``1`` and ``{}`` is not ``[]``, unlike Python's ``==``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def assert_round_trip(raw: bytes, tp: Any) -> Any:
    """Decode ``raw`` as ``tp`` and check it re-encodes to the same JSON value."""
    value = msgspec.json.decode(raw, type=tp)
    again = json.loads(msgspec.json.encode(value))
    expected = json.loads(raw)
    assert same_json(again, expected), f"round trip changed the value:\n  in:  {expected}\n  out: {again}"
    return value


def assert_params_round_trip(method: str, params: Any) -> Any:
    """``params`` (a JSON value, None when absent) round-trips through the method's
    params type; returns what to re-encode them from (UNSET when absent)."""
    if method in PARAMS_NOT_MODELLED:
        return msgspec.UNSET if params is None else params
    assert method in PARAMS_BY_METHOD, f"no params type for {method!r}: add it to PARAMS_BY_METHOD"
    tp = PARAMS_BY_METHOD[method]
    if params is None:
        msgspec.json.decode(b"{}", type=tp)  # absent params must be acceptable
        return msgspec.UNSET
    return assert_round_trip(json.dumps(params).encode(), tp)


# -- coverage of the example set -----------------------------------------------

_CLASSIFICATIONS: dict[str, Any] = {
    "STRUCTS": STRUCTS,
    "ERROR_OBJECTS": ERROR_OBJECTS,
    "MESSAGES": MESSAGES,
    "INPUT_REQUEST_MAPS": INPUT_REQUEST_MAPS,
    "INPUT_RESPONSE_MAPS": INPUT_RESPONSE_MAPS,
    "NOT_MODELLED": NOT_MODELLED,
}


def test_example_set_is_present() -> None:
    assert (EXAMPLES / "2026-07-28").is_dir()
    assert len(_example_files()) > 100


def test_every_example_directory_is_classified() -> None:
    problems = []
    for revision, kind in _example_dirs():
        homes = [name for name, table in _CLASSIFICATIONS.items() if kind in table]
        if len(homes) != 1:
            problems.append(f"{revision}/{kind}: in {homes or 'no table'}")
    assert not problems, "classify each example type in exactly one table:\n" + "\n".join(problems)


def test_classified_names_are_schema_types() -> None:
    """Guards the tables against typos: every name is a type of some revision's schema."""
    known = set().union(*(_definitions(_schema(p.stem)) for p in SCHEMAS.glob("*.json")))
    names = set().union(*(set(table) for table in _CLASSIFICATIONS.values()))
    unknown = sorted(names - known)
    assert not unknown, f"not a type of any schema: {unknown}"


def test_every_input_request_method_has_a_params_type() -> None:
    assert not INPUT_REQUEST_METHODS - PARAMS_BY_METHOD.keys()
    known = PARAMS_BY_METHOD.keys() | PARAMS_NOT_MODELLED.keys()
    methods = {m.method for m in MESSAGES.values() if isinstance(m, RequestMessage | NotificationMessage)}
    missing = sorted(methods - known)
    assert not missing, f"add these methods to PARAMS_BY_METHOD or PARAMS_NOT_MODELLED: {missing}"


@pytest.mark.parametrize("path", _as_params(_example_files()))
def test_example_matches_its_schema_definition(path: Path) -> None:
    """The test vectors themselves are valid instances of the type they are filed under."""
    schema = _schema(_revision(path))
    defs_key = "$defs" if "$defs" in schema else "definitions"
    if _kind(path) not in schema[defs_key]:
        pytest.fail(f"{_kind(path)} is not a type of the {_revision(path)} schema")
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls({**schema, "allOf": [{"$ref": f"#/{defs_key}/{_kind(path)}"}]})
    error = jsonschema.exceptions.best_match(validator.iter_errors(json.loads(path.read_bytes())))
    assert error is None, error.message


# -- standalone values ---------------------------------------------------------


@pytest.mark.parametrize("path", _files_in(STRUCTS))
def test_type_example_round_trips(path: Path) -> None:
    assert_round_trip(path.read_bytes(), STRUCTS[_kind(path)])


@pytest.mark.parametrize("path", _files_in({k for k, tp in STRUCTS.items() if tp in CONTENT_BLOCKS}))
def test_content_block_example_decodes_through_the_union(path: Path) -> None:
    block = assert_round_trip(path.read_bytes(), t.ContentBlock)
    assert type(block) is STRUCTS[_kind(path)]


_SAMPLING_BLOCK = t.TextContent | t.ImageContent | t.AudioContent | t.ToolUseContent | t.ToolResultContent
_SAMPLING_CONTENT = _SAMPLING_BLOCK | list[_SAMPLING_BLOCK]


def _sampling_contents(kind: str, value: dict[str, Any]) -> list[Any]:
    if kind == "CreateMessageRequestParams":
        return [message["content"] for message in value["messages"]]
    return [value["content"]]


@pytest.mark.parametrize(
    "path", _files_in({"SamplingMessage", "CreateMessageResult", "CreateMessageRequestParams"})
)
def test_sampling_content_decodes_as_typed_blocks(path: Path) -> None:
    """SamplingMessage.content / CreateMessageResult.content are typed ``Any`` in
    mcpkit; check the content-block Structs do decode what the spec puts there."""
    for content in _sampling_contents(_kind(path), json.loads(path.read_bytes())):
        assert_round_trip(json.dumps(content).encode(), _SAMPLING_CONTENT)


@pytest.mark.parametrize("path", _files_in(ERROR_OBJECTS))
def test_error_object_example_round_trips(path: Path) -> None:
    error = assert_round_trip(path.read_bytes(), ErrorObject)
    assert error.code == ERROR_OBJECTS[_kind(path)]


# -- whole messages --------------------------------------------------------------


@pytest.mark.parametrize("path", _files_in(MESSAGES))
def test_message_example_is_classified_and_rebuilt(path: Path) -> None:
    raw = path.read_bytes()
    doc = json.loads(raw)
    expected = MESSAGES[_kind(path)]

    if isinstance(expected, RequestMessage) and "jsonrpc" not in doc:
        # A 2026-07-28 InputRequest: the request is embedded in a result, not sent as a message.
        assert _revision(path) >= "2026-07-28", "only 2026-07-28 embeds requests without an envelope"
        assert expected.method in INPUT_REQUEST_METHODS
        assert doc["method"] == expected.method
        assert_params_round_trip(expected.method, doc.get("params"))
        return

    message = decode_message(raw)
    if isinstance(expected, RequestMessage):
        assert isinstance(message, Request)
        assert (message.id, message.method) == (doc["id"], expected.method)
        params = assert_params_round_trip(message.method, doc.get("params"))
        rebuilt = encode_request(message.id, message.method, params)
    elif isinstance(expected, NotificationMessage):
        assert isinstance(message, Notification)
        assert message.method == expected.method
        params = assert_params_round_trip(message.method, doc.get("params"))
        rebuilt = encode_notification(message.method, params)
    elif isinstance(expected, ResultMessage):
        assert isinstance(message, Response)
        assert message.id == doc["id"]
        result = assert_round_trip(bytes(message.result), expected.result_type)
        rebuilt = encode_result(message.id, result)
    else:
        assert isinstance(message, ErrorResponse)
        assert message.id == doc.get("id")
        assert message.error.code == expected.code
        error = message.error
        rebuilt = encode_error(message.id, error.code, error.message, error.data)
    assert same_json(json.loads(rebuilt), doc)


def test_unsupported_version_error_matches_the_spec_example() -> None:
    """MCPError.unsupported_version builds exactly the spec's error response."""
    path = EXAMPLES / "2026-07-28" / "UnsupportedProtocolVersionError" / "unsupported-version.json"
    doc = json.loads(path.read_bytes())
    error = errors.MCPError.unsupported_version(
        doc["error"]["data"]["requested"], doc["error"]["data"]["supported"]
    )
    rebuilt = encode_error(doc["id"], error.code, error.message, error.data)
    assert json.loads(rebuilt) == doc


# -- multi round-trip maps (2026-07-28) ------------------------------------------


@pytest.mark.parametrize("path", _files_in(INPUT_REQUEST_MAPS))
def test_input_requests_example_params_decode(path: Path) -> None:
    for key, request in json.loads(path.read_bytes()).items():
        assert request["method"] in INPUT_REQUEST_METHODS, key
        assert_params_round_trip(request["method"], request.get("params"))


@pytest.mark.parametrize("path", _files_in(INPUT_RESPONSE_MAPS))
def test_input_responses_example_results_decode(path: Path) -> None:
    """Each response decodes as exactly one of the InputResponse result types."""
    for key, response in json.loads(path.read_bytes()).items():
        raw = json.dumps(response).encode()
        fits = []
        for tp in INPUT_RESPONSE_TYPES:
            try:
                msgspec.json.decode(raw, type=tp)
            except msgspec.ValidationError:
                continue
            fits.append(tp)
        assert len(fits) == 1, f"{key}: decodes as {fits}"
        assert_round_trip(raw, fits[0])


@pytest.mark.parametrize("path", _files_in({"InputRequiredResult"}))
def test_input_required_result_embedded_requests_decode(path: Path) -> None:
    """InputRequiredResult itself is NOT_MODELLED, but the requests it embeds are."""
    for key, request in json.loads(path.read_bytes()).get("inputRequests", {}).items():
        assert request["method"] in INPUT_REQUEST_METHODS, key
        assert_params_round_trip(request["method"], request.get("params"))

"""MCPServer.from_openapi against a real HTTP API: what the tools look like, and every
request the API received."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from msgspec import UNSET

from mcpkit import Client, MCPError, MCPServer
from mcpkit.protocol import types as t
from mcpkit.protocol.auth import Principal
from mcpkit.server.openapi import OpenAPIError, RouteMap
from mcpkit.testing import connect
from openapi_support import PETSTORE_YAML, PetAPI, pet_api, refs_in, shapes_document

ERAS = ["2026-07-28", "2025-11-25"]


def text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.fixture
async def api() -> Any:
    async with pet_api() as running:
        yield running


def petstore(api: PetAPI, **options: Any) -> MCPServer:
    return MCPServer.from_openapi(PETSTORE_YAML.replace("{port}", str(api.port)), **options)


@pytest.mark.parametrize("era", ERAS)
async def test_petstore_operations_are_tools_with_inlined_schemas(api: PetAPI, era: str) -> None:
    async with connect(petstore(api), protocol=era) as client:
        assert client.server_info is not None and client.server_info.name == "Petstore"
        assert client.instructions == "Pets, with tags."
        tools = {tool.name: tool for tool in (await client.list_tools())}
        assert sorted(tools) == ["createPet", "deletePet", "listPets", "showPetById"]
        assert refs_in([tool.input_schema for tool in tools.values()]) == []
        assert refs_in([tool.output_schema for tool in tools.values()]) == []

        listing = tools["listPets"]
        assert listing.title == "List pets" and listing.description == "List pets"
        assert listing.input_schema["properties"]["limit"] == {
            "type": "integer",
            "format": "int32",
            "minimum": 1,
            "maximum": 100,
        }
        assert listing.input_schema["properties"]["tags"]["description"] == "only pets with one of these tags"
        assert "required" not in listing.input_schema
        # A JSON array answer is wrapped: structured content is always an object.
        assert listing.output_schema is not UNSET and listing.output_schema["required"] == ["result"]
        assert listing.annotations is not UNSET and listing.annotations.read_only_hint is True

        create = tools["createPet"]
        assert create.input_schema["properties"] == {
            "name": {"type": "string", "examples": ["Rex"]},
            "tag": {"type": ["string", "null"]},
        }  # readOnly "id" is not sent in a request; 3.0's nullable and example translated
        assert create.input_schema["required"] == ["name"]
        assert tools["deletePet"].annotations.destructive_hint is True  # type: ignore[union-attr]
        show = tools["showPetById"]
        assert show.input_schema["required"] == ["petId"]
        assert show.input_schema["properties"]["petId"]["description"] == "the pet's id"


@pytest.mark.parametrize("era", ERAS)
async def test_calls_send_the_right_requests_and_answer_structured(api: PetAPI, era: str) -> None:
    async with connect(petstore(api), protocol=era) as client:
        created = await client.call_tool("createPet", {"name": "Rex", "tag": "dog"})
        assert created.is_error is not True
        assert created.structured_content == {"id": 1, "name": "Rex", "tag": "dog"}
        assert json.loads(text(created)) == created.structured_content
        seen = api.last()
        assert (seen.method, seen.path) == ("POST", "/v1/pets")
        assert seen.headers["content-type"] == "application/json"
        assert seen.json() == {"name": "Rex", "tag": "dog"}

        await client.call_tool("createPet", {"name": "Tom", "tag": "cat"})
        listed = await client.call_tool("listPets", {"limit": 5, "tags": ["dog", "cat"]})
        assert listed.structured_content == {
            "result": [{"id": 1, "name": "Rex", "tag": "dog"}, {"id": 2, "name": "Tom", "tag": "cat"}]
        }
        assert api.last().query == [("limit", "5"), ("tags", "dog"), ("tags", "cat")]

        shown = await client.call_tool("showPetById", {"petId": "2"})
        assert shown.structured_content == {"id": 2, "name": "Tom", "tag": "cat"}
        assert api.last().path == "/v1/pets/2"

        deleted = await client.call_tool("deletePet", {"petId": "2"})
        assert deleted.is_error is not True and api.last().method == "DELETE"


async def test_http_errors_and_bad_arguments_are_tool_errors(api: PetAPI) -> None:
    async with connect(petstore(api)) as client:
        missing = await client.call_tool("showPetById", {"petId": "42"})
        assert missing.is_error is True
        assert text(missing) == 'HTTP 404 Not Found: {"code":404,"message":"no pet 42"}'

        before = len(api.seen)
        unknown = await client.call_tool("listPets", {"limit": 1, "colour": "red"})
        assert unknown.is_error is True and "unknown argument(s) 'colour'" in text(unknown)
        absent = await client.call_tool("createPet", {"tag": "x"})
        assert absent.is_error is True and "missing required argument(s) 'name'" in text(absent)
        assert len(api.seen) == before  # refused before any request


async def test_a_path_argument_stays_one_segment(api: PetAPI) -> None:
    async with connect(petstore(api)) as client:
        for hostile in ("../admin", "..", "1?x=1", "1#frag", "a/b"):
            result = await client.call_tool("showPetById", {"petId": hostile})
            assert result.is_error is True
            assert api.last().path.startswith("/v1/pets/"), api.last().path
            assert api.last().query == []
        assert api.last().raw_path == "/v1/pets/a%2Fb"
        await client.call_tool("showPetById", {"petId": ".."})
        assert api.last().raw_path == "/v1/pets/%2E%2E"


async def test_header_cookie_deep_object_and_auth(api: PetAPI) -> None:
    seen_principals: list[Principal | None] = []

    def auth(principal: Principal | None) -> dict[str, str]:
        seen_principals.append(principal)
        return {"X-On-Behalf": "anonymous" if principal is None else principal.subject}

    server = MCPServer.from_openapi(
        shapes_document(api.port), headers={"Authorization": "Bearer k"}, auth=auth
    )
    async with connect(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools())}
        # "Authorization" as a header parameter is ignored (OpenAPI: "SHALL be ignored").
        assert sorted(tools["search"].input_schema["properties"]) == ["X-Trace", "filter", "ids", "session"]
        result = await client.call_tool(
            "search",
            {"X-Trace": "t-1", "session": "s1", "filter": {"colour": "red", "size": "L"}, "ids": [1, 2]},
        )
        assert result.is_error is not True
        seen = api.last()
        assert seen.headers["x-trace"] == "t-1"
        assert seen.headers["authorization"] == "Bearer k"
        assert seen.headers["x-on-behalf"] == "anonymous"
        assert seen.cookies == {"session": "s1"}
        assert seen.query == [("filter[colour]", "red"), ("filter[size]", "L"), ("ids", "1,2")]
        assert seen_principals == [None]

        smuggled = await client.call_tool("search", {"X-Trace": "a\r\nX-Evil: 1"})
        assert smuggled.is_error is True and "line break" in text(smuggled)


async def test_binary_answers_recursive_schemas_and_the_response_limit(api: PetAPI) -> None:
    server = MCPServer.from_openapi(shapes_document(api.port), max_response_bytes=100_000)
    async with connect(server) as client:
        photo = await client.call_tool("photo", {})
        assert isinstance(photo.content[0], t.ImageContent) and photo.content[0].mime_type == "image/png"

        tools = {tool.name: tool for tool in (await client.list_tools())}
        tree = tools["echoTree"]
        # Recursive: the one schema that keeps a $ref, to $defs at the root of the schema.
        assert tree.input_schema["properties"]["body"]["properties"]["children"]["items"] == {
            "$ref": "#/$defs/Node"
        }
        assert tree.input_schema["$defs"]["Node"]["properties"]["label"] == {"type": "string"}
        value = {"label": "a", "children": [{"label": "b", "children": []}]}
        echoed = await client.call_tool("echoTree", {"body": value})
        assert echoed.structured_content == value and api.last().json() == value

        fine = await client.call_tool("big", {"size": 50_000})
        assert fine.is_error is not True
        for gz in ("0", "1"):  # decoded size counts: a gzip bomb stops at the limit too
            too_big = await client.call_tool("big", {"size": 1_000_000, "gzip": gz})
            assert too_big.is_error is True and "max_response_bytes (100000)" in text(too_big)


@pytest.mark.parametrize("era", ERAS)
async def test_route_maps_make_resources_and_templates_and_exclude(api: PetAPI, era: str) -> None:
    maps = [
        RouteMap(kind="exclude", methods=["DELETE"]),
        RouteMap(kind="resource", methods=["GET"], pattern=r"^/pets"),
    ]
    server = petstore(api, route_maps=maps, names={"showPetById": "pet"})
    async with connect(server, protocol=era) as client:
        assert [tool.name for tool in (await client.list_tools())] == ["createPet"]
        resources = await client.list_resources()
        assert [(r.uri, r.name) for r in resources] == [("api://pets", "listPets")]
        templates = await client.list_resource_templates()
        assert [(x.uri_template, x.name) for x in templates] == [("api://pets/{petId}", "pet")]

        await client.call_tool("createPet", {"name": "Rex"})
        listing = await client.read_resource("api://pets")
        assert json.loads(listing.contents[0].text) == [{"id": 1, "name": "Rex", "tag": None}]  # type: ignore[union-attr]
        assert listing.contents[0].mime_type == "application/json"
        one = await client.read_resource("api://pets/1")
        assert json.loads(one.contents[0].text)["name"] == "Rex"  # type: ignore[union-attr]
        assert api.last().path == "/v1/pets/1"
        with pytest.raises(MCPError) as missing:
            await client.read_resource("api://pets/9")
        assert "api://pets/9" in missing.value.message


def test_documents_that_cannot_be_served_are_refused_clearly() -> None:
    with pytest.raises(OpenAPIError, match=r"only OpenAPI 3.0 and 3.1.*'2.0'"):
        MCPServer.from_openapi({"swagger": "2.0", "paths": {}})
    base = {"openapi": "3.1.0", "info": {"title": "x", "version": "1"}}
    with pytest.raises(OpenAPIError, match="no absolute server URL"):
        MCPServer.from_openapi({**base, "paths": {}})
    twice = {
        "/a": {"get": {"operationId": "same", "responses": {}}},
        "/b": {"get": {"operationId": "same", "responses": {}}},
    }
    with pytest.raises(OpenAPIError, match=r"GET /b and GET /a would both be named 'same'"):
        MCPServer.from_openapi({**base, "paths": twice}, base_url="http://127.0.0.1:1")
    # Renaming one of them resolves it.
    assert MCPServer.from_openapi(
        {**base, "paths": {"/a": twice["/a"]}}, base_url="http://127.0.0.1:1", names={"same": "other"}
    ).has_tool("other")
    external = {"/a": {"post": {"requestBody": {"$ref": "other.yaml#/Body"}, "responses": {}}}}
    with pytest.raises(OpenAPIError, match="only local \\$refs"):
        MCPServer.from_openapi({**base, "paths": external}, base_url="http://127.0.0.1:1")
    with pytest.raises(OpenAPIError, match="only GET operations can be resources: POST /a"):
        MCPServer.from_openapi(
            {**base, "paths": {"/a": {"post": {"responses": {}}}}},
            base_url="http://127.0.0.1:1",
            route_maps=[RouteMap(kind="resource")],
        )


async def test_an_unreachable_api_is_a_tool_error() -> None:
    server = MCPServer.from_openapi(PETSTORE_YAML.replace("{port}", "1"), timeout=5)
    async with connect(server) as client:
        result = await client.call_tool("listPets", {})
        assert result.is_error is True and text(result).startswith(
            "GET http://127.0.0.1:1/v1/pets failed: ConnectError"
        )


async def test_a_given_client_is_used_and_left_open(api: PetAPI) -> None:
    async with httpx.AsyncClient(headers={"X-Given": "yes"}) as http:
        server = petstore(api, client=http, base_url=api.base_url)
        async with connect(server) as client:
            await client.call_tool("listPets", {})
        assert api.last().headers["x-given"] == "yes"
        assert not http.is_closed


async def test_client_from_the_sdk_shaped_api_sees_the_same(api: PetAPI) -> None:
    async with connect(petstore(api)) as client:
        assert isinstance(client, Client)
        result = await client.call_tool("listPets", {})
        assert result.structured_content == {"result": []}

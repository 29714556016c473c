"""MCPServer.from_asgi: a FastAPI app with nested Pydantic models called in process, its
lifespan run with the server's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI, Header, HTTPException, Query
from pydantic import BaseModel, Field

from mcpkit import MCPServer
from mcpkit.server.openapi import OpenAPIError
from mcpkit.testing import connect
from openapi_support import refs_in

ERAS = ["2026-07-28", "2025-11-25"]


class Address(BaseModel):
    street: str
    city: str
    country: str = "NL"


class Owner(BaseModel):
    name: str
    address: Address


class Tag(BaseModel):
    label: str = Field(max_length=20)


class NewPet(BaseModel):
    name: str
    owner: Owner
    tags: list[Tag] = []


class Pet(NewPet):
    id: int


def build_app(events: list[str]) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("startup")
        app.state.pets = {}
        yield
        events.append("shutdown")

    app = FastAPI(title="Clinic", version="3.1.4", lifespan=lifespan)

    def api_key(x_api_key: Annotated[str, Header()]) -> str:
        if x_api_key != "s3cret":
            raise HTTPException(status_code=401, detail="bad key")
        return x_api_key

    @app.post("/owners/{owner_id}/pets", operation_id="add_pet", dependencies=[Depends(api_key)])
    async def add_pet(
        owner_id: int,
        pet: NewPet,
        notify: Annotated[bool, Query()] = False,
        x_request_id: Annotated[str | None, Header()] = None,
    ) -> Pet:
        created = Pet(id=len(app.state.pets) + 1, **pet.model_dump())
        app.state.pets[created.id] = created
        events.append(f"add owner={owner_id} notify={notify} request={x_request_id}")
        return created

    @app.get("/pets/{pet_id}", operation_id="get_pet")
    async def get_pet(pet_id: int) -> Pet:
        if pet_id not in app.state.pets:
            raise HTTPException(status_code=404, detail=f"no pet {pet_id}")
        pet: Pet = app.state.pets[pet_id]
        return pet

    return app


@pytest.mark.parametrize("era", ERAS)
async def test_a_fastapi_app_in_process(era: str) -> None:
    events: list[str] = []
    server = MCPServer.from_asgi(build_app(events), headers={"X-API-Key": "s3cret"})
    assert events == []
    async with connect(server, protocol=era) as client:
        assert events == ["startup"]  # the app's lifespan ran before the first call
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert sorted(tools) == ["add_pet", "get_pet"]
        add = tools["add_pet"]
        # Nested models arrive inlined: a host that drops $defs still sees every field.
        assert refs_in(add.input_schema) == [] and "$defs" not in add.input_schema
        props = add.input_schema["properties"]
        # The configured X-API-Key is not an argument: the model never supplies nor sees it.
        assert sorted(props) == ["name", "notify", "owner", "owner_id", "tags", "x-request-id"]
        assert props["owner"]["properties"]["address"]["properties"]["city"]["type"] == "string"
        assert props["tags"]["items"]["properties"]["label"]["maxLength"] == 20
        assert sorted(add.input_schema["required"]) == ["name", "owner", "owner_id"]
        assert refs_in(add.output_schema) == []

        pet = {"name": "Rex", "owner": {"name": "Ann", "address": {"street": "Dam 1", "city": "Amsterdam"}}}
        result = await client.call_tool(
            "add_pet",
            {"owner_id": 7, "notify": True, "x-request-id": "r-9", "tags": [{"label": "good"}], **pet},
        )
        assert result.is_error is not True
        assert result.structured_content == {
            "id": 1,
            "name": "Rex",
            "owner": {"name": "Ann", "address": {"street": "Dam 1", "city": "Amsterdam", "country": "NL"}},
            "tags": [{"label": "good"}],
        }
        assert events[-1] == "add owner=7 notify=True request=r-9"
        got = await client.call_tool("get_pet", {"pet_id": 1})
        assert got.structured_content == result.structured_content

        invalid = await client.call_tool("add_pet", {"owner_id": 7, "name": "Rex", "owner": {"name": "Ann"}})
        assert invalid.is_error is True
        assert invalid.content[0].text.startswith("HTTP 422 Unprocessable")  # type: ignore[union-attr]
        assert "address" in invalid.content[0].text  # type: ignore[union-attr]
        missing = await client.call_tool("get_pet", {"pet_id": 5})
        assert missing.is_error is True and "no pet 5" in missing.content[0].text  # type: ignore[union-attr]
    assert events[-1] == "shutdown"


async def test_credentials_come_from_configuration_only() -> None:
    events: list[str] = []
    server = MCPServer.from_asgi(build_app(events))  # no key configured
    async with connect(server) as client:
        pet = {"name": "Rex", "owner": {"name": "Ann", "address": {"street": "s", "city": "c"}}}
        refused = await client.call_tool("add_pet", {"owner_id": 1, "x-api-key": "guess", **pet})
        assert refused.is_error is True
        assert refused.content[0].text == 'HTTP 401 Unauthorized: {"detail":"bad key"}'  # type: ignore[union-attr]


def test_an_app_without_a_document_is_refused() -> None:
    async def bare(scope: Any, receive: Any, send: Any) -> None:  # a plain ASGI app
        raise AssertionError("not called")

    with pytest.raises(OpenAPIError, match="no openapi\\(\\) method"):
        MCPServer.from_asgi(bare)

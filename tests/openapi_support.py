"""A pet-store HTTP API on a real socket that records every request it receives, and
the OpenAPI documents (of different shapes) that describe it."""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcpkit.testing._uvicorn import bound_port, start_server, stop_server


@dataclass
class Seen:
    method: str
    path: str
    raw_path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    cookies: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class PetAPI:
    """The API's state and what it received."""

    pets: dict[int, dict[str, Any]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def last(self) -> Seen:
        return self.seen[-1]

    def app(self) -> Starlette:
        async def record(request: Request) -> None:
            self.seen.append(
                Seen(
                    request.method,
                    request.url.path,
                    request.scope["raw_path"].decode(),
                    list(request.query_params.multi_items()),
                    {k.lower(): v for k, v in request.headers.items()},
                    dict(request.cookies),
                    await request.body(),
                )
            )

        async def pets(request: Request) -> Response:
            await record(request)
            if request.method == "POST":
                body = json.loads(await request.body())
                if not isinstance(body.get("name"), str):
                    return JSONResponse({"code": 400, "message": "name is required"}, status_code=400)
                pet = {"id": len(self.pets) + 1, "name": body["name"], "tag": body.get("tag")}
                self.pets[pet["id"]] = pet
                return JSONResponse(pet, status_code=201)
            limit = int(request.query_params.get("limit", "100"))
            tags = request.query_params.getlist("tags")
            found = [p for p in self.pets.values() if not tags or p["tag"] in tags]
            return JSONResponse(found[:limit])

        async def pet(request: Request) -> Response:
            await record(request)
            raw = request.path_params["pet_id"]
            pet = self.pets.get(int(raw)) if raw.isdigit() else None
            if pet is None:
                return JSONResponse({"code": 404, "message": f"no pet {raw}"}, status_code=404)
            if request.method == "DELETE":
                del self.pets[pet["id"]]
                return Response(status_code=204)
            return JSONResponse(pet)

        async def search(request: Request) -> Response:
            await record(request)
            return JSONResponse({"ok": True})

        async def photo(request: Request) -> Response:
            await record(request)
            return Response(b"\x89PNG\r\n\x1a\nfake", media_type="image/png")

        async def big(request: Request) -> Response:
            await record(request)
            size = int(request.query_params["size"])
            data = b"[" + b"0," * (size // 2) + b"0]"
            if request.query_params.get("gzip") == "1":
                return Response(
                    gzip.compress(data),
                    headers={"content-encoding": "gzip", "content-type": "application/json"},
                )
            return Response(data, media_type="application/json")

        async def tree(request: Request) -> Response:
            await record(request)
            return JSONResponse(json.loads(await request.body()))

        return Starlette(
            routes=[
                Route("/v1/pets", pets, methods=["GET", "POST"]),
                Route("/v1/pets/{pet_id:path}", pet, methods=["GET", "DELETE"]),
                Route("/v1/search", search, methods=["GET"]),
                Route("/v1/photo", photo, methods=["GET"]),
                Route("/v1/big", big, methods=["GET"]),
                Route("/v1/tree", tree, methods=["POST"]),
            ]
        )


@contextlib.asynccontextmanager
async def pet_api() -> AsyncIterator[PetAPI]:
    """The pet API under uvicorn on 127.0.0.1 (a free port), in this event loop."""
    api = PetAPI()
    config = uvicorn.Config(api.app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server, task = await start_server(config)
    api.port = bound_port(server)
    try:
        yield api
    finally:
        await stop_server(server, task)


#: A Petstore-style OpenAPI 3.0 document in YAML: $refs, nullable, readOnly, arrays in a query.
PETSTORE_YAML = """
openapi: 3.0.3
info:
  title: Petstore
  version: 1.2.0
  description: Pets, with tags.
servers:
  - url: http://127.0.0.1:{port}/v1
paths:
  /pets:
    get:
      operationId: listPets
      summary: List pets
      tags: [pets]
      parameters:
        - $ref: '#/components/parameters/Limit'
        - name: tags
          in: query
          description: only pets with one of these tags
          schema: {type: array, items: {type: string}}
      responses:
        '200':
          description: the pets
          content:
            application/json:
              schema: {type: array, items: {$ref: '#/components/schemas/Pet'}}
    post:
      operationId: createPet
      summary: Create a pet
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Pet'}
      responses:
        '201':
          description: created
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Pet'}
        default:
          description: error
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Error'}
  /pets/{petId}:
    parameters:
      - name: petId
        in: path
        required: true
        description: the pet's id
        schema: {type: string}
    get:
      operationId: showPetById
      summary: Info for a specific pet
      responses:
        '200':
          description: the pet
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Pet'}
    delete:
      operationId: deletePet
      responses:
        '204': {description: deleted}
components:
  parameters:
    Limit:
      name: limit
      in: query
      required: false
      schema: {type: integer, format: int32, minimum: 1, exclusiveMinimum: false, maximum: 100}
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        id: {type: integer, format: int64, readOnly: true}
        name: {type: string, example: Rex}
        tag: {type: string, nullable: true}
    Error:
      type: object
      properties:
        code: {type: integer}
        message: {type: string}
"""


def shapes_document(port: int) -> dict[str, Any]:
    """An OpenAPI 3.1 document (JSON) with header, cookie and deepObject parameters, a
    recursive schema, binary and large answers."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Shapes", "version": "1"},
        "servers": [{"url": f"http://127.0.0.1:{port}/v1"}],
        "paths": {
            "/search": {
                "get": {
                    "operationId": "search",
                    "parameters": [
                        {"name": "X-Trace", "in": "header", "required": True, "schema": {"type": "string"}},
                        {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                        {
                            "name": "filter",
                            "in": "query",
                            "style": "deepObject",
                            "schema": {"type": "object", "additionalProperties": {"type": "string"}},
                        },
                        {
                            "name": "ids",
                            "in": "query",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "integer"}},
                        },
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/photo": {"get": {"operationId": "photo", "responses": {"200": {"description": "a picture"}}}},
            "/big": {
                "get": {
                    "operationId": "big",
                    "parameters": [
                        {"name": "size", "in": "query", "required": True, "schema": {"type": "integer"}},
                        {"name": "gzip", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "numbers"}},
                }
            },
            "/tree": {
                "post": {
                    "operationId": "echoTree",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "the same tree",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                            },
                        }
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                    },
                }
            }
        },
    }


def refs_in(value: Any) -> list[str]:
    """Every ``$ref`` inside ``value``."""
    if isinstance(value, dict):
        found = [value["$ref"]] if "$ref" in value else []
        return found + [r for v in value.values() for r in refs_in(v)]
    if isinstance(value, list):
        return [r for v in value for r in refs_in(v)]
    return []

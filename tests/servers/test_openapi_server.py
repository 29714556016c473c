"""``mcpkit serve openapi SPEC``: a real process over stdio and Streamable HTTP, against a real API."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client
from openapi_support import PETSTORE_YAML, PetAPI, pet_api


@pytest.fixture
async def api() -> AsyncIterator[PetAPI]:
    async with pet_api() as running:
        yield running


@pytest.fixture
def spec(tmp_path: Path, api: PetAPI) -> Path:
    path = tmp_path / "petstore.yaml"
    # The document names no usable server: --base-url says where the API is.
    path.write_text(PETSTORE_YAML.replace("http://127.0.0.1:{port}/v1", "/v1"))
    return path


def argv(spec: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit", "serve", "openapi", str(spec), *options]


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_over_stdio(api: PetAPI, spec: Path, protocol: str, subprocess_env: dict[str, str]) -> None:
    command = argv(spec, "--base-url", api.base_url, "--header", "X-Api-Key: k1", "--exclude", "^/pets/\\{")
    async with Client(command, env=subprocess_env, protocol=protocol) as client:  # type: ignore[arg-type]
        assert sorted(tool.name for tool in await client.list_tools()) == ["createPet", "listPets"]
        created = await client.call_tool("createPet", {"name": "Rex"})
        assert created.structured_content == {"id": 1, "name": "Rex", "tag": None}
        assert api.last().headers["x-api-key"] == "k1"


async def test_read_only_and_resources(api: PetAPI, spec: Path, subprocess_env: dict[str, str]) -> None:
    command = argv(spec, "--base-url", api.base_url, "--read-only", "--resources", "^/pets/")
    async with Client(command, env=subprocess_env) as client:  # type: ignore[arg-type]
        assert [tool.name for tool in await client.list_tools()] == ["listPets"]
        templates = await client.list_resource_templates()
        assert [x.uri_template for x in templates] == ["api://pets/{petId}"]


async def test_over_http(api: PetAPI, spec: Path, subprocess_env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv(spec, "--base-url", api.base_url, "--transport", "http", "--port", "0"),
        env=subprocess_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        match = re.search(r"serving over Streamable HTTP at (http://127\.0\.0\.1:\d+/mcp)", line)
        assert match is not None, line
        async with Client(match.group(1)) as client:
            result: Any = await client.call_tool("listPets", {"limit": 3})
            assert result.structured_content == {"result": []}
            assert api.last().query == [("limit", "3")]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


async def test_a_bad_document_is_one_line(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    bad = tmp_path / "swagger.json"
    bad.write_text('{"swagger": "2.0", "paths": {}}')
    proc = await asyncio.create_subprocess_exec(
        *argv(bad), env=subprocess_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and out == b""
    assert err.decode().strip() == (
        f"mcpkit serve openapi: cannot serve {bad}: only OpenAPI 3.0 and 3.1 documents are supported "
        "(this one says '2.0'); convert a Swagger 2.0 document first"
    )

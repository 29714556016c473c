"""The seed examples, run unchanged as real subprocesses.

The two seed servers (``examples/word_counter/server.py``, ``examples/weather/server.py``)
are driven by mcpkit's ``Client`` and by the official SDK's client, in both eras; the
seed client (``examples/weather/client.py``) and the ``make run`` demo
(``examples/demo.py``) run as scripts and their exact output is checked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp
import mcp_types
import pytest

from mcpkit import Client
from mcpkit.protocol import types as t

pytestmark = pytest.mark.timeout(20)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORD_COUNTER = EXAMPLES / "word_counter" / "server.py"
WEATHER = EXAMPLES / "weather" / "server.py"

REVIEW_TEXT = "请审查以下代码，按严重程度分级指出问题:\n\n"

MCPKIT_PROTOCOLS = {"legacy": False, "modern": True, "auto": True}
OFFICIAL_MODES = {"legacy": "2025-11-25", "auto": "2026-07-28", "2026-07-28": "2026-07-28"}


# -- one API over both clients ---------------------------------------------------


class Driver:
    """The few calls these tests need, over either client, returning plain values."""

    async def tools(self) -> list[tuple[str, str, dict[str, Any]]]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], bool]:
        """(texts of the content blocks, is_error)."""
        raise NotImplementedError

    async def resources(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    async def read(self, uri: str) -> list[str]:
        raise NotImplementedError

    async def prompts(self) -> list[tuple[str, list[tuple[str, bool]]]]:
        raise NotImplementedError

    async def prompt(self, name: str, arguments: dict[str, str]) -> list[tuple[str, str]]:
        raise NotImplementedError


class McpkitDriver(Driver):
    def __init__(self, client: Client) -> None:
        self.client = client

    async def tools(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(x.name, str(x.description), x.input_schema) for x in await self.client.list_tools()]

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], bool]:
        result = await self.client.call_tool(name, arguments)
        texts = [block.text for block in result.content if isinstance(block, t.TextContent)]
        assert len(texts) == len(result.content)
        return texts, result.is_error is True

    async def resources(self) -> list[tuple[str, str]]:
        return [(r.uri, r.name) for r in await self.client.list_resources()]

    async def read(self, uri: str) -> list[str]:
        contents = (await self.client.read_resource(uri)).contents
        assert all(c.uri == uri for c in contents)
        return [c.text for c in contents if isinstance(c.text, str)]

    async def prompts(self) -> list[tuple[str, list[tuple[str, bool]]]]:
        return [
            (p.name, [(a.name, a.required is True) for a in p.arguments or []])  # type: ignore[union-attr]
            for p in await self.client.list_prompts()
        ]

    async def prompt(self, name: str, arguments: dict[str, str]) -> list[tuple[str, str]]:
        result = await self.client.get_prompt(name, arguments)
        return [(m.role, m.content.text) for m in result.messages]  # type: ignore[union-attr]


class OfficialDriver(Driver):
    def __init__(self, client: mcp.Client) -> None:
        self.client = client

    async def tools(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(x.name, str(x.description), x.input_schema) for x in (await self.client.list_tools()).tools]

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[list[str], bool]:
        result = await self.client.call_tool(name, arguments)
        texts = [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]
        assert len(texts) == len(result.content)
        return texts, result.is_error is True

    async def resources(self) -> list[tuple[str, str]]:
        return [(str(r.uri), r.name) for r in (await self.client.list_resources()).resources]

    async def read(self, uri: str) -> list[str]:
        contents = (await self.client.read_resource(uri)).contents
        assert all(str(c.uri) == uri for c in contents)
        return [c.text for c in contents if isinstance(c, mcp_types.TextResourceContents)]

    async def prompts(self) -> list[tuple[str, list[tuple[str, bool]]]]:
        return [
            (p.name, [(a.name, a.required is True) for a in p.arguments or []])
            for p in (await self.client.list_prompts()).prompts
        ]

    async def prompt(self, name: str, arguments: dict[str, str]) -> list[tuple[str, str]]:
        result = await self.client.get_prompt(name, arguments)
        return [(m.role, m.content.text) for m in result.messages]  # type: ignore[union-attr]


CLIENTS = [f"mcpkit-{p}" for p in MCPKIT_PROTOCOLS] + [f"official-{m}" for m in OFFICIAL_MODES]


@asynccontextmanager
async def drive(which: str, server: Path, env: dict[str, str]) -> AsyncIterator[Driver]:
    kind, _, mode = which.partition("-")
    if kind == "mcpkit":
        async with Client([sys.executable, str(server)], protocol=mode, env=env, timeout=10) as client:
            assert client.is_modern is MCPKIT_PROTOCOLS[mode]
            yield McpkitDriver(client)
    else:
        params = mcp.StdioServerParameters(command=sys.executable, args=[str(server)], env=env)
        async with mcp.Client(params, mode=mode, read_timeout_seconds=10) as official:
            assert official.protocol_version == OFFICIAL_MODES[mode]
            yield OfficialDriver(official)


# -- word_counter ----------------------------------------------------------------


@pytest.mark.parametrize("which", CLIENTS)
async def test_word_counter(which: str, subprocess_env: dict[str, str]) -> None:
    async with drive(which, WORD_COUNTER, subprocess_env) as server:
        assert await server.tools() == [
            (
                "count_words",
                "Count the number of words in a text string.",
                {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            )
        ]
        assert await server.call("count_words", {"text": "a b c"}) == (["Word count: 3"], False)
        assert await server.call("count_words", {"text": "  hello \n\t world  "}) == (
            ["Word count: 2"],
            False,
        )
        assert await server.call("count_words", {"text": ""}) == (["Word count: 0"], False)
        assert await server.call("count_words", {"text": "你好 世界 🌍"}) == (["Word count: 3"], False)

        assert await server.resources() == [("info://server", "server_info")]
        before = time.time()
        [text] = await server.read("info://server")
        info = json.loads(text)
        assert set(info) == {"name", "timestamp"}
        assert info["name"] == "word-counter"
        assert isinstance(info["timestamp"], float)
        assert before - 5 <= info["timestamp"] <= time.time() + 5

        assert await server.prompts() == []


# -- weather ---------------------------------------------------------------------


@pytest.mark.parametrize("which", CLIENTS)
async def test_weather(which: str, subprocess_env: dict[str, str]) -> None:
    async with drive(which, WEATHER, subprocess_env) as server:
        assert await server.tools() == [
            (
                "get_weather",
                "获取指定城市的天气",
                {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            ),
            (
                "get_forecast",
                "获取未来几天的天气预报",
                {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
                    "required": ["city"],
                },
            ),
        ]
        assert await server.call("get_weather", {"city": "北京"}) == (["北京: 晴 25°C"], False)
        assert await server.call("get_weather", {"city": "Paris"}) == (["Paris: 晴 25°C"], False)
        assert await server.call("get_forecast", {"city": "北京"}) == (["北京 未来 3 天: 多云转晴"], False)
        assert await server.call("get_forecast", {"city": "上海", "days": 5}) == (
            ["上海 未来 5 天: 多云转晴"],
            False,
        )

        assert await server.resources() == [("config://app", "get_config")]
        assert await server.read("config://app") == ['{"theme": "dark", "lang": "zh"}']

        assert await server.prompts() == [("code_review", [("code", True)])]
        assert await server.prompt("code_review", {"code": "print('hi')"}) == [
            ("user", REVIEW_TEXT + "print('hi')")
        ]


# -- the seed client and the demo, as scripts --------------------------------------


def run_script(script: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, timeout=15, check=False
    )


def test_weather_client_script(subprocess_env: dict[str, str]) -> None:
    # client.py spawns `python server.py`: the venv's python, found first on PATH, in its folder.
    weather = EXAMPLES / "weather"
    done = run_script(weather / "client.py", subprocess_env, weather)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode("utf-8") == "['get_weather', 'get_forecast']\n北京: 晴 25°C\n"


DEMO_LINES = [
    re.compile(r"connected to weather-server in \d+ ms, protocol 2026-07-28 \(modern era\)"),
    "tool   get_weather: 获取指定城市的天气  "
    "schema={'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}",
    "tool   get_forecast: 获取未来几天的天气预报  "
    "schema={'type': 'object', 'properties': {'city': {'type': 'string'}, "
    "'days': {'type': 'integer', 'default': 3}}, 'required': ['city']}",
    "call   get_weather({'city': '北京'}) -> 北京: 晴 25°C",
    "call   get_forecast({'city': 'Paris', 'days': 5}) -> Paris 未来 5 天: 多云转晴",
    'read   config://app -> {"theme": "dark", "lang": "zh"}',
    "prompt code_review -> \"请审查以下代码，按严重程度分级指出问题:\\n\\nprint('hi')\"",
    "legacy 2025-11-25: get_weather -> Tokyo: 晴 25°C",
]


def test_demo_script(subprocess_env: dict[str, str]) -> None:
    done = run_script(EXAMPLES / "demo.py", subprocess_env, EXAMPLES.parent)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    lines = done.stdout.decode("utf-8").splitlines()
    assert len(lines) == len(DEMO_LINES), lines
    for line, expected in zip(lines, DEMO_LINES, strict=True):
        if isinstance(expected, re.Pattern):
            assert expected.fullmatch(line), line
        else:
            assert line == expected

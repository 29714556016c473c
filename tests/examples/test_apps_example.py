"""examples/apps: the dice server with its view, run as a real stdio process in both eras."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcpkit import Client
from mcpkit.protocol.apps import APP_MIME_TYPE, APPS_EXTENSION, visible_to

SERVER = Path(__file__).resolve().parents[2] / "examples" / "apps" / "server.py"

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_the_dice_server_and_its_view(era: str) -> None:
    async with Client([sys.executable, str(SERVER)], protocol=era) as client:
        extensions = client.server_capabilities.extensions  # type: ignore[union-attr]
        assert APPS_EXTENSION in extensions  # type: ignore[operator]
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["roll_dice"].meta == {"ui": {"resourceUri": "ui://dice/roller.html"}}
        assert visible_to(tools["roll_dice"].meta, "model")
        assert not visible_to(tools["summarize_rolls"].meta, "model")
        assert visible_to(tools["summarize_rolls"].meta, "app")

        view = (await client.read_resource("ui://dice/roller.html")).contents[0]
        assert view.mime_type == APP_MIME_TYPE
        assert isinstance(view.text, str) and "ui/initialize" in view.text
        assert "src=" not in view.text and "http" not in view.text.replace("http-equiv", "")  # no CDN

        rolled = await client.call_tool("roll_dice", {"count": 5, "sides": 8})
        data = rolled.structured_content
        assert isinstance(data, dict) and len(data["rolls"]) == 5 and data["sides"] == 8
        assert all(1 <= n <= 8 for n in data["rolls"]) and data["total"] == sum(data["rolls"])
        summary = await client.call_tool("summarize_rolls", {"rolls": [1, 2, 6]})
        assert summary.structured_content == {"count": 3, "mean": 3.0, "min": 1, "max": 6}
        refused = await client.call_tool("roll_dice", {"count": 50})
        assert refused.is_error

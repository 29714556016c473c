"""An MCP Apps example: a tool with an interactive view (io.modelcontextprotocol/ui).

``roll_dice`` answers with text (for hosts without MCP Apps) and structured content that
its view, ``ui://dice/roller.html`` (``roller.html`` beside this file: plain HTML and
JavaScript, no CDN, no build), renders. The view's "Summarize" button calls
``summarize_rolls`` through the host; that tool is for views only (``visibility=["app"]``).

Run it in the Inspector: ``mcpkit inspect examples/apps/server.py``, pick ``roll_dice``,
call it, and the view renders under the result.
"""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import TypedDict

from mcpkit import MCPServer


class Roll(TypedDict):
    rolls: list[int]
    sides: int
    total: int


class Summary(TypedDict):
    count: int
    mean: float
    min: int
    max: int


server = MCPServer("dice-app", version="1.0.0")

# The view first: a tool may only be bound to a view the server has declared.
server.add_ui_resource(
    "ui://dice/roller.html",
    path=Path(__file__).with_name("roller.html"),
    title="Dice roller",
    description="Shows the dice a roll_dice call threw, and summarizes them on request.",
    prefers_border=True,
)


@server.tool(ui="ui://dice/roller.html")
def roll_dice(count: int = 3, sides: int = 6) -> Roll:
    """Throw `count` dice with `sides` sides each."""
    if not 1 <= count <= 20 or not 2 <= sides <= 100:
        raise ValueError("count is 1 to 20 and sides 2 to 100")
    rolls = [random.randint(1, sides) for _ in range(count)]
    return {"rolls": rolls, "sides": sides, "total": sum(rolls)}


@server.tool(ui="ui://dice/roller.html", visibility=["app"])
def summarize_rolls(rolls: list[int]) -> Summary:
    """Summarize a list of dice (for the view's button; hidden from the model)."""
    if not rolls:
        raise ValueError("no rolls to summarize")
    return {"count": len(rolls), "mean": statistics.fmean(rolls), "max": max(rolls), "min": min(rolls)}


if __name__ == "__main__":
    server.run()

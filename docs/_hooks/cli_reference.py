"""MkDocs hook: the CLI reference is generated from ``mcpkit.cli.main.build_parser()``.

A page containing the line ``<!-- cli-reference -->`` gets, in its place, the help
of ``mcpkit`` and of every subcommand (recursively), so the reference cannot drift
from the argument parser.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.extend(action.choices.items())
    return found


def render(parser: argparse.ArgumentParser, prog: str = "mcpkit", level: int = 2) -> str:
    """Markdown for ``parser`` and its subcommands."""
    os.environ["COLUMNS"] = "100"
    parts = [f"{'#' * level} `{prog}`\n", "```text", parser.format_help().rstrip(), "```\n"]
    for name, sub in _subcommands(parser):
        parts.append(render(sub, f"{prog} {name}", min(level + 1, 4)))
    return "\n".join(parts)


def cli_markdown() -> str:
    from mcpkit.cli.main import build_parser

    return render(build_parser())


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_markdown())

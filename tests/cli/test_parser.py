"""The ``mcpkit`` argument parser, pinned: every command, option, default, choice and help line.

``parser_snapshot.json`` was written from the parser as it stood before
``build_parser`` was split into a function per command; a change to the command
line shows up here. To change it on purpose, regenerate the file::

    python tests/cli/test_parser.py > tests/cli/parser_snapshot.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit.cli.main import build_parser

SNAPSHOT = Path(__file__).with_name("parser_snapshot.json")


def _value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    if callable(value):
        # Handlers are closures over (module, name) or plain functions.
        cells = [c.cell_contents for c in getattr(value, "__closure__", None) or ()]
        return {
            "callable": getattr(value, "__qualname__", repr(value)),
            "closure": [_value(c) for c in cells],
        }
    return repr(value)


def _action(action: argparse.Action) -> dict[str, Any]:
    return {
        "class": type(action).__name__,
        "option_strings": list(action.option_strings),
        "dest": action.dest,
        "nargs": action.nargs,
        "const": _value(action.const),
        "default": _value(action.default),
        "type": getattr(action.type, "__name__", None),
        "choices": None if action.choices is None else sorted(action.choices),
        "required": action.required,
        "help": action.help,
        "metavar": _value(action.metavar),
    }


def _walk(parser: argparse.ArgumentParser, name: str, out: dict[str, Any]) -> None:
    actions = [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]
    entry: dict[str, Any] = {
        "class": type(parser).__name__,
        "prog": parser.prog,
        "usage": parser.usage,
        "description": parser.description,
        "epilog": parser.epilog,
        "formatter": parser.formatter_class.__name__,
        "defaults": {k: _value(v) for k, v in sorted(parser._defaults.items())},
        "actions": [_action(a) for a in actions],
    }
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            entry["subcommands"] = {
                "action": _action(action),
                "parser_class": action._parser_class.__name__,
                "listed": [(c.dest, c.help) for c in action._choices_actions],
            }
            for sub_name, sub in action.choices.items():
                _walk(sub, f"{name} {sub_name}", out)
    out[name] = entry


def snapshot() -> dict[str, Any]:
    out: dict[str, Any] = {}
    _walk(build_parser(), "mcpkit", out)
    return dict(sorted(out.items()))


def test_the_commands_are_as_pinned() -> None:
    pinned = json.loads(SNAPSHOT.read_text())
    current = json.loads(json.dumps(snapshot()))
    assert sorted(current) == sorted(pinned), "commands were added or removed"
    for name in pinned:
        assert current[name] == pinned[name], name


def test_the_shared_client_options() -> None:
    """list, call, read and prompt take the same connection options; inspect takes the first four."""
    parsers = snapshot()
    full = ["--config", "--protocol", "-H", "--header", "-e", "--env", "--transport", "--timeout"]
    full += ["-v", "--verbose", "--json"]
    for name in ("list", "call", "read", "prompt"):
        strings = [s for a in parsers[f"mcpkit {name}"]["actions"] for s in a["option_strings"]]
        assert all(s in strings for s in full), name
    inspect = [s for a in parsers["mcpkit inspect"]["actions"] for s in a["option_strings"]]
    assert "--transport" not in inspect and "--json" not in inspect
    assert all(s in inspect for s in full[:6])


@pytest.mark.parametrize("name", sorted(snapshot()))
def test_every_help_renders(name: str) -> None:
    parser = build_parser()
    words = name.split()[1:]
    for word in words:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    text = parser.format_help()
    assert text.startswith("usage: ")
    for action in parser._actions:
        for option in action.option_strings:
            assert option in text


if __name__ == "__main__":
    json.dump(snapshot(), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")

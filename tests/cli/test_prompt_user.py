"""The terminal form of ``mcpkit call`` (``mcpkit.cli._prompt_user``), with scripted answers.

The whole path (a real terminal, a real server, both eras) is in test_cli_findings.py;
this pins the parts a terminal test would make slow to cover: every field kind of the
elicitation schema (client/elicitation "Requested Schema"), URL mode, and that the
deadline stops while the user answers.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterable
from typing import Any

import msgspec
import pytest

from mcpkit.cli._output import Console
from mcpkit.cli._prompt_user import FormField, TerminalAsker, form_fields
from mcpkit.protocol import types as t


def field(schema: dict[str, Any], required: bool = False) -> FormField:
    return FormField.of("f", schema, required)


def test_strings_check_length_and_format() -> None:
    f = field({"type": "string", "minLength": 2, "maxLength": 4})
    assert f.describe() == "text, 2 to 4 characters"
    assert f.parse("abc") == "abc"
    for bad in ("a", "abcde"):
        with pytest.raises(ValueError):
            f.parse(bad)
    email = field({"type": "string", "format": "email"})
    assert email.parse("a@b.io") == "a@b.io"
    with pytest.raises(ValueError, match="email"):
        email.parse("nope")
    date = field({"type": "string", "format": "date"})
    assert date.describe() == "date YYYY-MM-DD" and date.parse("2026-07-28") == "2026-07-28"
    with pytest.raises(ValueError, match="date"):
        date.parse("28/07/2026")
    uri = field({"type": "string", "format": "uri"})
    with pytest.raises(ValueError, match="URI"):
        uri.parse("example.com")
    assert field({"type": "string", "format": "date-time"}).parse("2026-07-28T12:00:00Z")


def test_numbers_check_kind_and_bounds() -> None:
    n = field({"type": "integer", "minimum": 1, "maximum": 10})
    assert n.describe() == "integer, 1 to 10"
    assert n.parse(" 7 ") == 7
    for bad in ("0", "11", "2.5", "x"):
        with pytest.raises(ValueError):
            n.parse(bad)
    x = field({"type": "number", "minimum": 0})
    assert x.describe() == "number, at least 0"
    assert x.parse("2.5") == 2.5 and x.parse("3") == 3


def test_booleans() -> None:
    b = field({"type": "boolean", "default": True})
    assert b.describe() == "y/n" and b.show(True) == "y"
    assert [b.parse(w) for w in ("y", "YES", "true", "n", "off")] == [True, True, True, False, False]
    with pytest.raises(ValueError):
        b.parse("maybe")


def test_single_select_enums() -> None:
    plain = field({"type": "string", "enum": ["red", "green"]})
    assert plain.kind == "enum" and plain.describe() == "1 red, 2 green"
    assert plain.parse("2") == "green" and plain.parse("red") == "red"
    with pytest.raises(ValueError):
        plain.parse("3")
    titled = field({"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0"}]})
    assert titled.describe() == "1 Red, 2 #0f0"
    assert titled.parse("red") == "#f00" and titled.show("#f00") == "Red"
    legacy = field({"type": "string", "enum": ["a", "b"], "enumNames": ["Alpha", "Beta"]})
    assert legacy.parse("beta") == "b"


def test_multi_select_enums() -> None:
    multi = field(
        {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
        }
    )
    assert multi.kind == "multi" and "comma-separated" in multi.describe()
    assert multi.parse("1, green") == ["r", "g"]
    assert multi.show(["r", "g"]) == "Red, Green"
    with pytest.raises(ValueError, match="at least 1"):
        multi.parse("")
    plain = field({"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 2})
    with pytest.raises(ValueError, match="at most 2"):
        plain.parse("a,b,c")


def test_form_fields_keep_the_schema_order_and_required() -> None:
    props = {"b": {"type": "string"}, "a": {"type": "integer"}}
    fields = form_fields({"type": "object", "properties": props, "required": ["a"]})
    assert [(f.name, f.required) for f in fields] == [("b", False), ("a", True)]
    assert form_fields(None) == [] and form_fields({"type": "object"}) == []


# -- the dialogue, with scripted answers ----------------------------------------------------


def asker(answers: Iterable[str | None]) -> tuple[TerminalAsker, io.StringIO]:
    lines = iter(answers)

    async def read() -> str | None:
        return next(lines)

    err = io.StringIO()
    console = Console(stdout=io.StringIO(), stderr=err, environ={})
    ask = TerminalAsker(console, reader=read)
    ask.server = "demo"
    return ask, err


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "n": {"type": "integer", "default": 3}},
    "required": ["name"],
}


async def test_form_required_field_is_asked_again_and_defaults_are_kept() -> None:
    ask, err = asker(["", "", "Ada", "", "s"])
    result = await ask(t.ElicitParams(message="Who?", requested_schema=SCHEMA))
    assert result == t.ElicitResult(action="accept", content={"name": "Ada", "n": 3})
    assert "demo asks: Who?" in err.getvalue() and "required" in err.getvalue()


@pytest.mark.parametrize(("answers", "action"), [(["d"], "decline"), (["c"], "cancel"), ([None], "cancel")])
async def test_form_decline_and_cancel(answers: list[str | None], action: str) -> None:
    ask, _ = asker(answers)
    result = await ask(t.ElicitParams(message="Who?", requested_schema=SCHEMA))
    assert result.action == action and result.content is msgspec.UNSET


async def test_url_mode_shows_the_host_and_needs_an_explicit_choice() -> None:
    ask, err = asker(["", "maybe", "o"])
    params = t.ElicitParams(
        message="Set your key", mode="url", url="https://keys.example.com/set", elicitation_id="e1"
    )
    result = await ask(params)
    assert result.action == "accept"
    shown = err.getvalue()
    assert "https://keys.example.com/set" in shown and "(on keys.example.com)" in shown
    ask, _ = asker(["d"])
    assert (await ask(params)).action == "decline"


async def test_the_deadline_stops_while_the_user_answers() -> None:
    asked, answered = asyncio.Event(), asyncio.Event()

    async def read() -> str | None:
        asked.set()
        await answered.wait()
        return "d"

    console = Console(stdout=io.StringIO(), stderr=io.StringIO(), environ={})
    ask = TerminalAsker(console, reader=read)
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(30) as deadline:
        ask.deadline = deadline
        before = deadline.when()
        task = asyncio.ensure_future(ask(t.ElicitParams(message="?", requested_schema=SCHEMA)))
        await asked.wait()
        assert deadline.when() is None  # held while the question is open
        answered.set()
        assert (await task).action == "decline"
        assert before is not None and deadline.when() is not None
        assert deadline.when() - loop.time() == pytest.approx(before - loop.time(), abs=1)

"""Exposed names: mcp__<server>__<tool>, sanitized, unique, bounded."""

from __future__ import annotations

import re

from mcpkit.host import sanitize
from mcpkit.host.naming import NameTable, join_name

ALLOWED = re.compile(r"[A-Za-z0-9_-]+\Z")


def test_sanitize() -> None:
    assert sanitize("my-db_tool9") == "my-db_tool9"
    assert sanitize("my.db tool/é") == "my_db_tool__"
    assert sanitize("") == "_"


def test_names_are_unique_and_stable() -> None:
    servers = NameTable()
    assert servers.server("my.db") == "my_db"
    clash = servers.server("my_db")  # the same after sanitizing: told apart by a hash of the original
    assert clash != "my_db" and clash.startswith("my_db_") and ALLOWED.match(clash)
    tools = NameTable()
    first = [tools.item("srv", n) for n in ("get.weather", "get_weather", "echo")]
    again = NameTable()
    assert first == [again.item("srv", n) for n in ("get.weather", "get_weather", "echo")]
    assert first[0] == "mcp__srv__get_weather" and first[1] != first[0] and first[2] == "mcp__srv__echo"


def test_long_names_are_cut_with_a_hash() -> None:
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    a, b = join_name("srv", long_a), join_name("srv", long_b)
    assert len(a) == len(b) == 64 and a != b and ALLOWED.match(a)
    assert len(join_name("srv", long_a, max_length=128)) == len("mcp__srv__") + 81

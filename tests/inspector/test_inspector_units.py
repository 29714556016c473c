"""The inspector's parts on their own: URI templates, traffic capture, the event hub, input checks."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import msgspec
import pytest
from inspector_helpers import RunningInspector

from mcpkit.inspector._api import ApiError, parse_connect, spec_from_target
from mcpkit.inspector._events import EventHub
from mcpkit.inspector._templates import expand, variables
from mcpkit.inspector._traffic import MAX_KEPT_BYTES, RecordingChannel, TrafficRecorder
from mcpkit.protocol.framing import Oversized
from mcpkit.session.channel import memory_channel_pair

# -- RFC 6570 -----------------------------------------------------------------------

VALUES: dict[str, str | list[str]] = {
    "var": "value",
    "hello": "Hello World!",
    "path": "/foo/bar",
    "x": "1024",
    "y": "768",
    "empty": "",
    "list": ["red", "green", "blue"],
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{var}", "value"),
        ("{hello}", "Hello%20World%21"),
        ("{+hello}", "Hello%20World!"),
        ("{+path}/here", "/foo/bar/here"),
        ("{#x,hello}", "#1024,Hello%20World!"),
        ("map?{x,y}", "map?1024,768"),
        ("{.var}", ".value"),
        ("{/var,x}/here", "/value/1024/here"),
        ("{;x,y}", ";x=1024;y=768"),
        ("{?x,y}", "?x=1024&y=768"),
        ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{var:3}", "val"),
        ("{/list*}", "/red/green/blue"),
        ("{?list}", "?list=red,green,blue"),
        ("{?list*}", "?list=red&list=green&list=blue"),
        ("{undefined}", ""),
        ("{?x,undefined}", "?x=1024"),
        # An empty form field means "not given" (RFC 6570 would expand it as "").
        ("{?x,empty}", "?x=1024"),
        ("users://{user_id}/profile", "users:///profile"),
        ("no expressions", "no expressions"),
    ],
)
def test_uri_template_expansion(template: str, expected: str) -> None:
    assert expand(template, VALUES) == expected


def test_uri_template_variables() -> None:
    assert variables("users://{user_id}/profile") == ["user_id"]
    assert variables("{/a,b}{?c*,a}{#d:3}") == ["a", "b", "c", "d"]
    assert variables("plain") == []
    assert expand("users://{user_id}/profile", {"user_id": "a/b c"}) == "users://a%2Fb%20c/profile"


# -- traffic capture -------------------------------------------------------------------


async def test_recording_channel_records_both_directions_and_forwards_attributes() -> None:
    hub = EventHub()
    ours, theirs = memory_channel_pair()
    closed: list[bool] = []
    channel = RecordingChannel(ours, TrafficRecorder(hub), lambda: closed.append(True))

    channel.write(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    assert await theirs.read() == [b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}']
    theirs.write(b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}')
    theirs.write(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}')
    theirs.write(b"not json")
    assert len(await channel.read() or []) == 3

    entries = [msgspec.json.decode(e.data) for e in hub.since(0)]
    assert [(e["direction"], e["kind"], e.get("method")) for e in entries] == [
        ("out", "request", "tools/list"),
        ("in", "response", None),
        ("in", "notification", "notifications/message"),
        ("in", "invalid", None),
    ]
    assert entries[1]["id"] == 1 and entries[1]["durationMs"] >= 0
    assert entries[3]["preview"] == "not json"

    # Attributes the client reads or sets on its channel reach the real one.
    channel.protocol_version = "2025-06-18"  # type: ignore[attr-defined]
    assert ours.protocol_version == "2025-06-18"  # type: ignore[attr-defined]
    assert channel.protocol_version == "2025-06-18"  # type: ignore[attr-defined]
    assert not hasattr(channel, "start_listening")
    assert channel.inner is ours

    await theirs.close()
    assert await channel.read() is None
    assert closed == [True]


def test_recorder_times_server_requests_batches_and_large_messages() -> None:
    hub = EventHub()
    recorder = TrafficRecorder(hub)
    recorder.record("in", b'{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{}}')
    recorder.record("out", b'{"jsonrpc":"2.0","id":"s1","result":{"action":"cancel"}}')
    recorder.record(
        "in",
        b'[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}]',
    )
    big = b'{"jsonrpc":"2.0","id":9,"result":{"text":"' + b"a" * MAX_KEPT_BYTES + b'"}}'
    recorder.record("in", big)
    recorder.record("in", Oversized(b'{"jsonrpc":"2.0","id":5'))
    entries = [msgspec.json.decode(e.data) for e in hub.since(0)]
    assert entries[1]["kind"] == "response" and entries[1]["durationMs"] >= 0
    assert [e.get("batch") for e in entries[2:4]] == [True, True]
    assert entries[3]["kind"] == "error"
    assert entries[4]["truncated"] is True and "message" not in entries[4]
    assert len(entries[4]["preview"]) <= 4096 and entries[4]["size"] == len(big)
    assert entries[5]["kind"] == "oversized"


# -- the event hub ------------------------------------------------------------------------


async def test_event_hub_is_bounded_and_wakes_readers() -> None:
    hub = EventHub(max_events=3)
    for i in range(5):
        hub.publish("x", {"i": i})
    assert [e.seq for e in hub.since(0)] == [3, 4, 5]
    assert hub.first_seq == 3 and hub.last_seq == 5
    assert msgspec.json.decode(hub.since(4)[0].payload()) == {
        "seq": 5,
        "kind": "x",
        "time": hub.since(4)[0].time,
        "data": {"i": 4},
    }
    assert await hub.wait(5, 0.01) is False
    waiter = asyncio.ensure_future(hub.wait(5, 5))
    await asyncio.sleep(0)
    hub.publish("y", {})
    assert await waiter is True
    hub.clear()
    assert [e.kind for e in hub.since(0)] == ["cleared"]

    small = EventHub(max_bytes=100)
    for _ in range(10):
        small.publish("x", {"pad": "p" * 40})
    assert len(small.since(0)) == 2


# -- what the page may send ------------------------------------------------------------------


def test_commands_are_never_given_to_a_shell() -> None:
    spec = parse_connect(
        {"transport": "stdio", "command": "python", "args": "server.py --name 'a b' ; rm -rf / $(id)"}
    )
    assert spec.argv == ["python", "server.py", "--name", "a b", ";", "rm", "-rf", "/", "$(id)"]
    # A command string is one program name, whatever it holds.
    spec = parse_connect({"transport": "stdio", "command": "sh -c 'touch x'", "args": []})
    assert spec.argv == ["sh -c 'touch x'"]
    with pytest.raises(ApiError, match="NUL"):
        parse_connect({"transport": "stdio", "command": "python\x00"})
    with pytest.raises(ApiError):
        parse_connect({"transport": "stdio", "command": "python", "args": ["a\x00b"]})


def test_defaults_from_the_command_line() -> None:
    assert spec_from_target("server.py").argv == [sys.executable, "server.py"]
    assert spec_from_target(["uvx", "thing", "--flag"]).argv == ["uvx", "thing", "--flag"]
    assert spec_from_target("node 'my server.js'").argv == ["node", "my server.js"]
    spec = spec_from_target(
        "http://127.0.0.1:9/mcp", protocol="2025-06-18", headers={"Authorization": "Bearer x"}
    )
    assert (spec.transport, spec.url, spec.protocol) == (
        "streamable-http",
        "http://127.0.0.1:9/mcp",
        "2025-06-18",
    )
    assert spec.headers == {"Authorization": "Bearer x"}
    assert "Bearer" not in spec.summary()
    with pytest.raises(ValueError):
        spec_from_target([])


def test_shell_metacharacters_reach_the_server_as_plain_arguments(tmp_path: Path) -> None:
    marker = tmp_path / "injected"
    running = RunningInspector().start()
    try:
        with running.client() as c:
            for body in [
                {"transport": "stdio", "command": f"touch {marker}"},
                {"transport": "stdio", "command": f"sh -c 'touch {marker}'"},
                {
                    "transport": "stdio",
                    "command": sys.executable,
                    "args": f"-c 'import sys' $(touch {marker}) ; touch {marker} `touch {marker}`",
                    "timeout": 5,
                },
            ]:
                assert c.post("/api/connect", json=body).status_code == 502
        assert not marker.exists()
    finally:
        running.stop()

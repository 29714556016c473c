"""What a host shows (issue 19, item 4): denied tools left out, shared resource URIs
told apart per server, and a clean end of backends whose SDK drops the connection."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from typing import Any

import pytest
from host_helpers import backend_spec, eventually, read_lines

from mcpkit import Client
from mcpkit.host import Host, Policy, RestartPolicy, ServerSpec, ServerUnavailable, UnknownName, build_gateway
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MCPError

OFFICIAL = Path(__file__).resolve().parents[1] / "interop" / "official_server.py"


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def contents_text(result: t.ReadResourceResult) -> str:
    block = result.contents[0]
    assert isinstance(block.text, str)
    return block.text


def shared_specs(record: Path) -> dict[str, ServerSpec]:
    """alpha and beta both list ``config://shared`` and ``files://shared/{name}``; gamma does not."""
    return {
        "alpha": backend_spec("alpha", record, env={"SHARED": "1"}),
        "beta": backend_spec("beta", record, env={"SHARED": "1"}, protocol="legacy"),
        "gamma": backend_spec("gamma", record),
    }


async def test_visible_tools_leave_out_what_the_policy_denies(record: Path) -> None:
    policy = Policy(deny=("mcp__alpha__drop_table", "mcp__gamma"), ask=("mcp__beta",), default="allow")
    async with Host(shared_specs(record), policy=policy) as host:
        every = {entry.name for entry in host.tools}
        visible = {entry.name for entry in host.visible_tools}
        assert {"mcp__alpha__drop_table", "mcp__gamma__echo"} <= every
        assert visible == every - {"mcp__alpha__drop_table"} - {n for n in every if "__gamma__" in n}
        assert "mcp__beta__drop_table" in visible  # ask: listed, asked about when called
        assert host.denies(host.tool("mcp__gamma__add"))
        assert not host.denies(host.tool("mcp__beta__add"))
    async with Host(shared_specs(record)) as host:  # no policy: nothing is denied
        assert {e.name for e in host.visible_tools} == {e.name for e in host.tools}


async def test_a_uri_two_servers_share_is_listed_once_per_server(record: Path) -> None:
    async with Host(shared_specs(record)) as host:
        uris = [entry.uri for entry in host.resources]
        assert uris == [
            "notes://alpha/readme",
            "mcp://alpha/config://shared",
            "notes://beta/readme",
            "mcp://beta/config://shared",
            "notes://gamma/readme",
        ]
        beta = next(e for e in host.resources if e.uri == "mcp://beta/config://shared")
        assert (beta.server, beta.resource.uri, beta.definition.mime_type) == (
            "beta",
            "config://shared",
            "text/plain",
        )
        for server in ("alpha", "beta"):
            read = await host.read_resource(f"mcp://{server}/config://shared")
            assert contents_text(read) == f"config of {server}"
            # The backend saw its own URI, not the qualified one.
            assert read.contents[0].uri == "config://shared"
        assert contents_text(await host.read_resource("config://shared", server="beta")) == "config of beta"
        with pytest.raises(UnknownName) as excinfo:
            await host.read_resource("config://shared")
        message = str(excinfo.value)
        assert "'alpha' and 'beta'" in message
        assert "mcp://alpha/config://shared or mcp://beta/config://shared" in message
        assert host.shared_by("config://shared") == ["alpha", "beta"]
        assert host.shared_by("notes://alpha/readme") == []

        templates = [entry.uri_template for entry in host.resource_templates]
        assert templates == [
            "items://alpha/{item_id}",
            "mcp://alpha/files://shared/{name}",
            "items://beta/{item_id}",
            "mcp://beta/files://shared/{name}",
            "items://gamma/{item_id}",
        ]
        assert contents_text(await host.read_resource("mcp://beta/files://shared/x")) == "beta file x"
        assert contents_text(await host.read_resource("mcp://alpha/files://shared/y")) == "alpha file y"
        assert contents_text(await host.read_resource("items://gamma/3")) == "gamma item 3"
        with pytest.raises(UnknownName, match="mcp://alpha/files://shared/x or mcp://beta/files://shared/x"):
            await host.read_resource("files://shared/x")
        ref = {"type": "ref/resource", "uri": "mcp://beta/files://shared/{name}"}
        done = await host.complete(ref, "name", "cu")
        assert done.values == ["curious"]

        # Updates of a shared URI are reported under the server's qualified URI.
        assert host.exposed_uri("beta", "config://shared") == "mcp://beta/config://shared"
        assert host.exposed_uri("beta", "files://shared/z") == "mcp://beta/files://shared/z"
        assert host.exposed_uri("gamma", "notes://gamma/readme") == "notes://gamma/readme"


async def test_a_uri_shared_no_longer_is_listed_bare_again(record: Path) -> None:
    specs = shared_specs(record)
    async with Host(specs) as host:
        await host.backend("beta").stop()
        host._changed(host.backend("beta"), frozenset({"state"}), None)
        assert "config://shared" in [entry.uri for entry in host.resources]
        read = await host.read_resource("config://shared")
        assert contents_text(read) == "config of alpha"


async def test_gateway_lists_neither_denied_tools_nor_a_bare_shared_uri(record: Path) -> None:
    policy = Policy(deny=("mcp__alpha__drop_table",), default="allow")
    host = Host(shared_specs(record), policy=policy)
    async with Client(build_gateway(host)) as client:
        names = {tool.name for tool in await client.list_tools()}
        assert "mcp__alpha__drop_table" not in names
        assert {"mcp__alpha__echo", "mcp__beta__drop_table"} <= names
        # A call by name is still refused by the policy, with its reason (not "unknown tool").
        denied = await client.call_tool("mcp__alpha__drop_table", {"table": "users"})
        assert denied.is_error is True
        assert text(denied) == "Permission denied: denied by rule 'mcp__alpha__drop_table'"

        uris = [resource.uri for resource in await client.list_resources()]
        assert "config://shared" not in uris
        assert {"mcp://alpha/config://shared", "mcp://beta/config://shared"} <= set(uris)
        read = await client.read_resource("mcp://beta/config://shared")
        assert contents_text(read) == "config of beta"
        with pytest.raises(MCPError) as excinfo:
            await client.read_resource("config://shared")
        assert "mcp://alpha/config://shared or mcp://beta/config://shared" in excinfo.value.message
        templates = [tpl.uri_template for tpl in await client.list_resource_templates()]
        assert {"mcp://alpha/files://shared/{name}", "mcp://beta/files://shared/{name}"} <= set(templates)
        assert "files://shared/{name}" not in templates
        read = await client.read_resource("mcp://alpha/files://shared/q")
        assert contents_text(read) == "alpha file q"
    assert "drop_table" not in [call["tool"] for call in read_lines(record)]


async def test_closing_a_host_leaves_no_failed_task_behind(record: Path) -> None:
    """An official-SDK server drops the connection without ending its ``subscriptions/listen``
    request: the request's task must still be collected when the host closes."""
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    try:
        spec = ServerSpec(name="official", transport="stdio", command=sys.executable, args=(str(OFFICIAL),))
        async with Host({"official": spec, "alpha": backend_spec("alpha", record)}) as host:
            await host.wait_ready("official")
            assert host.backend("official").client is not None
            assert host.backend("official").client.is_modern  # type: ignore[union-attr]
            assert text(await host.call_tool("mcp__official__echo", {"text": "hi"})) == "hi"
        del host  # asyncio reports a failed task nobody looked at when the task is collected
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert [str(c.get("message")) for c in unretrieved] == []


async def test_a_restart_leaves_no_failed_task_behind(record: Path) -> None:
    """The listen request of a connection that died with its server is collected on restart."""
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    restart = RestartPolicy(max_attempts=3, initial_delay=0.05, factor=2.0, max_delay=0.2)
    try:
        async with Host({"alpha": backend_spec("alpha", record)}, restart=restart) as host:
            first = host.backend("alpha").pid
            with pytest.raises(ServerUnavailable):
                await host.call_tool("mcp__alpha__crash")
            await eventually(lambda: host.backend("alpha").restarts == 1)
            assert host.backend("alpha").pid != first
            gc.collect()
            await asyncio.sleep(0)
            assert [str(c.get("message")) for c in unretrieved] == []
            assert text(await host.call_tool("mcp__alpha__echo", {"text": "again"})) == "alpha: again"
    finally:
        loop.set_exception_handler(previous)

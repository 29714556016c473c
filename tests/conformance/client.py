"""The conformance suite's client under test: a thin driver over mcpkit's public API.

The harness runs ``python tests/conformance/client.py <server-url>`` with the
scenario in ``MCP_CONFORMANCE_SCENARIO``, the revision in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` and scenario data in
``MCP_CONFORMANCE_CONTEXT``. Every behaviour the scenarios check lives in the
library; this file only decides what to call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from mcpkit import Client
from mcpkit.protocol import types as t


async def accept_elicitation(params: t.ElicitParams) -> dict[str, Any]:
    # Empty content: the library fills in the schema's defaults (SEP-1034).
    return {"action": "accept", "content": {}}


async def sample(params: t.CreateMessageParams) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "conformance sample"},
        "model": "conformance-model",
        "stopReason": "endTurn",
    }


def client_for(url: str, protocol: str, **options: Any) -> Client:
    return Client(
        url,
        protocol=protocol,
        elicitation_handler=accept_elicitation,
        sampling_handler=sample,
        roots=["file:///conformance"],
        **options,
    )


def auth_for(url: str, scenario: str, context: dict[str, Any]) -> Any:
    """The library's OAuth client, configured from the scenario's context."""
    if not scenario.startswith("auth/"):
        return None
    from mcpkit.auth.client import ClientCredentialsAuth, OAuthClientAuth

    if scenario == "auth/client-credentials-jwt":
        return ClientCredentialsAuth(
            url,
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm"),
        )
    if scenario == "auth/client-credentials-basic":
        return ClientCredentialsAuth(
            url, client_id=context["client_id"], client_secret=context["client_secret"]
        )
    return OAuthClientAuth(
        url,
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        # The suite's Client ID Metadata Document URL (used when the AS supports CIMD).
        client_metadata_url="https://conformance-test.local/client-metadata.json",
    )


async def run(url: str, scenario: str, protocol: str, context: dict[str, Any]) -> None:
    options: dict[str, Any] = {"auth": auth_for(url, scenario, context)}
    if scenario == "json-schema-ref-no-deref":
        protocol = "legacy"  # its mock speaks only the handshake lifecycle
    async with client_for(url, protocol, **options) as client:
        if scenario.startswith("sep-2640-client-"):
            await use_skills(client, load=scenario != "sep-2640-client-no-prefetch")
            return
        tools = await client.list_tools()
        names = [tool.name for tool in tools]
        if scenario == "tools_call":
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario == "elicitation-sep1034-client-defaults":
            await client.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            await client.call_tool("test_reconnection", {})
        elif scenario == "http-custom-headers":
            for call in context.get("toolCalls", []):
                await client.call_tool(call["name"], call.get("arguments") or {})
        elif scenario == "json-schema-2020-12-preservation":
            schema = next(tool.input_schema for tool in tools if tool.name == "json_schema_2020_12_tool")
            await client.call_tool("json_schema_echo", {"schema": schema})
        elif scenario in ("http-invalid-tool-headers", "sep-2322-client-request-state"):
            for name in names:
                await client.call_tool(name, {})
        elif scenario == "request-metadata" or scenario.startswith("http-standard-headers"):
            if names:
                await client.call_tool(names[0], {})
        elif names and scenario.startswith("auth/"):
            await client.call_tool(names[0], {})


async def use_skills(client: Client, *, load: bool) -> None:
    """A host's use of the skills extension: list the skills (which fetches no file); with
    ``load``, load each one (its SKILL.md, verified against the entry) and then read its
    other files, each verified. A skill that fails verification is not used further."""
    from mcpkit.client.skills import SkillVerificationError

    for skill in await client.list_skills():
        if not load:
            continue
        try:
            await skill.read("SKILL.md")
            for file in skill.files.values():
                await skill.read(file.uri)
        except SkillVerificationError as exc:
            print(f"skill {skill.uri} refused: {exc}", file=sys.stderr)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "2025-11-25"
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    asyncio.run(run(url, scenario, version, context))
    return 0


if __name__ == "__main__":
    sys.exit(main())

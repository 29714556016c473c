"""The "everything" server: every surface the official MCP conformance suite probes.

Run plainly, it serves stdio, as every example does (for a host's
``mcpServers`` entry, or ``mcpkit list examples/everything_server.py``)::

    python examples/everything_server.py

``--http`` serves Streamable HTTP instead, both protocol eras on one endpoint,
``/mcp`` (``--port N``, default 3001; ``mcpkit run examples/everything_server.py
--transport http --port 3001`` does the same)::

    python examples/everything_server.py --http --port 3001

then point the suite at it (``make conformance`` does all of this)::

    npx @modelcontextprotocol/conformance@0.2.0-alpha.12 server \\
        --url http://localhost:3001/mcp --requirements 2026-07-28

It doubles as a tour of mcpkit: plain and async tools, rich content, progress,
logging, sampling and elicitation (server-to-client requests on the legacy
2025-11-25 wire, ``input_required`` multi round-trip results on the stateless
2026-07-28 wire, from the same handler code), resources and templates,
prompts, completion, run-time list changes and ``Mcp-Param-*`` headers.
Names and texts follow the reference fixture of the suite.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

from mcpkit import Context, Elicit, ListRoots, MCPServer, Sample
from mcpkit.protocol.errors import INTERNAL_ERROR, MCPError
from mcpkit.protocol.types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceContents,
    TextContent,
)
from mcpkit.server import UserMessage

# A 1x1 PNG and a tiny WAV file.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_TINY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

server = MCPServer("mcpkit-everything-server", "1.0.0")
# Agent Skills (io.modelcontextprotocol/skills, SEP-2640): examples/skills/ as skill:// resources,
# with skills/list, skills/get and resources/directory/read (the suite's sep-2640-skills-* scenarios).
server.add_skills(Path(__file__).parent / "skills")


# -- tools: content ------------------------------------------------------------
# Listed first on purpose: header-validation probes call the first tool with {}.


@server.tool()
def test_simple_text() -> str:
    """Returns a simple text response."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> ImageContent:
    """Returns an image (a 1x1 PNG)."""
    return ImageContent(data=PNG_1X1, mime_type="image/png")


@server.tool()
def test_audio_content() -> AudioContent:
    """Returns audio (a short WAV file)."""
    return AudioContent(data=WAV_TINY, mime_type="audio/wav")


@server.tool()
def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded text resource."""
    return EmbeddedResource(
        resource=ResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
    )


@server.tool()
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Returns text, an image and an embedded resource together."""
    return [
        TextContent(text="Multiple content types test:"),
        ImageContent(data=PNG_1X1, mime_type="image/png"),
        EmbeddedResource(
            resource=ResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text='{"test": "data", "value": 123}',
            )
        ),
    ]


@server.tool()
def test_error_handling() -> str:
    """Always fails: the exception becomes an isError result the model can read."""
    raise RuntimeError("This tool intentionally returns an error for testing")


# -- tools: progress and logging -----------------------------------------------------


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages while it runs."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step in (0, 50, 100):
        if step:
            await asyncio.sleep(0.05)
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    return "Progress test completed"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info level: a 2026-07-28 request without a logLevel in _meta gets no messages."""
    await ctx.info("test_logging_tool ran")
    return "Logging tool completed"


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Closes its SSE response stream mid-call; the client resumes with Last-Event-ID."""
    await ctx.info("Before disconnect")
    ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


# -- tools: asking the client (sampling, elicitation, roots) ---------------------------
# One handler serves both eras: a server-to-client request on 2025-11-25, an
# input_required result (answered on retry) on 2026-07-28.


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model to complete the prompt."""
    result = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {_text(result.content) or 'No response'}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email address."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.action}, content={_json(result.content)}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicitation whose fields all carry defaults (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }
    result = await ctx.elicit("Please provide user information", schema)
    return f"Elicitation result: action={result.action}, content={_json(result.content)}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicitation with every enum shape of SEP-1330."""
    titled = [
        {"const": "low", "title": "Low Priority"},
        {"const": "medium", "title": "Medium Priority"},
        {"const": "high", "title": "High Priority"},
    ]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Simple enum without titles",
                "enum": ["active", "inactive", "pending"],
            },
            "titledSingle": {"type": "string", "description": "Enum with titled options", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "description": "Legacy enum with enumNames",
                "enum": ["small", "medium", "large"],
                "enumNames": ["Small Size", "Medium Size", "Large Size"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Multi-select without titles",
                "items": {"type": "string", "enum": ["read", "write", "execute"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Multi-select with titled options",
                "items": {
                    "anyOf": [
                        {"const": "feature", "title": "New Feature"},
                        {"const": "bug", "title": "Bug Fix"},
                        {"const": "docs", "title": "Documentation"},
                    ]
                },
            },
        },
    }
    result = await ctx.elicit("Please select values using different enum schema types", schema)
    return f"Elicitation completed: action={result.action}, content={_json(result.content)}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs sampling: a client without the capability gets error -32021."""
    result = await ctx.sample("Say hello.", max_tokens=20, key="greeting")
    return f"Sampled: {_text(result.content)}"


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Elicits a name; on 2026-07-28 that is an input_required result, never a request on the stream."""
    result = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {_field(result.content, 'name')}!"


# -- tools: multi round-trip requests (2026-07-28 input_required) ----------------------


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Round 1 asks for the user's name; the retry with the answer completes."""
    result = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {_field(result.content, 'name')}!"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Round 1 asks the client's model a question."""
    result = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"The model says: {_text(result.content)}"


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Round 1 asks for the client's roots."""
    roots = await ctx.list_roots(key="client_roots")
    return f"Client roots: {', '.join(root.uri for root in roots) or '(none)'}"


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Round 1 carries a sealed requestState that the retry must echo."""
    result = await ctx.elicit(
        "Please confirm",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return f"state-ok: confirmed={_field(result.content, 'ok')}"


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for an elicitation, a sampling and the roots in one round."""
    answers = await ctx.ask(
        {
            "user_name": Elicit("What is your name?", NAME_SCHEMA),
            "capital_question": Sample("What is the capital of France?", max_tokens=100),
            "client_roots": ListRoots(),
        }
    )
    name = _field(answers["user_name"].content, "name")
    capital = _text(answers["capital_question"].content)
    return f"name={name}, capital={capital}, roots={len(answers['client_roots'].roots)}"


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds of questions, each answered before the next is asked."""
    first = await ctx.elicit("What is your name?", NAME_SCHEMA, key="step1")
    second = await ctx.elicit(
        "What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{_field(first.content, 'name')} likes {_field(second.content, 'color')}"


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Its requestState is HMAC-sealed: a tampered one is rejected with an error."""
    result = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {_field(result.content, 'name')}!"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for what the client declared it can answer."""
    caps = ctx.client_capabilities
    wanted: dict[str, Elicit | Sample | ListRoots] = {}
    if "elicitation" in caps:
        wanted["user_name"] = Elicit("What is your name?", NAME_SCHEMA)
    if "sampling" in caps:
        wanted["capital_question"] = Sample("What is the capital of France?", max_tokens=100)
    if "roots" in caps:
        wanted["client_roots"] = ListRoots()
    if not wanted:
        return "The client declared no capability to ask through."
    answers = await ctx.ask(wanted)
    return f"Answered: {', '.join(sorted(answers))}"


# -- tools: schemas and headers -------------------------------------------------------


@server.tool(headers={"region": "Region"})
def test_x_mcp_header(region: str = "<none>") -> str:
    """Echoes its region argument, mirrored in the Mcp-Param-Region header (2026-07-28)."""
    return f"region={region}"


# Type hints cannot say $anchor, allOf/anyOf or if/then/else: publish this schema verbatim.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Accepts a contact record described by a JSON Schema 2020-12 document."""
    return f"Received contact for {name or 'anonymous'} via {contactMethod or 'unspecified'}"


# -- tools: changing the lists at run time ------------------------------------------


def dynamic_tool() -> str:
    """A tool that comes and goes (see test_trigger_tool_change)."""
    return "I exist for now."


def dynamic_prompt() -> str:
    """A prompt that comes and goes (see test_trigger_prompt_change)."""
    return "This prompt exists for now."


@server.tool()
def test_trigger_tool_change() -> str:
    """Adds or removes dynamic_tool; subscribers get notifications/tools/list_changed."""
    if server.has_tool("dynamic_tool"):
        server.remove_tool("dynamic_tool")
        return "dynamic_tool removed"
    server.add_tool(dynamic_tool)
    return "dynamic_tool added"


@server.tool()
def test_trigger_prompt_change() -> str:
    """Adds or removes dynamic_prompt; subscribers get notifications/prompts/list_changed."""
    if server.has_prompt("dynamic_prompt"):
        server.remove_prompt("dynamic_prompt")
        return "dynamic_prompt removed"
    server.prompt()(dynamic_prompt)
    return "dynamic_prompt added"


# -- resources ------------------------------------------------------------------------
# The first listed resource must be readable (caching reads resources[0]).

watched_content = "Watched resource content"


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (a PNG image)."""
    return base64.b64decode(PNG_1X1)


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource clients can subscribe to."""
    return watched_content


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
def template_data(id: str) -> str:
    """A templated resource: the id comes from the URI."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# -- prompts --------------------------------------------------------------------------


@server.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[PromptMessage]:
    """A prompt that embeds the resource it is given."""
    resource = ResourceContents(
        uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
    )
    return [
        UserMessage(EmbeddedResource(resource=resource)),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt()
def test_prompt_with_image() -> list[PromptMessage]:
    """A prompt that includes an image."""
    return [
        UserMessage(ImageContent(data=PNG_1X1, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """Asks the user for context before the prompt can be built (2026-07-28 input_required)."""
    result = await ctx.elicit(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return f"Prompt built with context: {_field(result.content, 'context')}"


# -- tools: tasks (the io.modelcontextprotocol/tasks extension, 2026-07-28) -----------------


@server.tool()
def greet(name: str) -> str:
    """A plain tool: never a task."""
    return f"Hello, {name}!"


@server.tool(task="optional")
async def slow_compute(seconds: float, label: str = "") -> str:
    """Sleeps ``seconds`` seconds as a task (for clients that declared tasks)."""
    await asyncio.sleep(seconds)
    return f"computed {label} after {seconds:g}s"


@server.tool(task="required")
async def failing_job() -> str:
    """A task whose tool fails (an isError result: the task completes)."""
    await asyncio.sleep(1)
    raise RuntimeError("the job failed")


@server.tool(task="optional")
async def protocol_error_job() -> str:
    """A task that fails with a protocol error (the task fails)."""
    await asyncio.sleep(0.1)
    raise MCPError(INTERNAL_ERROR, "the job hit a protocol error")


CONFIRM_SCHEMA = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@server.tool(task="optional")
async def confirm_delete(filename: str, ctx: Context) -> str:
    """Parks the task on one elicitation, then completes."""
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_SCHEMA)
    confirmed = answer.action == "accept" and _field(answer.content, "confirm") is True
    return f"{'deleted' if confirmed else 'kept'} {filename}"


@server.tool(task="optional")
async def multi_input(ctx: Context) -> str:
    """Two elicitations at once: the task waits until both are answered."""
    name, confirm = await asyncio.gather(
        ctx.elicit("What is your name?", NAME_SCHEMA), ctx.elicit("Go ahead?", CONFIRM_SCHEMA)
    )
    return f"name={_field(name.content, 'name')} confirm={_field(confirm.content, 'confirm')}"


@server.tool(task="required", task_after=None)
async def test_tool_with_task(ctx: Context) -> str:
    """Asks the user's name in a multi round-trip exchange, then goes on as a task."""
    result = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    await ctx.start_task()
    await asyncio.sleep(0.1)
    return f"Hello, {_field(result.content, 'name')}, from a task!"


# -- completion -----------------------------------------------------------------------


@server.completion()
def complete(ref: Any, argument: Any, context: dict[str, str]) -> list[str]:
    """Suggest values for prompt arguments (here: nothing, which is a valid answer)."""
    return []


# -- helpers --------------------------------------------------------------------------


def _field(content: Any, name: str) -> Any:
    return content.get(name) if isinstance(content, dict) else None


def _text(content: Any) -> str:
    """The text of a sampling answer's content (a block, or a list of blocks)."""
    blocks = content if isinstance(content, list) else [content]
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _json(content: Any) -> str:
    return json.dumps(content if isinstance(content, dict) else {})


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="The everything server: stdio, or Streamable HTTP with --http.")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, help="HTTP port on 127.0.0.1 (default 3001)")
    args = parser.parse_args()
    if args.port is not None and not args.http:
        parser.error("--port goes with --http (without it the server speaks stdio)")
    if args.http:
        server.run("http", port=args.port or 3001)
    else:
        server.run()

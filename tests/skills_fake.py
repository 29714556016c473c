"""A hand-written skills server that can lie: it lists entries built from the files it is
given, then serves whatever content it is told to (tampered bytes, another frontmatter),
and records every request. Used in memory (:meth:`FakeSkills.serve` over a channel) and as
a stdio process (``python tests/skills_fake.py SPEC.json``, for the CLI tests).

SPEC (JSON): ``{"skills": {SKILL_PATH: {FILE_PATH: TEXT}}, "serve": {URI: TEXT},
"entries": {URI: ENTRY_OVERRIDES}, "log": FILE, "declare": true, "page_size": N}``:
``serve`` replaces what ``resources/read`` answers for a URI (the listed digest stays that
of the original text); ``entries`` patches listed entries; ``log`` gets one line per
request's method and URI.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

SKILLS = "io.modelcontextprotocol/skills"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def frontmatter_of(text: str) -> dict[str, Any]:
    """The simple ``key: value`` frontmatter the fixtures use."""
    head = text.split("---\n")[1]
    out: dict[str, Any] = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


class FakeSkills:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.files: dict[str, bytes] = {}
        self.entries: list[dict[str, Any]] = []
        for path, files in spec.get("skills", {}).items():
            root = f"skill://{path}"
            resources = []
            for name, text in files.items():
                data = text.encode()
                self.files[f"{root}/{name}"] = data
                resources.append({"uri": f"{root}/{name}", "digest": digest(data), "size": len(data)})
            entry = {
                "uri": f"{root}/SKILL.md",
                "frontmatter": frontmatter_of(files["SKILL.md"]),
                "resources": resources,
            }
            entry.update(spec.get("entries", {}).get(entry["uri"], {}))
            self.entries.append(entry)
        for uri, text in spec.get("serve", {}).items():
            self.files[uri] = text.encode()

    @property
    def reads(self) -> list[str]:
        return [p.get("uri", "") for m, p in self.requests if m == "resources/read"]

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The result of a request; raises LookupError for an error answer."""
        self.requests.append((method, params))
        log = self.spec.get("log")
        if log:
            with open(log, "a") as f:
                f.write(f"{method} {params.get('uri', '')}\n")
        declared = {SKILLS: {}} if self.spec.get("declare", True) else {}
        if method == "server/discover":
            return {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"resources": {}, "extensions": declared},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake-skills", "version": "1"}},
            }
        if method == "skills/list":
            size = self.spec.get("page_size") or len(self.entries) or 1
            start = int(params.get("cursor") or 0)
            page = self.entries[start : start + size]
            result: dict[str, Any] = {
                "resultType": "complete",
                "skills": page,
                "ttlMs": 0,
                "cacheScope": "private",
            }
            if start + size < len(self.entries):
                result["nextCursor"] = str(start + size)
            return result
        if method == "skills/get":
            for entry in self.entries:
                if entry["uri"] == params.get("uri"):
                    return {"resultType": "complete", "skill": entry, "ttlMs": 0, "cacheScope": "private"}
            raise LookupError(f"No skill is served at {params.get('uri')}")
        if method == "resources/read":
            uri = params.get("uri", "")
            if uri not in self.files:
                raise LookupError(f"no resource {uri}")
            text = self.files[uri].decode()
            return {
                "resultType": "complete",
                "contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}],
            }
        raise KeyError(method)

    def reply(self, raw: bytes) -> bytes | None:
        message = json.loads(raw)
        if "id" not in message or "method" not in message:
            return None
        try:
            body: dict[str, Any] = {"result": self.answer(message["method"], message.get("params") or {})}
        except LookupError as exc:
            body = {"error": {"code": -32602, "message": str(exc.args[0])}}
        except KeyError:
            body = {"error": {"code": -32601, "message": f"Method not found: {message['method']}"}}
        return json.dumps({"jsonrpc": "2.0", "id": message["id"], **body}).encode()

    async def serve(self, channel: Any) -> None:
        """Answer requests over an mcpkit channel until it closes."""
        while True:
            batch = await channel.read()
            if batch is None:
                return
            for raw in batch:
                out = self.reply(bytes(raw))
                if out is not None:
                    channel.write(out)


@contextlib.asynccontextmanager
async def connected(fake: FakeSkills) -> AsyncIterator[Any]:
    """An mcpkit Client connected to ``fake`` in memory."""
    from mcpkit import Client
    from mcpkit.session.channel import memory_channel_pair

    ours, theirs = memory_channel_pair()
    server = asyncio.create_task(fake.serve(theirs))
    try:
        async with Client.over(ours) as client:
            yield client
    finally:
        await theirs.close()
        server.cancel()
        with contextlib.suppress(BaseException):
            await server


def main() -> None:
    with open(sys.argv[1]) as f:
        fake = FakeSkills(json.load(f))
    for line in sys.stdin.buffer:
        if line.strip():
            out = fake.reply(line)
            if out is not None:
                sys.stdout.buffer.write(out + b"\n")
                sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()

"""A proxy of a config of several servers mounts one proxy per server: the parent forwards
resource subscriptions to them (updates reach its subscribers under the namespaced URIs) and
serves their backends' skills under ``skill://<namespace>/...``, in both eras."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _wait import eventually
from mcpkit import Client, MCPError, MCPServer
from mcpkit.protocol.errors import INVALID_PARAMS
from mcpkit.protocol.skills import SKILLS_EXTENSION
from mcpkit.proxy import ProxyServer
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / "examples" / "everything_server.py"
SKILLS = ROOT / "examples" / "skills"
WATCHED = "test://watched-resource"


def everything() -> Any:
    """A fresh copy of the example's server (each backend its own)."""
    spec = importlib.util.spec_from_file_location("everything_for_mounted_proxy", EVERYTHING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.server


def child(parent: MCPServer, namespace: str) -> ProxyServer:
    found = next(m.child for m in parent._mounts if m.namespace == namespace)
    assert isinstance(found, ProxyServer)
    return found


@pytest.mark.parametrize("back", ["legacy", "modern"])
@pytest.mark.parametrize("front", ["2025-11-25", "2026-07-28"])
async def test_subscriptions_reach_the_mounted_proxies(back: str, front: str) -> None:
    one, two = everything(), everything()
    seen: list[tuple[str, Any]] = []
    async with serve_http(one) as one_url, serve_http(two) as two_url:
        config = {"mcpServers": {"one": {"url": one_url}, "two": {"url": two_url}}}
        proxy = MCPServer.proxy(config, protocol=back)
        async with Client(
            proxy, protocol=front, notification_handler=lambda m, p: seen.append((m, p))
        ) as client:
            uris = {r.uri for r in await client.list_resources()}
            assert {"test://one/watched-resource", "test://two/watched-resource"} <= uris
            if front == "2026-07-28":
                listening = await client.listen(resource_uris=["test://one/watched-resource"])
            else:
                await client.subscribe_resource("test://one/watched-resource")
            # The mounted proxy subscribed its backend to the URI as the backend knows it.
            await eventually(lambda: WATCHED in child(proxy, "one").subscriptions)
            assert WATCHED not in child(proxy, "two").subscriptions

            two.notify_resource_updated(WATCHED)  # nobody subscribed to two's
            one.notify_resource_updated(WATCHED)
            await eventually(
                lambda: any(
                    m == "notifications/resources/updated" and p.get("uri") == "test://one/watched-resource"
                    for m, p in seen
                )
            )
            updated = [p.get("uri") for m, p in seen if m == "notifications/resources/updated"]
            assert updated == ["test://one/watched-resource"]

            if front == "2026-07-28":
                await listening.close()
            else:
                await client.unsubscribe_resource("test://one/watched-resource")
            await eventually(lambda: not child(proxy, "one").subscriptions)


SKILLS_BACKEND = textwrap.dedent(
    """
    import sys

    from mcpkit import MCPServer

    server = MCPServer("skills-backend")
    server.add_skills(sys.argv[1])

    if __name__ == "__main__":
        server.run()
    """
)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_the_mounted_proxies_skills_are_served(tmp_path: Path, era: str) -> None:
    script = tmp_path / "skills_backend.py"
    script.write_text(SKILLS_BACKEND)
    entry = {"command": sys.executable, "args": [str(script), str(SKILLS)]}
    proxy = MCPServer.proxy({"mcpServers": {"one": entry, "two": entry}})
    async with Client(proxy, protocol=era) as client:
        caps = client.server_capabilities
        assert caps is not None and isinstance(caps.extensions, dict)
        assert caps.extensions[SKILLS_EXTENSION] == {"directoryRead": True}
        skills = {skill.uri: skill for skill in await client.list_skills()}
        assert set(skills) == {
            f"skill://{ns}/{name}/SKILL.md"
            for ns in ("one", "two")
            for name in ("code-review", "release-notes")
        }
        review = skills["skill://two/code-review/SKILL.md"]
        assert review.name == "code-review" and review.problem is None
        # The files are the mounted skill:// resources, read and verified against the manifest.
        assert (await review.read()) == (SKILLS / "code-review" / "SKILL.md").read_bytes()
        checklist = await review.read("checklists/general.md")
        assert checklist == (SKILLS / "code-review" / "checklists" / "general.md").read_bytes()
        got = await client.get_skill(review.uri)
        assert got.entry == review.entry
        listed = {r.name: (r.uri, r.mime_type) for r in await client.read_directory(review.root)}
        assert listed["SKILL.md"] == ("skill://two/code-review/SKILL.md", "text/markdown")
        assert listed["checklists"] == ("skill://two/code-review/checklists", "inode/directory")
        top = {r.uri: r.mime_type for r in await client.read_directory("skill://one")}
        assert top == {
            "skill://one/code-review": "inode/directory",
            "skill://one/release-notes": "inode/directory",
        }
        for missing in ("skill://one/no-such-skill/SKILL.md", "skill://three/code-review/SKILL.md"):
            with pytest.raises(MCPError) as unknown:
                await client.get_skill(missing)
            assert unknown.value.code == INVALID_PARAMS

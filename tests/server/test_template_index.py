"""resources/read against many URI templates: the prefix index finds the template a scan of the
list in registration order would find, trying O(1) templates instead of all of them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mcpkit import MCPServer
from mcpkit.protocol import types as t
from mcpkit.server.resources import ResourceNotFound, ResourceRegistry, UriTemplate


def _scan(registry: ResourceRegistry, uri: str) -> tuple[str, dict[str, str]] | None:
    for definition, matcher, _ in registry.templates:
        values = matcher.match(uri)
        if values is not None:
            return definition.uri_template, values
    return None


def _indexed(registry: ResourceRegistry, uri: str) -> tuple[str, dict[str, str]] | None:
    matched = registry.match_template(uri)
    if matched is None:
        return None
    entry, values = matched
    (template,) = [d.uri_template for d, _, e in registry.templates if e is entry]
    return template, values


def _reader(**_: Any) -> str:
    return "x"


def _template(uri_template: str) -> t.ResourceTemplate:
    return t.ResourceTemplate(uri_template=uri_template, name=uri_template)


TEMPLATES = [
    "db://{table}/rows",
    "db://{table}/{id}",
    "db://users/{id}",  # after the two above: they win for db://users/...
    "{+anything}",  # no leading literal: a candidate for every URI
    "file:///{+path}",
    "file:///etc/{name}",
    "mem://{key}",
    "m://{a}/{b}",
    "mem://fixed",
    "x{y}",
]
URIS = [
    "db://users/7",
    "db://users/rows",
    "db://orders/7",
    "db:///7",
    "file:///etc/passwd",
    "file:///a/b/c",
    "mem://k",
    "mem://fixed",
    "m://1/2",
    "x1",
    "xyz://q",
    "nothing-here",
    "",
]


@pytest.mark.parametrize("seed", range(20))
def test_index_finds_what_a_scan_finds(seed: int) -> None:
    rng = random.Random(seed)
    registry = ResourceRegistry()
    templates = TEMPLATES[:]
    rng.shuffle(templates)
    for uri_template in templates[: rng.randint(1, len(templates))]:
        registry.add_raw(_template(uri_template), _reader)
    for uri in URIS:
        assert _indexed(registry, uri) == _scan(registry, uri), uri


def test_index_follows_every_change_of_the_list() -> None:
    registry = ResourceRegistry()
    registry.add_raw(_template("db://{table}/{id}"), _reader)
    assert _indexed(registry, "db://users/7") == ("db://{table}/{id}", {"table": "users", "id": "7"})
    registry.add_raw(_template("{+all}"), _reader)  # appended: the older template still wins
    assert _indexed(registry, "db://users/7") == ("db://{table}/{id}", {"table": "users", "id": "7"})
    assert _indexed(registry, "zzz") == ("{+all}", {"all": "zzz"})
    registry.add_raw(_template("db://{table}/{id}"), _reader)  # re-registered: moves to the end
    assert _indexed(registry, "db://users/7") == ("{+all}", {"all": "db://users/7"})
    registry.remove("{+all}")
    assert _indexed(registry, "zzz") is None
    assert _indexed(registry, "db://users/7") == ("db://{table}/{id}", {"table": "users", "id": "7"})
    # Replaced from outside (as mounting and the proxy do), or appended to in place.
    entry = registry.templates[0][2]
    registry.templates = [x for x in registry.templates if x[0].uri_template != "db://{table}/{id}"]
    assert _indexed(registry, "db://users/7") is None
    registry.templates.append((_template("db://{t}/7"), UriTemplate("db://{t}/7"), entry))
    assert _indexed(registry, "db://users/7") == ("db://{t}/7", {"t": "users"})
    registry.templates.pop()
    assert _indexed(registry, "db://users/7") is None


def test_read_tries_a_bounded_number_of_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []
    original = UriTemplate.match

    def counting(self: UriTemplate, uri: str) -> dict[str, str] | None:
        tried.append(self.template)
        return original(self, uri)

    monkeypatch.setattr(UriTemplate, "match", counting)
    for n in (10, 1_000):
        server = MCPServer("many")
        for i in range(n):
            server.resource(f"tmpl{i}://{{id}}/item", name=f"tmpl_{i}")(lambda id: id)
        tried.clear()
        assert server._resources.match_template(f"tmpl{n - 1}://42/item") is not None
        assert tried == [f"tmpl{n - 1}://{{id}}/item"]
        tried.clear()
        assert server._resources.match_template("other://42/item") is None
        assert tried == []


async def test_read_through_the_index() -> None:
    server = MCPServer("read")

    @server.resource("notes://{id}")
    def note(id: str) -> str:
        return f"note {id}"

    @server.resource("notes://{id}/raw")
    def raw(id: str) -> str:
        return f"raw {id}"

    contents, _ = await server._resources.read("notes://3", None)
    assert contents[0].text == "note 3"
    contents, _ = await server._resources.read("notes://3/raw", None)
    assert contents[0].text == "raw 3"  # {id} never spans "/": the first template does not match
    with pytest.raises(ResourceNotFound):
        await server._resources.read("note://3", None)

"""UriTemplate: RFC 6570 level-2 matching of repeated variables and fragment expansion."""

from __future__ import annotations

import time

from mcpkit.server.resources import ResourceRegistry, UriTemplate


def test_a_repeated_variable_matches_only_the_same_value_at_each_place() -> None:
    # RFC 6570 section 3: a template is expanded from one value per variable.
    template = UriTemplate("x/{a}/{+b}/{a}")
    assert template.match("x/1/2/1") == {"a": "1", "b": "2"}
    assert template.match("x/1/2/3") is None  # was {'a': '3', 'b': '2'}: the last place won
    assert UriTemplate("x/{a}/{+b}.{a}").match("x/1/2/3.1") == {"a": "1", "b": "2/3"}


def test_a_name_used_as_simple_and_fragment_never_spans_a_slash() -> None:
    # Found by fuzz/uri_template.py: {d} took "1", then {#d} overwrote it with "1/2".
    template = UriTemplate("x{d}-{#d}")
    assert template.match("x1-#1") == {"d": "1"}
    assert template.match("x1-#1/2") is None
    assert template.match("x1-1/2") is None


def test_fragment_expansion_starts_with_a_hash() -> None:
    # RFC 6570 section 3.2.4: {#var} expands to "#" and the value (reserved characters kept).
    template = UriTemplate("page{#section}")
    assert template.match("page#intro/part") == {"section": "intro/part"}
    assert template.match("pageintro") is None
    assert UriTemplate("{a}{#b}").match("x#y") == {"a": "x", "b": "y"}


def test_the_registry_reads_a_repeated_variable_once() -> None:
    registry = ResourceRegistry()
    registry.add(lambda a: a, "x://{a}/{a}")
    assert registry.match_template("x://1/1") is not None
    assert registry.match_template("x://1/2") is None
    registry.add(lambda s: s, "doc{#s}")  # indexed by its leading literal "doc#"
    found = registry.match_template("doc#a/b")
    assert found is not None and found[1] == {"s": "a/b"}
    assert registry.match_template("doca/b") is None


def test_repeated_variables_match_in_linear_time() -> None:
    # Every place compares its own stretch of the URI once: 20,000 characters stay quick.
    template = UriTemplate("x{a}-{a}-{a}-{a}")
    long_value = "y" * 5_000
    uri = "x" + "-".join([long_value] * 4)
    start = time.process_time()
    for _ in range(100):
        assert template.match(uri) == {"a": long_value}
        assert template.match(uri[:-1] + "z") is None
        assert template.match("x" + "-" * 20_000) is None
    assert time.process_time() - start < 2.0

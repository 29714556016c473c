"""The resource URI-template matcher (RFC 6570 level 2, ``{var}``, ``{+var}`` and ``{#var}``).

Invariants, for any template and URI:

* :class:`UriTemplate` either compiles or raises ValueError;
* :meth:`match` returns None or values that rebuild the URI exactly when put back into the
  template, each non-empty, a ``{var}`` value never holding ``/``. A name used more than once
  (with one operator or several) has one value, as in RFC 6570 expansion, so that value must
  fit every place: a name used as ``{d}`` and ``{#d}`` never holds ``/`` either;
* a URI expanded from the template with values it can tell apart (no literal of the template
  inside them) matches, with those values;
* matching takes linear time: a long URI made to defeat a backtracking matcher is checked
  inside the per-input CPU budget (it is grown to 20,000 characters here).

Input layout: fields = template, URI, a value for every variable.
"""

from __future__ import annotations

from hypothesis import strategies as st

from mcpkit.server.resources import UriTemplate

from ._harness import Finding, Target, corpus_of, fields, joined, timed


def _expand(template: UriTemplate, values: dict[str, str]) -> str:
    out = [template.literals[0]]
    for i, (name, _) in enumerate(template.variables):
        out.append(values[name])
        out.append(template.literals[i + 1])
    return "".join(out)


def _check(template: UriTemplate, uri: str) -> None:
    values = template.match(uri)
    if values is None:
        return
    for name, reserved in template.variables:
        value = values.get(name)
        if not value or (not reserved and "/" in value):
            raise Finding(f"{template.template!r} matched {uri!r} with {name}={value!r}")
    if _expand(template, values) != uri:
        raise Finding(f"{template.template!r} matched {uri!r} with {values!r}, which rebuild another URI")


def one_input(data: bytes) -> None:
    text, uri, value = fields(data, 3)
    try:
        template = UriTemplate(text)
    except ValueError:
        return
    _check(template, uri)
    _check(template, (uri * (20_000 // max(len(uri), 1) + 1))[:20_000])
    names = template.names
    if not names or not value:
        return
    literals = [lit for lit in template.literals if lit]
    if any(lit in value for lit in literals) or any(value in lit for lit in literals):
        return
    plain = value.replace("/", "_")
    # A name used twice must read the same text at both places, so one value read short (its
    # end starts the next literal: "xZ" then literal "ZZ") fails the whole match instead of
    # giving another split: such values are ambiguous too when names repeat.
    if len(set(names)) != len(names) and any(
        (v + lit).find(lit) != len(v) for v in (value, plain) for lit in literals
    ):
        return
    simple = {name for name, reserved in template.variables if not reserved}
    values = {name: (plain if name in simple else value) for name in names}
    # A value may end as the next literal starts ("a" then literal "ab"): left-to-right matching
    # reads the literal's first occurrence, as documented; only unambiguous values are checked.
    expanded = _expand(template, values)
    got = template.match(expanded)
    if got is None:
        raise Finding(f"{template.template!r} does not match its own expansion {expanded!r}")


_pieces = st.lists(
    st.one_of(
        st.sampled_from(
            ["{a}", "{+b}", "{c}", "{#d}", "/", "://", "file", "x", ".", "-", "{", "}", "{a}{b}"]
        ),
        st.text(max_size=3),
    ),
    max_size=8,
).map("".join)
strategy: st.SearchStrategy[bytes] = st.one_of(
    st.builds(joined, _pieces, _pieces, st.text(min_size=1, max_size=8)),
    st.sampled_from(corpus_of("uri_template") or [b"file:///{+path}\x00file:///a/b\x00v"]),
)

TARGET = Target("uri_template", timed(one_input), strategy, ("mcpkit.server.resources",))

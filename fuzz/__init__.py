"""Fuzz harnesses for mcpkit: one module per target (see docs/fuzzing.md).

Each module defines ``TARGET`` (:class:`fuzz._harness.Target`): ``one_input(bytes)`` for
atheris and the corpus replay, and a hypothesis ``strategy``. ``tests/fuzz`` runs each briefly;
``python fuzz/run.py`` (``make fuzz``) runs them for as long as asked.
"""

#: Every target, by name (= module and corpus folder name).
TARGETS = (
    "envelope",
    "framing",
    "dispatch",
    "http_headers",
    "uri_template",
    "arguments",
    "sse",
    "oauth",
    "host_config",
    "mrtr",
)

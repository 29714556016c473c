"""The ``mcpkit`` command line."""

"""``python -m mcpkit.servers.openapi SPEC [OPTIONS]``: serve an OpenAPI-described API (stdio by default)."""

import sys

from . import main

sys.exit(main())

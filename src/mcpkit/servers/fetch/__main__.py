"""``python -m mcpkit.servers.fetch [OPTIONS]``: serve the fetch server (stdio by default)."""

import sys

from . import main

sys.exit(main())

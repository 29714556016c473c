"""``python -m mcpkit``: the command line."""

import sys

from mcpkit.cli.main import main

sys.exit(main())

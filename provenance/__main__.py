"""`python -m provenance report PATH` / `diff A B`: the `thunder-trace` command (provenance/cli.py)."""

import sys

from provenance.cli import main

sys.exit(main())

"""`python -m provenance.report report PATH`: the `thunder-trace` command (provenance/cli.py), as before
the command moved to the package's top."""

import sys

from provenance.cli import main

sys.exit(main())

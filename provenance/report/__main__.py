"""`python -m provenance.report report PATH`: the `thunder-trace` command."""

import sys

from provenance.report.cli import main

sys.exit(main())

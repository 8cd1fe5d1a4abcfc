"""Where things are, for tests in any folder of tests/ (and the programs they start)."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent  # these helpers
TESTS = SUPPORT.parent
ROOT = TESTS.parent  # the checkout
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"

"""Where things are, for tests in any folder of tests/ (and the programs they start)."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent  # these helpers
TESTS = SUPPORT.parent
ROOT = TESTS.parent  # the checkout
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"


def report_files(out: Path) -> list[Path]:
    """A report's files, relative to it, sorted: its pages and data, not the state an incremental
    report keeps beside them (provenance/report/incremental.py: the build's memory, which depends on
    how the build went, e.g. -j; every page does not)."""
    from provenance.report.incremental import STATE_DIR

    return sorted(p.relative_to(out) for p in out.rglob("*")
                  if p.is_file() and STATE_DIR not in p.relative_to(out).parts)

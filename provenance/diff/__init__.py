"""`thunder-trace diff A B`: what changed between two runs (docs/diff.md).

The pipeline, one module each: read.py (each side through the report's own reader and analysis,
its report written when a page is asked for) -> summarize.py (a digest per compile, from the
report's page models and roll-ups) -> match.py (what corresponds to what) -> compare.py (the
changes, significance, impact order) -> gate.py (--fail-on) -> render.py (terminal, JSON, HTML)
-> command.py (the CLI command)."""

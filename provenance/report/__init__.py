"""Reports from THUNDER_TRACE logs: reading, the render model, HTML, the CLI."""

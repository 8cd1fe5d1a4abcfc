"""thunder-provenance: where every line of a Thunder trace came from.

    import provenance
    provenance.enable()                      # or: with provenance.tracing(): ...
    jfn = thunder.jit(model); jfn(x)
    print(provenance.annotate(thunder.last_traces(jfn)[-1]))
    provenance.of(bsym)                      # -> Provenance | None
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from provenance.annotation import annotate
from provenance.record import Frame, Kind, Provenance, Span, of
from provenance.scope import current_span, scope
from provenance.stats import Coverage, coverage

__version__ = "0.1.0"

__all__ = [
    "Coverage", "Frame", "Kind", "Provenance", "Span", "annotate", "coverage", "current_span", "disable",
    "enable", "enabled", "load", "of", "scope", "tracing",
]


def enable(directory: str | os.PathLike[str] | None = None) -> bool:
    """Install the hooks into Thunder: every compile from now on records provenance.

    With `directory`, also log every compile there as JSONL (one file per process; what
    `THUNDER_TRACE=directory` does with no code change). A directory that cannot be created or
    written gets one warning, and the program runs on untraced: returns False.
    """
    from provenance import thunder as integration

    if directory is not None:
        from exporters.jsonl import JsonlExporter, UnwritableDirectory
        from provenance.session import SESSION, process_rank

        try:
            exporter = JsonlExporter(os.fspath(directory), rank=lambda: process_rank()[0])
        except UnwritableDirectory as exc:
            warnings.warn(f"thunder-provenance: {exc}; the program runs without tracing.", RuntimeWarning,
                          stacklevel=2)
            return False
        SESSION.add_exporter(exporter)
    integration.install()
    return True


def disable() -> None:
    """Remove every hook (Thunder then runs exactly as without this package) and close the logs."""
    from provenance import thunder as integration
    from provenance.session import SESSION

    integration.uninstall()
    SESSION.close()


def enabled() -> bool:
    from provenance import thunder as integration

    return integration.installed()


@contextmanager
def tracing(directory: str | os.PathLike[str] | None = None) -> Iterator[None]:
    """Enable provenance (and JSONL logs in `directory`) inside the block; restore after it."""
    was_enabled = enabled()
    enable(directory)
    try:
        yield
    finally:
        if not was_enabled:
            disable()


def load(path: str | os.PathLike[str]):  # noqa: ANN201 - see provenance.report.reader.Log
    """Stream a THUNDER_TRACE log file, or a directory of them, back into records."""
    from provenance.report.reader import Log

    return Log(path)

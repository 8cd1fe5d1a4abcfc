"""thunder-provenance: where every line of a Thunder trace came from.

    import provenance
    provenance.enable()                      # or: with provenance.tracing(): ...
    jfn = thunder.jit(model); jfn(x)
    print(provenance.annotate(thunder.last_traces(jfn)[-1]))
    provenance.of(bsym)                      # -> Provenance | None
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from provenance.annotation import annotate
from provenance.record import Frame, Kind, Provenance, Span, of
from provenance.scope import current_span, scope
from provenance.stats import Coverage, coverage

__version__ = "0.1.0"

__all__ = [
    "Coverage", "Frame", "Kind", "Provenance", "Span", "annotate", "coverage", "current_span", "disable",
    "enable", "enabled", "of", "scope", "tracing",
]


def enable() -> None:
    """Install the hooks into Thunder: every compile from now on records provenance."""
    from provenance import thunder as integration

    integration.install()


def disable() -> None:
    """Remove every hook: Thunder runs exactly as without this package."""
    from provenance import thunder as integration

    integration.uninstall()


def enabled() -> bool:
    from provenance import thunder as integration

    return integration.installed()


@contextmanager
def tracing() -> Iterator[None]:
    """Enable provenance inside the block; restore the previous state after it."""
    was_enabled = enabled()
    enable()
    try:
        yield
    finally:
        if not was_enabled:
            disable()

"""thunder-provenance: where every line of a Thunder trace came from.

    import provenance
    provenance.enable()                      # or: with provenance.tracing(): ...
    jfn = thunder.jit(model); jfn(x)
    print(provenance.annotate(thunder.last_traces(jfn)[-1]))
    provenance.of(bsym)                      # -> Provenance | None
    provenance.fx_graphs(thunderfx_fn)       # ThunderFX: Dynamo graphs, pieces, split reasons
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from provenance.annotation import annotate
from provenance.graphs import DynamoGraph, GraphBreak, Piece, SplitReason
from provenance.record import Frame, Kind, Provenance, Span, of
from provenance.scope import current_span, scope
from provenance.stats import Coverage, coverage

__version__ = "0.1.0"

__all__ = [
    "Coverage", "DynamoGraph", "Frame", "GraphBreak", "Kind", "Piece", "Provenance", "Span", "SplitReason",
    "annotate", "coverage", "current_span", "disable", "enable", "enabled", "fx_graphs", "graph_breaks", "load",
    "of", "scope", "tracing", "wait_counters",
]


def enable(directory: str | os.PathLike[str] | None = None, *, wait_counters: bool | None = None) -> bool:
    """Install the hooks into Thunder: every compile from now on records provenance.

    With `directory`, also log every compile there as JSONL (one file per process; what
    `THUNDER_TRACE=directory` does with no code change). A directory that cannot be created or
    written gets one warning, and the program runs on untraced: returns False.
    When OpenTelemetry is configured (an application TracerProvider, or OTEL_EXPORTER_OTLP_*
    endpoints; see exporters/otel.py), spans and metrics also go there.
    `wait_counters` (default: THUNDER_TRACE_WAIT_COUNTERS=1) counts time blocked in collective
    waits (`provenance.wait_counters()`, and OTel metrics); it wraps every wait Thunder generates.
    """
    from exporters.otel import OtelExporter, from_environment
    from provenance import thunder as integration
    from provenance.session import SESSION, process_rank
    from provenance.waits import WAITS

    if wait_counters is None:
        wait_counters = os.environ.get("THUNDER_TRACE_WAIT_COUNTERS", "").strip().lower() in ("1", "true")
    if directory is not None:
        from exporters.jsonl import JsonlExporter, UnwritableDirectory

        try:
            exporter = JsonlExporter(os.fspath(directory), rank=lambda: process_rank()[0])
        except UnwritableDirectory as exc:
            warnings.warn(f"thunder-provenance: {exc}; the program runs without tracing.", RuntimeWarning,
                          stacklevel=2)
            return False
        SESSION.add_exporter(exporter)
    otel = next((e for e in SESSION.exporters if isinstance(e, OtelExporter)), None)
    if otel is None and (otel := from_environment(rank=process_rank()[0])) is not None:
        SESSION.add_exporter(otel)
    integration.install(wait_counters=wait_counters)
    if wait_counters and otel is not None and not getattr(otel, "observing_waits", False):
        otel.observe_waits(WAITS.snapshot)
        otel.observing_waits = True
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
    from provenance.session import SESSION

    was_enabled, before = enabled(), list(SESSION.exporters)
    enable(directory)
    try:
        yield
    finally:
        if not was_enabled:
            disable()
        else:  # tracing was on already (THUNDER_TRACE): only close what this block added
            for exporter in [e for e in SESSION.exporters if e not in before]:
                SESSION.remove_exporter(exporter)


def wait_counters() -> dict[tuple[str | None, str | None], tuple[float, int]]:
    """{(role, module): (seconds blocked in collective waits, waits in progress)}; see provenance.waits."""
    from provenance.waits import WAITS

    return WAITS.snapshot()


def fx_graphs(compiled: object = None) -> list[DynamoGraph]:
    """ThunderFX: the Dynamo graphs `compiled` handed to Thunder, oldest first, each with the
    pieces Thunder's splitter cut it into (Thunder's or a torch fallback, and why) and the
    thunder.jit compiles of each piece. `compiled`: what `thunder.dynamo.thunderfx` returned,
    the `ThunderCompiler` given to `torch.compile`, or the module `torch.compile` returned;
    None: the process's most recent graphs. Recorded while tracing is enabled."""
    from provenance.thunder import thunderfx

    return thunderfx.graphs(compiled)


def graph_breaks(compiled: object = None) -> list[GraphBreak]:
    """ThunderFX: Dynamo's graph breaks (torch's reason, the user's line) in what `compiled`
    compiled (as for `fx_graphs`; None: all recent ones). Recorded while tracing is enabled."""
    from provenance.thunder import thunderfx

    return thunderfx.breaks(compiled)


def load(path: str | os.PathLike[str]):  # noqa: ANN201 - see provenance.report.reader.Log
    """Stream a THUNDER_TRACE log file, or a directory of them, back into records."""
    from provenance.report.reader import Log

    return Log(path)

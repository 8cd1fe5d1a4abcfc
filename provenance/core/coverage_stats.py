"""How much of a trace carries provenance: the figure the capture core is judged by.

Reads records only; which symbols without one are bookkeeping is the caller's rule
(provenance.thunder.passes.is_bookkeeping, which `provenance.coverage` passes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from provenance.core.attribution import at_module_file
from provenance.core.record import Kind, of

__all__ = ["Coverage", "coverage"]


@dataclass
class Coverage:
    total: int = 0
    with_provenance: int = 0
    with_user_source: int = 0  # a frame of the user's own code
    with_module: int = 0  # an nn.Module path ("" is the root module)
    bookkeeping: int = 0
    compute: int = 0  # not bookkeeping
    compute_with_user_source: int = 0
    compute_with_module: int = 0
    compute_at_module_file: int = 0  # of compute_with_user_source: the line in its module's own file
    missing: list = field(default_factory=list)  # bound symbols without provenance

    @property
    def fraction(self) -> float:
        return self.with_provenance / self.total if self.total else 1.0

    def __str__(self) -> str:
        return (f"{self.with_provenance}/{self.total} with provenance, "
                f"{self.compute_with_user_source}/{self.compute} compute ops at user source, "
                f"{self.compute_with_module}/{self.compute} with module, {self.bookkeeping} bookkeeping")


def _walk(bsyms: Iterable[Any], deep: bool) -> Iterable[Any]:
    for bsym in bsyms:
        yield bsym
        if deep and bsym.subsymbols:
            yield from _walk(bsym.subsymbols, deep)


def coverage(trace: Any, is_bookkeeping: Callable[[Any], bool], *, deep: bool = False) -> Coverage:
    """Counts over the trace's top-level bound symbols (every nesting level with `deep=True`);
    `is_bookkeeping(symbol)` classifies the symbols without a record."""
    cov = Coverage()
    for bsym in _walk(trace.bound_symbols, deep):
        record = of(bsym)
        cov.total += 1
        if record is None:
            cov.missing.append(bsym)
            bookkeeping = is_bookkeeping(bsym.sym)
        else:
            cov.with_provenance += 1
            bookkeeping = record.kind == Kind.BOOKKEEPING
        # a fusion has the user lines and modules of its members
        covered = (record,) if record is None or record.kind != Kind.FUSION else record.members
        user = any(r is not None and r.user_frame is not None for r in covered)
        model = user and any(at_module_file(r) for r in covered if r is not None)
        module = any(r is not None and r.module is not None for r in covered)
        cov.with_user_source += user
        cov.with_module += module
        if bookkeeping:
            cov.bookkeeping += 1
        else:
            cov.compute += 1
            cov.compute_with_user_source += user
            cov.compute_at_module_file += model
            cov.compute_with_module += module
    return cov

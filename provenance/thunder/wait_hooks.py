"""The hooks that time the collective waits Thunder's torch executor generates (opt-in), into the
counters of provenance.timing.waits.

`torch_wait_prim_impl` reaches generated code through the call context its symbol gives every
bound symbol (one shared dict). We put a counting wrapper there, so code generated from then on
calls it. The wrapper finds its call site from the calling frame (the generated function's code
object and line), which a table built at compile end maps to the wait's provenance.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from provenance.core.caches import CACHES
from provenance.core.record import BSYM_ATTR as ATTR
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.state import fail
from provenance.timing.waits import WAITS

T = api()  # this Thunder's objects (compat.py)
TraceCtx = T.TraceCtx
WAIT_SYMBOL = T.names["wait_symbol"]
# id(code) -> (code, {line: (role, module)}) per generated function. Keyed by id (hashing a code
# object hashes its contents); the entry holds the code, so its id is not reused meanwhile.
_sites = CACHES.memo("waits.sites", 1 << 12)
_UNKNOWN = (None, None)
_NO_LINES: dict = {}


def call_ctx() -> dict[str, Callable]:
    postprocess = getattr(T.torch_executor.opmap[WAIT_SYMBOL], T.names["bind_postprocess"])
    cell = postprocess.__closure__[postprocess.__code__.co_freevars.index(T.names["bind_call_ctx"])]
    return cell.cell_contents


def install(running: Capture) -> None:
    patcher = running.patcher
    ctx = call_ctx()
    original = ctx[WAIT_SYMBOL]

    def torch_wait_prim_impl(a: Any, /) -> Any:
        caller = sys._getframe(1)
        lines = _sites.get(id(caller.f_code), (None, _NO_LINES))[1]
        token = WAITS.begin(lines.get(caller.f_lineno, _UNKNOWN))
        try:
            return original(a)
        finally:
            WAITS.end(token)

    patcher.set_item(ctx, WAIT_SYMBOL, torch_wait_prim_impl)
    patcher.wrap(TraceCtx, "python_callable", _python_callable)
    running.waits_active = True


def _python_callable(orig: Callable) -> Callable:
    """Every generated function: map its wait calls (exactly the text it was compiled from)."""

    def python_callable(self: TraceCtx, **kwargs: Any) -> Callable:
        fn = orig(self, **kwargs)
        try:
            if not kwargs:  # the default printing, which printed_layout reproduces
                register_sites(fn, self)
        except Exception as exc:
            fail("waits", exc)
        return fn

    return python_callable


def register_sites(fn: Any, trace: Any) -> None:
    """Map the wait calls of `fn` (generated from `trace`) to their provenance."""
    from provenance.thunder.printing import printed_layout

    placed = [p for p in printed_layout(trace)[1] if p[0].sym.name == WAIT_SYMBOL]
    if not placed:
        return
    code = inspect.unwrap(fn).__code__
    lines: dict[int, tuple[str | None, str | None]] = {}
    for bsym, start, length in placed:
        record = bsym.__dict__.get(ATTR)
        key = (record.role, record.module) if record is not None else _UNKNOWN
        for line in range(start + 1, start + length + 1):  # code lines are 1-based
            lines[line] = key
    _sites.put(id(code), (code, lines))

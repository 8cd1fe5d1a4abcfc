"""The hooks that time the collective waits Thunder's torch executor generates (opt-in), into the
counters of provenance.timing.waits.

`torch_wait_prim_impl` reaches generated code through the call context its symbol gives every
bound symbol (one shared dict). We put a counting wrapper there, so code generated from then on
calls it. The wrapper finds its call site from the calling frame (the generated function's code
object and line), which a table built at compile end maps to the wait's site: its provenance's
(role, module), and the collective whose result it waits for (the op that made its argument).

With a log being written too, `watch()` starts the watchdog that writes long waits to it
(provenance.timing.waits.WaitWatch): started by enable(), stopped and joined by disable() (the
capture's `on_stop`). A forked child has no watchdog (the parent's thread does not exist there)
until it enables tracing again; its counters start with no wait in progress.
"""

from __future__ import annotations

import atexit
import inspect
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from provenance.core.caches import CACHES
from provenance.core.record import BSYM_ATTR as ATTR
from provenance.log.session import SESSION
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.state import check_fault, fail, warn_internal
from provenance.timing.waits import WAITS, Site, WaitWatch

T = api()  # this Thunder's objects (compat.py)
TraceCtx = T.TraceCtx
WAIT_SYMBOL = T.names["wait_symbol"]
# id(code) -> (code, {line: ((role, module), op)}) per generated function. Keyed by id (hashing a
# code object hashes its contents); the entry holds the code, so its id is not reused meanwhile.
_sites = CACHES.memo("waits.sites", 1 << 12)
_UNKNOWN: Site = ((None, None), None)
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

    _register_fork_handler()
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

    placed = printed_layout(trace)[1]
    if not any(p[0].sym.name == WAIT_SYMBOL for p in placed):
        return
    code = inspect.unwrap(fn).__code__
    lines: dict[int, Site] = {}
    made_by: dict[str, str] = {}  # a collective's output (a future) -> the collective
    for bsym, start, length in placed:
        name = bsym.sym.name
        if name != WAIT_SYMBOL:
            if name.endswith(_COLLECTIVE_SUFFIX):
                made_by.update((out.name, name) for out in bsym.flat_proxy_outs)
            continue
        record = bsym.__dict__.get(ATTR)
        key = (record.role, record.module) if record is not None else _UNKNOWN[0]
        op = next((made_by[a.name] for a in bsym.flat_proxy_args if a.name in made_by), None)
        site = (key, op)
        for line in range(start + 1, start + length + 1):  # code lines are 1-based
            lines[line] = site
    _sites.put(id(code), (code, lines))


_COLLECTIVE_SUFFIX = "_prim_impl"  # the torch executor's collectives: torch_all_reduce_prim_impl, ...


# -- the watchdog: long waits into the log ----------------------------------------------------------
_watch: WaitWatch | None = None
_watch_lock = threading.Lock()
_fork_handler = False


def watch(running: Capture) -> None:
    """Start the watchdog that writes long waits to the log (idempotent), until `running` stops."""
    global _watch
    with _watch_lock:
        if _watch is not None and _watch.alive:
            return
        _register_fork_handler()
        _watch = WaitWatch(WAITS, SESSION.emit, lambda: SESSION.active, _watch_failed,
                           check=lambda: check_fault("wait_watch"))
        _watch.start()
        running.on_stop.append(unwatch)
        atexit.register(unwatch)  # before the session's exit handler closes the log (atexit: last in, first out)


def unwatch() -> None:
    """Stop and join the watchdog (it writes "done" for the waits it announced that returned)."""
    global _watch
    with _watch_lock:
        found, _watch = _watch, None
        atexit.unregister(unwatch)
    if found is not None:
        found.stop()


def _watch_failed(exc: BaseException) -> None:
    warn_internal("wait_watch", exc, "long collective waits are no longer logged; wait counters and tracing go on")


def _register_fork_handler() -> None:
    """Once per process (os.register_at_fork cannot unregister); it does little when nothing runs."""
    global _fork_handler
    if not _fork_handler:
        _fork_handler = True
        os.register_at_fork(after_in_child=_after_fork_in_child)


def _after_fork_in_child() -> None:
    """The parent's watchdog thread does not exist in a child: drop it (never joined), and the
    parent's waits in progress with it."""
    global _watch, _watch_lock
    _watch, _watch_lock = None, threading.Lock()
    WAITS.after_fork_in_child()

"""torch's structured trace (what TORCH_TRACE writes and tlparse reads) in THUNDER_TRACE's log.

torch's compiler writes its artifacts (Dynamo's output graph and guards, AOTAutograd's graphs,
inductor's generated code, symbolic shapes, cache outcomes, compilation metrics) with
`trace_structured`, which makes them only when its logger, `torch.__trace`, has a handler. While
the session keeps trace text (the JSONL log does: `SESSION.wants_trace_text`), a handler of ours is
on that logger and each artifact becomes a `torch_trace` record, tied to its Dynamo graph by torch's
compile id ("0/1"). With no such exporter nothing is attached and torch skips the work, as it does
without TORCH_TRACE. THUNDER_TRACE_TORCH=0 leaves it off.

Each record becomes an event by the record's encoder (provenance.dynamo.torch_trace.Encoder: the
bounds, the interned file names resolved, the frames marked as the user's by
provenance.thunder.frames' rule, torch's intern table read for names interned before we listened).

Only the artifacts of ThunderFX's frame compiles are written, whatever the frame made (a graph, or a
failure: its `dynamo_error`, its `compilation_metrics`). Which backend compiles a frame is known at
Dynamo's start callback (fx_compile.py: `keep`); what comes before it, and the frames of any other
backend, are held (at most MAX_HELD frame compiles, MAX_HELD_CHARS each) until then or until the frame
compile ends (`frame_ended`: Thunder's torch.compile executor's fusions, a plain torch.compile's frames;
counted, not written). A graph made later for a kept compile id (a lazy backward's) is written at once.

The handler is put back at each Dynamo frame compile if something removed it (torch's own `set_logs`
keeps handlers it did not make; other code may not), and removed when capture stops. An internal
error of ours stops it for the rest of the capture, with one warning; the compile and its records go on.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, OrderedDict

from provenance.dynamo.torch_trace import Encoder
from provenance.log.session import SESSION
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.frames import is_user_path
from provenance.thunder.state import check_fault, warn_internal

T = api()  # this torch's trace logger (compat.py)

MAX_HELD = 64  # frame compiles whose artifacts wait to be known ThunderFX's
MAX_HELD_CHARS = 32 << 20  # characters of payload one waiting frame compile holds
MAX_KEPT = 4096  # compile ids known ThunderFX's (later artifacts of theirs: a lazy backward's)


def wanted() -> bool:
    return os.environ.get("THUNDER_TRACE_TORCH", "").strip() != "0"


class TorchTraceHandler(logging.Handler):
    """Turns each record of torch's trace logger into a `torch_trace` event."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.encoder = Encoder(is_user_path, lambda: T.intern_table)
        self.failed = False  # an internal error: no more of torch's trace in this capture
        # a frame compile's artifacts wait here until its backend call is ThunderFX's (keep) or it ends (dropped)
        self.held: OrderedDict[str, tuple[list[dict], list[int]]] = OrderedDict()
        self.kept: OrderedDict[str, None] = OrderedDict()
        self.holding = threading.Lock()  # not `lock`: logging.Handler.handle holds that one around emit

    @property
    def left_out(self) -> Counter[str]:
        return self.encoder.left_out

    def emit(self, record: logging.LogRecord) -> None:  # never raises into torch
        if self.failed:
            return
        try:
            check_fault("torch_trace")
            if SESSION.wants_trace_text:
                self._emit(record)
        except Exception as exc:
            # not the compile's fault: torch's trace stops, the compile and its own records go on
            self.failed = True
            warn_internal("torch_trace", exc, "torch's structured trace is no longer logged; tracing goes on")

    def _emit(self, record: logging.LogRecord) -> None:
        event = self.encoder.encode(getattr(record, "metadata", None), getattr(record, "payload", None),
                                    time.time_ns())
        if event is not None:
            self._route(event, len(event.get("payload", "")))

    def _route(self, event: dict, chars: int) -> None:
        """Written now if its frame compile is ThunderFX's, else held until that is known."""
        key = event["compile_id"]
        with self.holding:
            if key is not None and key not in self.kept:
                if key not in self.held and len(self.held) >= MAX_HELD:
                    self.held.popitem(last=False)
                    self.left_out["frame compiles past MAX_HELD"] += 1
                events, size = self.held.setdefault(key, ([], [0]))
                if size[0] + chars > MAX_HELD_CHARS:
                    self.left_out["held payload past MAX_HELD_CHARS"] += 1
                else:
                    events.append(event)
                    size[0] += chars
                return
        if key is None:
            self.left_out["no compile id"] += 1
            return
        SESSION.emit(event)  # type: ignore[arg-type]

    def keep(self, compile_id: str) -> None:
        """The frame compile `compile_id` made a ThunderFX graph: its artifacts are written, now and later."""
        with self.holding:
            self.kept[compile_id] = None
            while len(self.kept) > MAX_KEPT:
                self.kept.popitem(last=False)
            events, _ = self.held.pop(compile_id, ([], None))
        for event in events:
            SESSION.emit(event)  # type: ignore[arg-type]

    def frame_ended(self, compile_id: str) -> None:
        """A frame compile ended: what it still holds was not ThunderFX's (Thunder's torch.compile
        executor's fusions, a plain torch.compile's frames), and is not written."""
        with self.holding:
            found = self.held.pop(compile_id, None)
            if found is not None:
                self.left_out["not ThunderFX's"] += len(found[0])


def attach(running: Capture) -> None:
    """Our handler on torch's trace logger, if the session keeps text and none is there."""
    handler = running.torch_trace
    if handler is None or not SESSION.wants_trace_text:
        return
    logger = T.trace_log
    if handler not in logger.handlers:
        logger.addHandler(handler)


def install(running: Capture) -> None:
    if not wanted():
        return
    running.torch_trace = TorchTraceHandler()
    attach(running)

    def stop() -> None:
        T.trace_log.removeHandler(running.torch_trace)
        running.torch_trace = None

    running.on_stop.append(stop)

"""torch's structured trace (what TORCH_TRACE writes and tlparse reads) in THUNDER_TRACE's log.

torch's compiler writes its artifacts (Dynamo's output graph and guards, AOTAutograd's graphs,
inductor's generated code, symbolic shapes, cache outcomes, compilation metrics) with
`trace_structured`, which makes them only when its logger, `torch.__trace`, has a handler. While
the session keeps trace text (the JSONL log does: `SESSION.wants_trace_text`), a handler of ours is
on that logger and each artifact becomes a `torch_trace` record, tied to its Dynamo graph by torch's
compile id ("0/1"). With no such exporter nothing is attached and torch skips the work, as it does
without TORCH_TRACE. THUNDER_TRACE_TORCH=0 leaves it off.

Bounded as every record is: a payload is cut at MAX_PAYLOAD characters (a cache outcome's, whose
key components torch lists in full each time, at MAX_CACHE_PAYLOAD) and a process's payloads at
MAX_TOTAL (later records keep their metadata and say how long the payload was); a string in metadata
is cut at MAX_FIELD characters (compilation_metrics repeats torch's config dumps), and metadata past
MAX_METADATA bytes is replaced by its size. torch interns file names (its `str` records; its intern
table for those interned before the handler listened): they are resolved into the frames that name
them (at most MAX_STRINGS names), each frame marked as the user's code or not by
provenance.core.usercode's rule (`user`). torch's `chromium_event` timings are left out (fx_compile.py
times the graph's phases), as are its `describe_*` records (meta-tensor descriptions, one per tensor
input: hundreds per model); both are counted.

The handler is put back at each Dynamo frame compile if something removed it (torch's own `set_logs`
keeps handlers it did not make; other code may not), and removed when capture stops. An internal
error of ours stops it for the rest of the capture, with one warning; the compile and its records go on.
"""

from __future__ import annotations

import logging
import os
import re
import time
import traceback
import warnings
from collections import Counter
from typing import Any

import orjson

from provenance.log.session import SESSION
from provenance.thunder.capture import Capture
from provenance.thunder.compat import api
from provenance.thunder.frames import is_user_path
from provenance.thunder.state import check_fault

T = api()  # this torch's trace logger (compat.py)

MAX_PAYLOAD = 1 << 20  # characters of one artifact's payload
MAX_TOTAL = 64 << 20  # characters of payload per process
MAX_METADATA = 64 << 10  # bytes of one artifact's metadata, as JSON
MAX_FIELD = 2000  # characters of one string in metadata (compilation_metrics' config dumps: 16 KB each time)
MAX_CACHE_PAYLOAD = 16 << 10  # characters of a cache outcome's payload (its key's components: 45 KB each time)
MAX_STRINGS = 1 << 16  # interned file names remembered
MAX_DEPTH = 8  # levels of metadata walked to resolve file names
# the keys of torch's metadata that say where an artifact comes from, not what it is
CONTEXT = frozenset({"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload",
                     "stack"})
LEFT_OUT = frozenset({"chromium_event", "describe_storage", "describe_tensor", "describe_source"})
_CACHE = re.compile(r"cache_(hit|miss|bypass)$")


def wanted() -> bool:
    return os.environ.get("THUNDER_TRACE_TORCH", "").strip() != "0"


def compile_id(metadata: dict) -> str | None:
    """torch's CompileId as its str() writes it: "0/1", "!2/0/1" under compiled autograd."""
    frame, attempt_of = metadata.get("frame_id"), metadata.get("frame_compile_id")
    autograd = metadata.get("compiled_autograd_id")
    frame_part = f"{frame}/{attempt_of}" if type(frame) is int and type(attempt_of) is int else None
    if type(autograd) is int:
        return f"!{autograd}/{frame_part}" if frame_part else f"!{autograd}"
    return frame_part


class TorchTraceHandler(logging.Handler):
    """Turns each record of torch's trace logger into a `torch_trace` event."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.strings: dict[int, str] = {}
        self.payload_chars = 0  # kept so far (MAX_TOTAL)
        self.left_out: Counter[str] = Counter()  # by name: LEFT_OUT kinds, and payloads past MAX_TOTAL
        self.failed = False  # an internal error: no more of torch's trace in this capture

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
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            warnings.warn(f"thunder-provenance: internal error in hook 'torch_trace' ({detail}); torch's "
                          f"structured trace is no longer logged; tracing goes on.", RuntimeWarning, stacklevel=2)

    def _emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        name = next((k for k in metadata if k not in CONTEXT), None)
        if name is None:
            return
        value = metadata[name]
        if name == "str":  # an interned file name: ["path", id]
            if isinstance(value, list | tuple) and len(value) == 2 and len(self.strings) < MAX_STRINGS:
                self.strings[value[1]] = str(value[0])
            return
        if name in LEFT_OUT:
            self.left_out[name] += 1
            return
        if name == "artifact" and isinstance(value, dict) and isinstance(value.get("name"), str):
            name = value["name"]  # torch's generic artifacts: their own name
        event: dict[str, Any] = {"type": "torch_trace", "name": name[:200], "compile_id": compile_id(metadata),
                                 "attempt": metadata.get("attempt") if type(metadata.get("attempt")) is int else None,
                                 "time_ns": time.time_ns(), "metadata": self._metadata(value)}
        payload = getattr(record, "payload", None)
        if isinstance(payload, str):
            most = MAX_CACHE_PAYLOAD if _CACHE.search(name) else MAX_PAYLOAD
            kept = payload[:most] if self.payload_chars + min(len(payload), MAX_PAYLOAD) <= MAX_TOTAL else None
            if kept is None:
                self.left_out["payload past MAX_TOTAL"] += 1
            else:
                self.payload_chars += len(kept)
                event["payload"] = kept
            if kept is None or len(kept) < len(payload):
                event["payload_chars"] = len(payload)
        SESSION.emit(event)  # type: ignore[arg-type]

    def _metadata(self, value: Any) -> Any:
        """torch's metadata, JSON-safe and bounded, its interned file names resolved."""
        resolved = self._resolve(value, 0)
        data = orjson.dumps(resolved, default=repr, option=orjson.OPT_NON_STR_KEYS)
        if len(data) > MAX_METADATA:
            return {"dropped_bytes": len(data)}
        return orjson.loads(data)

    def _file(self, index: int) -> str:
        """An interned file name; one torch interned before this handler listened, from its table."""
        found = self.strings.get(index)
        if found is None and len(self.strings) < MAX_STRINGS:
            table = T.intern_table
            if len(table) > len(self.strings):
                for name, i in list(table.items())[:MAX_STRINGS]:
                    self.strings.setdefault(i, name)
            found = self.strings.get(index)
        return found if found is not None else f"<file {index}>"

    def _resolve(self, value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            return value
        if isinstance(value, dict):
            out = {k: self._resolve(v, depth + 1) for k, v in value.items()}
            if type(out.get("filename")) is int:  # a frame of a structured stack: its file, and whose code
                out["filename"] = path = self._file(out["filename"])
                out["user"] = is_user_path(path)
            return out
        if isinstance(value, list | tuple):
            return [self._resolve(v, depth + 1) for v in value]
        if isinstance(value, str) and len(value) > MAX_FIELD:
            return f"{value[:MAX_FIELD]}... ({len(value)} characters)"
        return value


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

"""`thunder-trace report DIR --watch`: the report kept current while the job writes its logs.

Every SECONDS the logs' sizes and times are looked at; when they changed, the report is built again
(incremental.py: taken up where the logs grew, so a rebuild costs what is new) with live.js saying
which rebuild it is. The pages poll live.js (a script tag: pages opened from file:// may load
scripts, not read files; no server) and reload when it changes; the index's "what each rank is
doing" counts up from its data in between. Ctrl-C or SIGTERM ends the watch with the report a
batch build of the same logs writes (live.js says the report is done; the pages stop polling).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provenance.report.console import say

__all__ = ["SILENT_S", "watch"]

SILENT_S = 120.0  # a rank with no record for this long is marked silent (the page's script)


def _stamp(paths: list[str]) -> list[tuple[str, int, int]]:
    """What changes when a log is written: every file's name, size and modification time."""
    found = []
    for path in paths:
        try:
            entries = list(os.scandir(path)) if os.path.isdir(path) else [Path(path)]
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat()
            except OSError:
                continue
            found.append((str(entry), st.st_size, st.st_mtime_ns))
    return sorted(found)


def _has_logs(path: str) -> bool:
    """Whether a log (or an OTLP/JSON export) is there to report yet: what the report would read."""
    from provenance.report.read.exports import otlp_files
    from provenance.report.read.log_file import log_files

    try:
        files = log_files(path)[0]
    except OSError:
        return False
    return bool(files) or bool(otlp_files(path, files))


def watch(args: argparse.Namespace, once: Callable[[argparse.Namespace, dict[str, Any] | None], int]) -> int:
    """Rebuild while the logs change; then, however the watch ends (Ctrl-C, SIGTERM, a signal caught
    mid-rebuild), the batch build: the pages stop polling."""
    interval = max(0.2, float(args.watch))
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    paths = [args.path] + ([args.torch_trace] if args.torch_trace else [])
    seen = None
    generation = 0
    code = 0
    waiting = False
    try:
        while not stop.is_set():
            now = _stamp(paths)
            if now != seen:
                seen = now
                if not _has_logs(args.path):  # the job has not written its first log yet (or they are gone)
                    if not waiting:
                        say(f"thunder-trace: watching {args.path} for logs (Ctrl-C ends it)")
                    waiting = True
                    stop.wait(interval)
                    continue
                waiting = False
                generation += 1
                try:
                    code = once(args, {"live": True, "generation": generation,
                                       "interval_ms": int(interval * 1000), "silent_s": SILENT_S})
                except (SystemExit, KeyboardInterrupt):  # a signal a rebuild caught for itself (its spool's)
                    stop.set()
                args.overwrite = False  # what OUT held is replaced once; then the report is taken up
            stop.wait(interval)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not _has_logs(args.path):
        if not generation:
            say(f"thunder-trace: the watch ended before a log was written in {args.path}: no report")
            return 2
        _done(args, "the logs are gone: the report is the last rebuild's, and its pages no longer poll")
        return 1
    say("thunder-trace: the watch ended: the report is written as a batch build writes it")
    final = once(args, None)
    if final == 2:  # the batch build could not be made (the logs went away meanwhile): the pages stop polling
        _done(args, "the report is the last rebuild's, and its pages no longer poll")
    return final if final else code if code == 1 else 0


def _done(args: argparse.Namespace, what: str) -> None:
    """live.js says the report is done, in an OUT this tool made."""
    from provenance.report.render.output import MARKER_FILE, write_live

    out = Path(args.out)
    if (out / MARKER_FILE).is_file():
        write_live(out, None)
    say(f"thunder-trace: {what}")

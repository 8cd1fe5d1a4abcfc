"""`thunder-trace report`: the command's work, imported when it runs (cli.py holds its options).

Which logs (`--latest`, `--rank`), the output directory, the worker count, the progress bar, the
summary and warnings on stderr, the browser, the exit status (cli.py's docstring).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from provenance.report.build import Report, build_report
from provenance.report.console import fail, open_in_browser, say
from provenance.report.incremental import Busy, Keeper, OutLock, Plan, plan
from provenance.report.jobs import auto_jobs, quiet_gc
from provenance.report.numbers import valid_text
from provenance.report.plural import plural
from provenance.report.read.exports import otlp_files
from provenance.report.read.log_file import NotALog, SchemaError, log_files, sniff, torch_trace_directory
from provenance.report.read.processes import label_logs
from provenance.report.render.output import prepare_out, write_live

__all__ = ["run"]

PROGRESS_MIN_BYTES = 16 << 20  # smaller inputs take a moment: no bar
MAX_NAMED = 5  # logs named, each with why it is read whole


def _select(path: str, latest: bool, rank: int | None, spool: _Spool | None = None
            ) -> tuple[list[Path], list[dict | None], list[tuple[Path, str]]]:
    """The logs to read, their headers, and the files passed over (with why); with a `spool`, the
    OTLP/JSON exports at `path` too, rebuilt there as logs (merged with the JSONL logs given)."""
    candidates, skipped = log_files(path)
    files, headers = [], []
    for candidate in candidates:
        try:
            headers.append(sniff(candidate))  # SchemaError for another major version
            files.append(candidate)
        except NotALog as exc:
            skipped.append((candidate, str(exc)))
        except OSError as exc:
            skipped.append((candidate, f"cannot be read ({exc.strerror or exc})"))
    if spool is not None:
        spool.rebuild(path, files, headers, skipped)
    if not files:
        if not Path(path).is_dir():
            raise NotALog(f"{path}: {skipped[0][1]}")
        for file, reason in skipped:
            say(f"thunder-trace: {file.name}: {reason}")
        if not skipped and torch_trace_directory(Path(path)):
            raise NotALog(f"{path}: this looks like a TORCH_TRACE directory: give it after the THUNDER_TRACE "
                          "directory of the same run (thunder-trace report THUNDER_DIR TORCH_DIR), or read it "
                          "with tlparse")
        raise FileNotFoundError(f"no THUNDER_TRACE log or OTLP/JSON export in {path!r}")
    if rank is not None:
        chosen = [(f, h) for f, h in zip(files, headers) if h is not None and type(h.get("rank")) is int
                  and h["rank"] == rank]
        if not chosen:
            ranks = sorted({h.get("rank") for h in headers if h is not None and isinstance(h.get("rank"), int)})
            known = ", ".join(map(str, ranks)) or "none"
            raise FileNotFoundError(f"no log of rank {rank} in {path!r} (ranks: {known})")
        files, headers = [f for f, _ in chosen], [h for _, h in chosen]
    if latest and len(files) > 1:
        def when(item: tuple[Path, dict | None]) -> float:
            header = item[1]
            if header is not None and isinstance(header.get("time_ns"), int):
                return header["time_ns"] / 1e9
            return item[0].stat().st_mtime
        newest = max(zip(files, headers), key=when)
        files, headers = [newest[0]], [newest[1]]
    return files, headers, skipped


class SpoolError(OSError):
    """Neither TMPDIR nor OUT's directory could hold the logs rebuilt from OTLP/JSON exports."""


class _Spool:
    """Where the logs rebuilt from OTLP/JSON exports are written (a temporary directory, made only
    when there is an export, removed after the report, also when the report is ended by SIGTERM or
    SIGHUP) and what that found: read/otlp_json.py. In TMPDIR, or beside OUT when TMPDIR cannot
    take them (full, read-only): a full TMPDIR does not stop a report whose OUT has room."""

    def __init__(self, out: str | os.PathLike[str] = ".") -> None:
        self._dir: tempfile.TemporaryDirectory | None = None
        self._beside = os.path.dirname(os.path.abspath(out))
        self._signals: dict[int, Any] = {}
        self.rebuilt: Any = None
        self.torch_merged: Any = None  # read/torch_trace_logs.Merged, with a TORCH_TRACE directory

    def _path(self, where: str | None = None) -> Path:
        if self._dir is None:
            self._catch_signals()
            self._dir = tempfile.TemporaryDirectory(prefix=".thunder-trace-otlp-" if where else "thunder-trace-otlp-",
                                                    dir=where)
        return Path(self._dir.name)

    def rebuild(self, path: str, files: list[Path], headers: list[dict | None],
                skipped: list[tuple[Path, str]]) -> None:
        exports = otlp_files(path, files)
        if not exports:  # JSONL logs only: the exports' reader is not even imported
            return
        from provenance.report.read.otlp_json import rebuild

        try:
            found = rebuild(path, list(skipped), headers[:], self._path, files, exports)
        except OSError as first:  # TMPDIR full or not writable: the logs go beside OUT
            self._remove()
            try:
                os.makedirs(self._beside, exist_ok=True)
                found = rebuild(path, list(skipped), headers[:], lambda: self._path(self._beside), files, exports)
            except OSError as second:
                self._remove()
                raise SpoolError(f"cannot write the logs read from OTLP/JSON exports: in TMPDIR "
                                 f"({first.strerror or first}), nor in {self._beside} ({second.strerror or second})"
                                 ) from second
        self.rebuilt = found
        files += found.files
        headers += found.headers
        skipped[:] = found.skipped

    def _catch_signals(self) -> None:
        """SIGTERM and SIGHUP end the report as an exception would, so its spool is removed (the
        handlers before are back at close(); a forked worker's exit is its own, os._exit)."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGHUP):
            self._signals[signum] = signal.signal(signum, _terminated)

    def _remove(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def merge_torch_trace(self, path: str, files: list[Path], headers: list[dict | None]) -> list[str]:
        """The TORCH_TRACE logs at `path` merged into the logs of their processes (read/torch_trace_logs.py):
        `files` then names the merged copies, in the spool; the notes for stderr."""
        from provenance.report.read.torch_trace_logs import merge

        try:
            self.torch_merged = merge(path, files, headers, lambda: self._path())
        except OSError as first:  # TMPDIR full or not writable: the copies go beside OUT
            if isinstance(first, FileNotFoundError):
                raise
            self._remove()
            try:
                os.makedirs(self._beside, exist_ok=True)
                self.torch_merged = merge(path, files, headers, lambda: self._path(self._beside))
            except OSError as second:
                self._remove()
                raise SpoolError(f"cannot write the logs merged with TORCH_TRACE's: in TMPDIR "
                                 f"({first.strerror or first}), nor in {self._beside} ({second.strerror or second})"
                                 ) from second
        files[:] = [self.torch_merged.files.get(f, f) for f in files]
        return self.torch_merged.notes

    @property
    def problems(self) -> list:
        merged = self.torch_merged.problems if self.torch_merged is not None else []
        return (self.rebuilt.problems if self.rebuilt is not None else []) + merged

    @property
    def files(self) -> set[Path]:
        return set(self.rebuilt.files) if self.rebuilt is not None else set()

    def close(self) -> None:
        self._remove()
        if self._signals:
            import signal

            for signum, handler in self._signals.items():
                signal.signal(signum, handler)
            self._signals.clear()


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # the shell's status for a process ended by that signal


class _Progress:
    """A rich progress bar on stderr for large inputs, when stderr is a terminal; shown at the
    first figure (its refresh runs a thread: the report's workers are forked before)."""

    def __init__(self, total: int) -> None:
        self.bar = None
        self.total = total if total >= PROGRESS_MIN_BYTES and sys.stderr.isatty() else 0

    def __call__(self, done: int) -> None:
        if self.total and self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

            self.bar = Progress("reading logs", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task("logs", total=self.total)
            self.bar.start()
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _report_problems(report: Report, out: Path) -> None:
    problems = report.problems
    if not problems.total:
        return
    counts = ", ".join(plural(n, k) for k, n in sorted(problems.counts.items()))
    say(f"thunder-trace: warning: {counts} (skipped; listed in {out / 'index.html'}#problems)")
    for entry in problems.entries[:10]:
        where = f"{entry.file}:{entry.line}" if entry.line is not None else entry.file
        say(f"  {where}: {entry.category}: {entry.reason}")
    if len(problems.entries) > 10 or problems.total > len(problems.entries):
        say(f"  ... {problems.total - min(10, len(problems.entries))} more")


def run(args: argparse.Namespace) -> int:
    """`thunder-trace report`: the logs chosen, the report built, what happened said; the exit status
    (--watch: watch.py, which builds it each time the logs change)."""
    if getattr(args, "watch", None) is not None:
        from provenance.report.watch import watch

        return watch(args, once)
    return once(args)


def once(args: argparse.Namespace, live: dict[str, Any] | None = None) -> int:
    """One report; `live`: live.js's content (a report --watch keeps current), None for a finished one."""
    spool = _Spool(args.out)
    try:
        return _report(args, spool, live)
    finally:
        spool.close()


def _holds_logs(path: str) -> bool:
    """Whether `path` is (or holds) a THUNDER_TRACE log: the other argument's place."""
    try:
        found, _ = log_files(path)
    except OSError:
        return False
    for candidate in found[:5]:
        try:
            sniff(candidate)
            return True
        except (NotALog, SchemaError, OSError):
            pass
    return False


def _report(args: argparse.Namespace, spool: _Spool, live: dict[str, Any] | None = None) -> int:
    try:
        files, headers, skipped = _select(args.path, args.latest, args.rank, spool)
    except FileNotFoundError as exc:
        return fail(str(exc.args[0] if exc.args else exc))
    except NotALog as exc:
        swapped = args.torch_trace is not None and "TORCH_TRACE" in str(exc) and _holds_logs(args.torch_trace)
        return fail(f"{exc}" + (f"; the two look swapped: thunder-trace report {args.torch_trace} {args.path}"
                                if swapped else ""))
    except (SchemaError, SpoolError) as exc:
        return fail(str(exc))
    for file, reason in skipped:
        say(f"thunder-trace: {file.name}: {reason}")
    given = list(files)
    if args.torch_trace is not None:
        try:
            notes = spool.merge_torch_trace(args.torch_trace, files, headers)
        except FileNotFoundError as exc:
            return fail(str(exc.args[0] if exc.args else exc))
        except SpoolError as exc:
            return fail(str(exc))
        for note in notes:
            say(f"thunder-trace: {note}")
    for note in spool.rebuilt.notes if spool.rebuilt is not None else ():
        say(f"thunder-trace: {note}")
    inputs = [Path(args.path), *given] + ([Path(args.torch_trace)] if args.torch_trace is not None else [])
    shown = {copy: log for log, copy in spool.torch_merged.files.items()} if spool.torch_merged else None
    names = [valid_text(str((shown or {}).get(f, f))) for f in files]  # as JSON can hold them
    key = {"path": os.path.abspath(args.path), "rank": args.rank, "latest": bool(args.latest),
           "torch_trace": os.path.abspath(args.torch_trace) if args.torch_trace is not None else None}
    preamble = [[valid_text(str(f)), valid_text(reason)] for f, reason in skipped] + [
        [valid_text(x) if isinstance(x, str) else x for x in p] for p in spool.problems]
    contexts = [orjson.dumps([log.prefix, log.label, log.page_label, log.rank, len(files) > 1]).decode()
                for log in label_logs(files, headers, shown)]  # what a log's pages take from the run
    held: dict[str, Any] = {}

    def lock(out: Path) -> None:
        held["lock"] = OutLock(out)

    def reuse(out: Path) -> bool:
        held["plan"] = found = plan(out, key, list(zip(names, files)), contexts, preamble, not args.overwrite,
                                    live is not None)
        return found.same_inputs and not args.overwrite  # taken up, up to date, or built whole over it

    def refused() -> str:
        return held["plan"].refused if "plan" in held else ""

    try:
        out, reason = prepare_out(Path(args.out), args.overwrite, inputs, lock=lock, reuse=reuse, refused=refused)
        if reason is not None:
            return fail(reason)
        found = held.get("plan") or Plan()
        if args.overwrite and found.same_inputs or found.refused:  # built whole: only the files it made go
            found = Plan(owned=found.owned)
        return _build(args, out, files, headers, skipped, spool, shown, Keeper(
            out, key, names, contexts, preamble, found, live=live is not None), live)
    except Busy as exc:
        return fail(str(exc))
    finally:
        if "lock" in held:
            held["lock"].release()


def _build(args: argparse.Namespace, out: Path, files: list[Path], headers: list[dict | None],
           skipped: list[tuple[Path, str]], spool: _Spool, shown: dict[Path, Path] | None, keeper: Keeper,
           live: dict[str, Any] | None = None) -> int:
    """The report written into `out` (whole, or taken up where `keeper`'s plan says); the exit status."""
    found = keeper.plan
    if found.up_to_date:
        write_live(out, live)
        if live is None:
            say(f"thunder-trace: {out / 'index.html'} is up to date: {plural(len(files), 'log')}, unchanged")
        if found.problems:
            say(f"thunder-trace: warning: {plural(found.problems, 'problem')} in the input (listed in "
                f"{out / 'index.html'}#problems)")
        return _strict(args, found.problems)
    if found.why:
        say(f"thunder-trace: the report in {out} is built whole: {found.why}")
    total = sum(f.stat().st_size for f in files)
    jobs = args.jobs if args.jobs is not None else auto_jobs(total)
    progress = _Progress(total - sum(found.resume[i].offset for i in found.resume))
    thresholds = quiet_gc()
    try:
        jobs = max(jobs, 1)
        report = build_report(files, out, headers, progress, jobs=jobs, skipped=skipped, problems=spool.problems,
                              shown=shown, keeper=keeper, live=live)
    except OSError as exc:  # OUT's disk full, or taken away: every file the report writes is in OUT
        progress.close()
        say(f"thunder-trace: error: cannot write the report into {out}: {exc.strerror or exc}")
        return 1
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        progress.close()
    index = out / "index.html"
    workers = f" (built by {report.processes} worker processes)" if report.processes > 1 else ""
    rebuilt = sum(1 for f in files if f in spool.files)
    spans = f" ({rebuilt} read from OTel spans)" if rebuilt else ""
    taken_up = ""
    if report.taken_up:
        taken_up = f" ({report.taken_up} of {plural(len(files), 'log')} taken up where they were kept)"
    whole = sorted({**found.whole, **keeper.notes}.items())
    for i, why in whole[:MAX_NAMED]:
        say(f"thunder-trace: {Path(keeper.names[i]).name} is read whole: {why}")
    if len(whole) > MAX_NAMED:
        say(f"thunder-trace: and {plural(len(whole) - MAX_NAMED, 'more log')} read whole")
    frames = report.model.totals.failed_frames
    failed = f"{report.failed} failed" + (f"; {plural(frames, 'Dynamo frame compile')} failed" if frames else "")
    say(f"thunder-trace: {plural(report.compiles, 'compile')} ({failed}) from "
        f"{plural(len(files), 'log')}{spans} -> {index}{workers}{taken_up}")
    _report_problems(report, out)
    if not args.no_browser and not (live or {}).get("generation", 1) > 1:  # --watch: once
        open_in_browser(index)
    return _strict(args, report.problems.total)


def _strict(args: argparse.Namespace, problems: int) -> int:
    """The exit status of a report written: 1 with --strict when the input had problems."""
    if args.strict and problems:
        say("thunder-trace: error: --strict: the logs had bad input (see above)")
        return 1
    return 0

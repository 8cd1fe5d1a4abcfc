"""`thunder-trace`: HTML reports from THUNDER_TRACE logs, in the spirit of tlparse.

Exit status: 0 done; 1 `--strict` and the logs had bad, unknown or malformed records; 2 the
report could not be made (no log, another schema major version, an output directory in the way).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import threading
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from provenance._version import __version__
from provenance.report.build import Report, build_report
from provenance.report.plural import plural
from provenance.report.read.log_file import NotALog, SchemaError, log_files, sniff
from provenance.report.render.output import prepare_out
from provenance.report.workers import MAX_AUTO_JOBS, PARALLEL_MIN_BYTES, auto_jobs, quiet_gc

__all__ = ["main"]

PROGRESS_MIN_BYTES = 16 << 20  # smaller inputs take a moment: no bar


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thunder-trace",
        description="Tools for THUNDER_TRACE logs (the JSONL logs thunder-provenance writes for every "
                    "thunder.jit compile; see docs/log-schema.md).",
        epilog="Example: THUNDER_TRACE=thunder_trace python train.py && thunder-trace report thunder_trace")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    report = commands.add_parser(
        "report", help="build an HTML report (static files, works offline) from a log file or directory",
        description="Build an HTML report from THUNDER_TRACE logs: an index of every compile and where it "
                    "was called from, per compile the pass pipeline with timings, every trace after every "
                    "pass with each op's provenance and what each pass changed, a source view linking user "
                    "lines to forward ops, backward ops and fusions, failures, a rank comparison, where "
                    "profiled calls' time went (THUNDER_TRACE_PROFILE), a Perfetto trace and "
                    "compile_directory.json. Options follow tlparse where it has them.",
        epilog="Exit status: 0 done; 1 with --strict, when the logs had bad, unknown or malformed lines (the "
               "report is still written); 2 no report (no log, a log of another schema major version, OUT "
               "in the way). Bad input never stops a report: it is counted, listed on index.html and on stderr.")
    report.add_argument("--version", action="version", version=f"thunder-trace {__version__}")
    report.add_argument("path", metavar="PATH",
                        help="a log file, or a THUNDER_TRACE directory (every rank's log in it); an OTLP/JSON "
                             "export (gzip'd or not) or a directory of them, with the logs or alone")
    report.add_argument("-o", "--out", default="thunder_trace_report", metavar="OUT",
                        help="output directory (default: %(default)s)")
    report.add_argument("--overwrite", action="store_true",
                        help="replace OUT if it exists and is not empty (only a directory this tool made)")
    report.add_argument("--latest", action="store_true",
                        help="only the newest log in the directory (by header time, else modification time)")
    report.add_argument("--rank", type=int, metavar="N", help="only the log of rank N")
    report.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any line was bad, of an unknown type or malformed")
    report.add_argument("-j", "--jobs", type=int, metavar="N",
                        help="worker processes building compile pages (default: for inputs over "
                             f"{PARALLEL_MIN_BYTES >> 20} MB, one per idle CPU this process may use (its CPU "
                             f"affinity less the load average), at most {MAX_AUTO_JOBS}, and 1 (all in this "
                             "process) if under 2)")
    report.add_argument("--no-browser", action="store_true",
                        help="do not open index.html in a browser (never opened when not on a terminal or with CI set)")
    _diff_parser(commands)
    return parser


def _diff_parser(commands: argparse._SubParsersAction) -> None:
    """`diff A B` (provenance/diff/: imported only when the command runs)."""
    diff = commands.add_parser(
        "diff", help="what changed between two runs: ops, fusions, recompiles, compile and run time, memory",
        description="Compare two runs' THUNDER_TRACE logs (each a log file or a directory, every rank): compiles "
                    "matched by function, call site, recompile index and rank (ThunderFX: Dynamo graph and "
                    "piece), ops by the user line and module they came from; changes sorted by impact. "
                    "A run-time change counts only outside both runs' per-call spread (docs/diff.md).",
        epilog="Exit status: 0 no --fail-on rule broken; 1 one was; 2 bad input (no log, a bad rule, OUT in the "
               "way). Example: thunder-trace diff baseline/ thunder_trace/ --fail-on run_time=+5%%")
    diff.add_argument("a", metavar="A", help="the baseline: a log file or a THUNDER_TRACE directory")
    diff.add_argument("b", metavar="B", help="the run compared with it")
    diff.add_argument("-o", "--out", metavar="OUT",
                      help="write the diff page, OUT/index.html, with both runs' reports (OUT/a, OUT/b) it links into")
    diff.add_argument("--overwrite", action="store_true", help="replace OUT if this tool made it")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON (docs/diff.md: its shape)")
    diff.add_argument("--all", action="store_true", help="list the changes within the runs' spread too")
    diff.add_argument("--top", type=int, default=40, metavar="N", help="changes listed (default: %(default)s)")
    diff.add_argument("--fail-on", action="append", metavar="METRIC=+LIMIT",
                      help="exit 1 if a significant change grew past LIMIT: run_time=+5%%, compile_time=+10%%, "
                           "memory=+0, recompiles=+0 (absolute: ms per call, s, bytes with K/M/G, compiles); "
                           "repeatable")


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (escape sequences in a file name) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _say(message: str) -> None:
    print(printable(message), file=sys.stderr)


def _fail(message: str) -> int:
    _say(f"thunder-trace: error: {message}")
    return 2


def _torch_trace_directory(path: Path) -> bool:
    """Whether a directory holds TORCH_TRACE logs (a few of its files looked at)."""
    try:
        candidates = [p for p in sorted(path.iterdir())[:20] if p.is_file() and not p.is_symlink()]
    except OSError:
        return False
    for candidate in candidates[:5]:
        try:
            sniff(candidate)
        except NotALog as exc:
            if "TORCH_TRACE" in str(exc):
                return True
        except (OSError, SchemaError):
            pass
    return False


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
            _say(f"thunder-trace: {file.name}: {reason}")
        if not skipped and _torch_trace_directory(Path(path)):
            raise NotALog(f"{path}: this looks like a TORCH_TRACE directory; use tlparse")
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


class _Spool:
    """Where the logs rebuilt from OTLP/JSON exports are written (a temporary directory, made only
    when there is an export, removed after the report) and what that found: read/otlp_json.py."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory | None = None
        self.rebuilt: Any = None

    def _path(self) -> Path:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="thunder-trace-otlp-")
        return Path(self._dir.name)

    def rebuild(self, path: str, files: list[Path], headers: list[dict | None],
                skipped: list[tuple[Path, str]]) -> None:
        from provenance.report.read.otlp_json import rebuild

        self.rebuilt = found = rebuild(path, skipped, headers, self._path, files)
        files += found.files
        headers += found.headers
        skipped[:] = found.skipped

    @property
    def problems(self) -> list:
        return self.rebuilt.problems if self.rebuilt is not None else []

    @property
    def files(self) -> set[Path]:
        return set(self.rebuilt.files) if self.rebuilt is not None else set()

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


class _Progress:
    """A rich progress bar on stderr for large inputs, when stderr is a terminal."""

    def __init__(self, total: int) -> None:
        self.bar = None
        if total >= PROGRESS_MIN_BYTES and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

            self.bar = Progress("reading logs", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task("logs", total=total)
            self.bar.start()

    def __call__(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _open_browser(index: Path) -> None:
    """Open the report if a graphical browser can be: never blocks, never fails."""
    if os.environ.get("CI") or not (sys.stdout.isatty() and sys.stderr.isatty()):
        return
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return  # a console browser would take over the terminal

    def run() -> None:
        try:
            webbrowser.open(index.resolve().as_uri())
        except Exception:  # a browser is a convenience: never fail for it
            pass

    opener = threading.Thread(target=run, daemon=True)
    opener.start()
    opener.join(timeout=3)  # time to launch one (the process exits next), but never a hang


def _report_problems(report: Report, out: Path) -> None:
    problems = report.problems
    if not problems.total:
        return
    counts = ", ".join(plural(n, k) for k, n in sorted(problems.counts.items()))
    _say(f"thunder-trace: warning: {counts} (skipped; listed in {out / 'index.html'}#problems)")
    for entry in problems.entries[:10]:
        where = f"{entry.file}:{entry.line}" if entry.line is not None else entry.file
        _say(f"  {where}: {entry.category}: {entry.reason}")
    if len(problems.entries) > 10 or problems.total > len(problems.entries):
        _say(f"  ... {problems.total - min(10, len(problems.entries))} more")


def report_command(args: argparse.Namespace) -> int:
    spool = _Spool()
    try:
        return _report(args, spool)
    finally:
        spool.close()


def _report(args: argparse.Namespace, spool: _Spool) -> int:
    try:
        files, headers, skipped = _select(args.path, args.latest, args.rank, spool)
    except FileNotFoundError as exc:
        return _fail(str(exc.args[0] if exc.args else exc))
    except (SchemaError, NotALog) as exc:
        return _fail(str(exc))
    for file, reason in skipped:
        _say(f"thunder-trace: {file.name}: {reason}")
    for note in spool.rebuilt.notes if spool.rebuilt is not None else ():
        _say(f"thunder-trace: {note}")
    out, reason = prepare_out(Path(args.out), args.overwrite, [Path(args.path), *files])
    if reason is not None:
        return _fail(reason)
    total = sum(f.stat().st_size for f in files)
    jobs = args.jobs if args.jobs is not None else auto_jobs(total)
    progress = _Progress(total)
    thresholds = quiet_gc()
    try:
        jobs = max(jobs, 1)
        report = build_report(files, out, headers, progress, jobs=jobs, skipped=skipped, problems=spool.problems)
    except OSError as exc:  # OUT's disk full, or taken away: every file the report writes is in OUT
        progress.close()
        _say(f"thunder-trace: error: cannot write the report into {out}: {exc.strerror or exc}")
        return 1
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        progress.close()
    index = out / "index.html"
    workers = f" ({plural(jobs, 'worker process', 'worker processes')})" if jobs > 1 else ""
    rebuilt = sum(1 for f in files if f in spool.files)
    spans = f" ({rebuilt} read from OTel spans)" if rebuilt else ""
    _say(f"thunder-trace: {plural(report.compiles, 'compile')} ({report.failed} failed) from "
         f"{plural(len(files), 'log')}{spans} -> {index}{workers}")
    _report_problems(report, out)
    if not args.no_browser:
        _open_browser(index)
    if args.strict and report.problems.total:
        _say("thunder-trace: error: --strict: the logs had bad input (see above)")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "report":
        return report_command(args)
    if args.command == "diff":
        from provenance.diff.command import run

        return run(args)
    return 2  # pragma: no cover - argparse requires a command


if __name__ == "__main__":
    sys.exit(main())

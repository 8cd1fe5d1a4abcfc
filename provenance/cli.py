"""`thunder-trace`: HTML reports from THUNDER_TRACE logs, in the spirit of tlparse.

One function per subcommand adds its options; the command's work is imported only when it runs,
so `thunder-trace --version` or `--help` loads nothing of the report (no jinja2, pygments, rich).

Exit status: 0 done; 1 `--strict` and the logs had bad, unknown or malformed records; 2 the
report could not be made (no log, another schema major version, an output directory in the way).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from provenance._version import __version__
from provenance.report.jobs import MAX_AUTO_JOBS, PARALLEL_MIN_BYTES

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thunder-trace",
        description="Tools for THUNDER_TRACE logs (the JSONL logs thunder-provenance writes for every "
                    "thunder.jit compile; see docs/log-schema.md).",
        epilog="Example: THUNDER_TRACE=thunder_trace python train.py && thunder-trace report thunder_trace")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _report_parser(commands)
    _diff_parser(commands)
    return parser


def _report_parser(commands: argparse._SubParsersAction) -> None:
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
    report.add_argument("torch_trace", metavar="TORCH_DIR", nargs="?",
                        help="a TORCH_TRACE directory (or .log) of the same run: torch's structured trace "
                             "merged into each process's log by pid and Dynamo compile id (the Dynamo graph "
                             "pages' guards, output graph, AOT graphs, inductor code, shapes, caches, metrics)")
    report.add_argument("-o", "--out", default="thunder_trace_report", metavar="OUT",
                        help="output directory (default: %(default)s)")
    report.add_argument("--overwrite", action="store_true",
                        help="write over OUT if it holds another report (only a directory this tool made; only "
                             "the files a report recorded as its own are deleted); a report of the same logs is "
                             "taken up where they changed without it")
    report.add_argument("--watch", nargs="?", type=float, const=2.0, metavar="SECONDS",
                        help="keep the report current as the logs grow (looked at every SECONDS, default 2): "
                             "its pages reload themselves (from file:// too) and the index says what each rank "
                             "is doing; Ctrl-C (or SIGTERM) ends it with the report a batch build writes")
    report.add_argument("--latest", action="store_true",
                        help="only the newest log in the directory (by header time, else modification time)")
    report.add_argument("--rank", type=int, metavar="N", help="only the log of rank N")
    report.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any line was bad, of an unknown type or malformed")
    report.add_argument("-j", "--jobs", type=int, metavar="N",
                        help="processes reading the logs, each building the compiles it reaches first (default: "
                             f"for inputs of {PARALLEL_MIN_BYTES >> 20} MB or more, one per CPU this process may use "
                             f"(its CPU affinity) and per MB, at most {MAX_AUTO_JOBS}; else 1: all in this process)")
    report.add_argument("--no-browser", action="store_true",
                        help="do not open index.html in a browser (never opened when not on a terminal or with CI set)")
    report.set_defaults(run=_report)


def _report(args: argparse.Namespace) -> int:
    from provenance.report import report_command

    return report_command.run(args)


def _diff_parser(commands: argparse._SubParsersAction) -> None:
    """`diff A B` (provenance/diff/: imported only when the command runs)."""
    diff = commands.add_parser(
        "diff", help="what changed between two runs: ops, fusions, recompiles, compile and run time, memory",
        description="Compare two runs' THUNDER_TRACE logs (each a log file or a directory, every rank): compiles "
                    "matched by function, call site, recompile index and rank (ThunderFX: Dynamo graph and "
                    "piece), ops by the user line and module they came from; changes sorted by impact. "
                    "A run-time change counts only when it is large enough and its calls differ beyond chance "
                    "(a rank test, a 1% false discovery rate: docs/diff.md).",
        epilog="Exit status: 0 no --fail-on rule broken; 1 one was; 2 bad input (no log, a bad rule, OUT in the "
               "way). Example: thunder-trace diff baseline/ thunder_trace/ --fail-on run_time=+5%")
    diff.add_argument("a", metavar="A", help="the baseline: a log file or a THUNDER_TRACE directory")
    diff.add_argument("b", metavar="B", help="the run compared with it")
    diff.add_argument("-o", "--out", metavar="OUT",
                      help="write the diff page, OUT/index.html, with both runs' reports (OUT/a, OUT/b) it links into")
    diff.add_argument("--overwrite", action="store_true", help="replace OUT if this tool made it")
    diff.add_argument("--no-browser", action="store_true",
                      help="with -o: do not open OUT/index.html in a browser (as report; never opened on CI or without "
                           "a display)")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON (docs/diff.md: its shape)")
    diff.add_argument("--all", action="store_true", help="list the changes within the noise too (not significant)")
    diff.add_argument("--top", type=int, default=40, metavar="N", help="changes listed (default: %(default)s)")
    diff.add_argument("--fail-on", action="append", metavar="METRIC=+LIMIT",
                      help="exit 1 if a significant change grew past LIMIT: run_time=+5%%, compile_time=+10%%, "
                           "memory=+0, recompiles=+0 (absolute: ms per call, s, bytes with K/M/G, compiles); "
                           "repeatable")
    diff.set_defaults(run=_diff)


def _diff(args: argparse.Namespace) -> int:
    from provenance.diff.command import run

    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

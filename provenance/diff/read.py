"""Read one side of a diff: a log file or a THUNDER_TRACE directory (every rank's log), through
the report's own pipeline (provenance/report/analyze/run.py's RunBuilder: the same reader,
validation, bounds and threat model), keeping a digest of each compile (summarize.py) as its
pages' models are made.

With an output directory the side's full report is written there (build_report), so the diff
page can link each change into it; without one nothing is written: the pages' models are made
and dropped (the outputs below write nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provenance.diff.summarize import CompileDigest, digest
from provenance.report.analyze.run import RunBuilder
from provenance.report.build import build_report
from provenance.report.model import Problems, RunModel
from provenance.report.read.log_file import NotALog, SchemaError, log_files, sniff, torch_trace_directory
from provenance.report.read.processes import label_logs
from provenance.report.render.source_files import SourceCache

__all__ = ["BadInput", "Side", "read_side"]


class BadInput(Exception):
    """A side that cannot be read at all (no log, another schema major version)."""


@dataclass
class Side:
    path: str
    model: RunModel
    problems: Problems
    compiles: list[CompileDigest]
    files: list[Path]
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    report: Path | None = None  # its report's directory, when one was written
    bytes_read: int = 0


def select(path: str) -> tuple[list[Path], list[dict | None], list[tuple[Path, str]]]:
    """Every log of `path` (a file or a directory), their headers, and the files passed over."""
    candidates, skipped = log_files(path)
    files, headers = [], []
    for candidate in candidates:
        try:
            headers.append(sniff(candidate))
            files.append(candidate)
        except NotALog as exc:
            skipped.append((candidate, str(exc)))
        except OSError as exc:
            skipped.append((candidate, f"cannot be read ({exc.strerror or exc})"))
    if not files:
        why = f": {skipped[0][1]}" if skipped else ""
        if not skipped and Path(path).is_dir() and torch_trace_directory(Path(path)):
            why = (": this looks like a TORCH_TRACE directory; diff compares THUNDER_TRACE logs (a TORCH_TRACE "
                   "log is read with its run's by thunder-trace report THUNDER_DIR TORCH_DIR, or by tlparse)")
        raise BadInput(f"no THUNDER_TRACE log in {path!r}{why}")
    return files, headers, skipped


def read_side(path: str, out: Path | None = None) -> Side:
    """One side; `out`: write its report there (an empty directory) as it is read."""
    try:
        files, headers, skipped = select(path)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise BadInput(f"{path}: {exc.strerror or exc}") from None
    except (SchemaError, NotALog) as exc:
        raise BadInput(str(exc)) from None
    compiles: list[CompileDigest] = []

    def observe(page: Any, source: Any, provs: Any) -> None:
        compiles.append(digest(page, source, provs))

    if out is not None:
        report = build_report(files, out, headers, jobs=1, skipped=skipped, observe=observe)
        return Side(path, report.model, report.problems, compiles, files, skipped, out, report.bytes_read)
    builder = RunBuilder(_Pages(observe), label_logs(files, headers), perfetto=_Nothing(), directory=_Nothing(),
                         sources=SourceCache(None))
    for file, reason in skipped:
        builder.preamble.add("skipped file", file.name, None, reason)
    builder.run()
    return Side(path, builder.model({}), builder.problems, compiles, files, skipped, None, builder.bytes_read)


class _Nothing:
    """An output the diff does not write (the Perfetto trace, compile_directory.json)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class _Pages:
    """The page writer when no report is written: each compile's page models are observed, and dropped."""

    def __init__(self, observe: Any) -> None:
        self.observe = observe

    def begin_compile(self, pages: Any, provs: Any) -> _Compile:
        return _Compile(self.observe, provs)


class _Compile:
    def __init__(self, observe: Any, provs: Any) -> None:
        self.observe, self.provs = observe, provs

    def trace(self, view: Any, provs: Any) -> None:
        pass

    def finish(self, page: Any, source: Any) -> None:
        self.observe(page, source, self.provs)

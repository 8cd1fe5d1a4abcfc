"""`build_report`: the whole pipeline, read -> model -> render.

The logs are read once (analyze/run.py, with read/log_file.py), each compile's pages written as
it ends (analyze/compile.py, render/output.py); then the run's pages and compile_directory.json are written from the
model the pass made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provenance.report.analyze.desync import mark_desyncs
from provenance.report.analyze.run import RunBuilder
from provenance.report.incremental import Keeper
from provenance.report.model import Problems, RunModel
from provenance.report.read.log_file import sniff
from provenance.report.read.processes import label_logs
from provenance.report.render import cache_card, pages
from provenance.report.render.directory import DIRECTORY_FILE, DirectoryWriter
from provenance.report.render.output import ReportWriter, write_live
from provenance.report.render.perfetto import PERFETTO_FILE, PerfettoWriter
from provenance.report.render.source_files import SourceCache

__all__ = ["Report", "build_report"]


@dataclass(repr=False, eq=False)
class Report:
    """What a build returns: the render model and the figures the CLI prints."""

    out: Path
    model: RunModel
    problems: Problems
    compiles: int
    failed: int
    bytes_read: int
    processes: int  # that read the logs: 1, or -j's (at most Claims.MAX_PROCESSES; 1 where fork is not available)
    taken_up: int = 0  # logs taken up where an earlier report kept their state (incremental.py)


def build_report(paths: list[Path], out: Path, headers: list[dict | None] | None = None,
                 progress: Callable[[int], None] | None = None, jobs: int = 1,
                 skipped: list[tuple[Path, str]] = (),
                 problems: list[tuple[str, str, int | None, str, str, int]] = (),
                 observe: Callable[..., None] | None = None, shown: dict[Path, Path] | None = None,
                 keeper: Keeper | None = None, live: dict[str, Any] | None = None) -> Report:
    """Read `paths` once and write the report into `out` (which must exist and be empty);
    `jobs` > 1: compiles are built by that many processes, each reading the logs (workers.py;
    one where fork is not available); `skipped`: files of the input passed over, and why
    (listed as problems); `problems`: more the input had (category, file,
    line, reason, text, count), found before the logs were read (an OTel export's bad lines);
    `observe(page, source, provs)`: called with each compile's page models as they are written
    (ReportWriter's; needs `jobs` 1: the diff's); `shown`: the log given, for a path that is a copy of
    it (a log merged with a TORCH_TRACE log), as the pages name it; `keeper`: the state an incremental
    report keeps in `out` (incremental.py), and where it takes up an earlier report's (then `out`
    holds that report, and the logs are read from there, in one process); `live`: what live.js
    says (render/output.py's write_live: None for a report that is done)."""
    if observe is not None and jobs > 1:
        raise ValueError("observe needs jobs=1: worker processes build their compiles' pages")
    headers = headers if headers is not None else [sniff(p) for p in paths]
    resume = keeper.begin() if keeper is not None else {}
    if resume:  # the logs taken up are read on from their states, in this process
        jobs = 1
    registered = list(pages.PAGES)
    nav = [(page.file, page.title) for page in registered]
    writer = ReportWriter(out, nav, [page.templates for page in registered if page.templates], observe=observe)
    writer.write_assets()
    if live is not None:  # live.js before any page (a page opened now polls it), still saying the last rebuild
        write_live(out, {**live, "generation": live.get("generation", 1) - 1})
    logs = label_logs(paths, headers, shown)
    share = None
    if jobs > 1:  # the workers read the logs themselves: forked now, each with a run of its own
        from provenance.report.workers import can_fork, start_workers

        if can_fork():
            share = start_workers(jobs, out, lambda worker: RunBuilder(
                writer, logs, perfetto=None, directory=None, sources=SourceCache(out), share=worker))
    try:
        times = [log.header.get("time_ns") for log in logs if log.header and isinstance(log.header.get("time_ns"), int)]
        spools = keeper.spools if keeper is not None and keeper.spools is not None else (None, None)
        perfetto = PerfettoWriter(str(out / PERFETTO_FILE), min(times) if times else None, spools[0])
        directory, sources = DirectoryWriter(out, spools[1]), SourceCache(out)
        if keeper is not None:
            keeper.attach(perfetto, sources)
        builder = RunBuilder(writer, logs, perfetto=perfetto, directory=directory, sources=sources,
                             progress=progress, share=share, keeper=keeper)
        for path, reason in skipped:
            builder.preamble.add("skipped file", path.name, None, reason)
        for category, file, line, reason, text, count in problems:
            builder.preamble.add(category, file, line, reason, text, count=count)
        builder.run(resume)
    except BaseException:
        if keeper is not None:
            keeper.abandon()
        raise
    finally:
        if share is not None:
            share.close()
    model = builder.model(_files(registered))
    model.live = live is not None and bool(live.get("live", True))
    found = model.problems
    if model.distributed.desync:  # the compile pages a desync touches get their banner and anchors
        mark_desyncs(model, writer.render, writer.fill, keeper.pristine if keeper is not None else None)
    # each compile's own cache hits, now known
    filled = cache_card.fill(out, model.compiles, writer.render, keeper.filled if keeper is not None else None)
    builder.directory.write(out / DIRECTORY_FILE, model.directory_head(), builder.directory_calls())
    for page in registered:  # they may list every compile: streamed
        writer.write(page.template, page.file, stream=True, root="", **page.context(model))
        for template, file, context in page.subpages(model):
            (out / file).parent.mkdir(parents=True, exist_ok=True)
            writer.write(template, file, root="../" * file.count("/"), **context)
    write_live(out, live)
    if keeper is not None:
        sizes = [(builder.parts[i].size, builder.parts[i].crc) if i in builder.parts else (0, None)
                 for i in range(len(logs))]
        keeper.finish(sizes, filled, found.total)
    return Report(out, model, found, len(model.compiles), model.totals.failed, builder.bytes_read,
                  share.processes if share is not None else 1, len(keeper.taken_up) if keeper is not None else 0)


def _files(registered: list[type[pages.Page]]) -> dict[str, str]:
    """The report's files by name, for compile_directory.json: the Perfetto trace, the directory
    itself, the pages, the home page (the first registered) last."""
    home, *others = registered
    return {"perfetto": PERFETTO_FILE, "directory": DIRECTORY_FILE, **{p.name(): p.file for p in others},
            home.name(): home.file}

"""The output directory: static assets, the pages (a compile's page spooled as its traces come),
a compile's records (`<name>.provs.js`, loaded by both its pages; the user files' data is
source_files.py's), the marker that lets --overwrite delete only what this tool made. File names are made from
integers and constants only: nothing a log contains ever becomes part of a path."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from markupsafe import Markup

from provenance.report.analyze.desync import MARK as DESYNC_MARK
from provenance.report.analyze.prov_table import ProvTable
from provenance.report.model import CompilePage, CompilePages, SourcePage, TraceView
from provenance.report.render import cache_card
from provenance.report.render.files import write_whole, written_whole
from provenance.report.render.html import environment, provs_script, source_rows, trace_frame
from provenance.report.render.trace_data import LazyTrace, LineTable, lazy_trace, renumbered

__all__ = ["LIVE_FILE", "MARKER_FILE", "PROVS_SUFFIX", "CompileWriter", "ReportWriter", "prepare_out", "write_live"]

_TRACES_MARK = "<!--@@thunder-trace-report:traces@@-->"
PROVS_SUFFIX = ".provs.js"  # a compile's records, beside its pages: compiles/<name>.provs.js
MARKER_FILE = ".thunder_trace_report"  # marks a directory this tool made (what --overwrite may delete)
LIVE_FILE = "live.js"  # every page loads it: a live report's pages reload when it says they were rebuilt


def write_live(out: Path, live: dict[str, Any] | None) -> None:
    """live.js: `{"live": false}` for a report that is done (what a batch build writes), else `live`
    (--watch: its rebuild's generation, how often pages look, when a rank is silent)."""
    write_whole(out / LIVE_FILE, b"self.thunderTraceLive = %s;\n" % orjson.dumps(
        live if live is not None else {"live": False}))


class CompileWriter:
    """One compile's page: trace fragments are rendered as they come and spooled (to disk when
    large), then framed by the page's head (which needs every pass) when the compile ends.

    Every trace is spooled as compact data (trace_data.py) that the page's script renders: the final
    ones when the page loads, the others when opened. The source page sends its panes (the
    final traces again) the same way, with a line table of its own."""

    def __init__(self, report: ReportWriter, pages: CompilePages, provs: ProvTable) -> None:
        self.report = report
        self.pages = pages
        self.provs = provs
        self._spool = tempfile.SpooledTemporaryFile(max_size=4 << 20, mode="w+b", dir=report.out)
        self._lines = LineTable()
        self._latest: dict[str, LazyTrace] = {}  # per list: its latest trace's data (at the end, the final one's)

    def trace(self, view: TraceView, provs: ProvTable) -> None:
        head, tail = trace_frame(view)
        data = b""
        if view.same_as is None:  # the trace's data as bytes: never joined into the page's text
            lazy = self._latest[view.list] = lazy_trace(view, self._lines)
            data = lazy.html()
        self._spool.write(b"".join((head.encode(), data, tail.encode())))  # one write: the spool's is Python

    def finish(self, page: CompilePage, source: SourcePage | None) -> None:
        report = self.report
        if report.observe is not None:  # the diff reads each compile's pages as they are written
            report.observe(page, source, self.provs)
        # The compile's records, once for both its pages (the source page's are a subset): a script
        # of their own, which the pages load (report.js: window.thunderTraceProvs)
        provs = self.pages.compile.removesuffix(".html") + PROVS_SUFFIX
        with written_whole(report.out / provs) as f:
            f.write(b"self.thunderTraceProvs = %s;\n" % provs_script(page.provs, page.paths).encode())
        provs_src = provs.rsplit("/", 1)[-1]  # both pages are in its directory
        html = report.render("compile.html", root="../", p=page, c=page.summary, traces_mark=Markup(_TRACES_MARK),
                             desync_mark=Markup(DESYNC_MARK), provs_src=provs_src,
                             cache_card=cache_card.slot(report.render("cache_card.html", c=page.summary, final=False)))
        head, found, tail = html.partition(_TRACES_MARK)
        assert found, "compile.html lost its traces marker"
        with written_whole(report.out / self.pages.compile) as f:
            f.write(head.encode())
            self._spool.seek(0)
            shutil.copyfileobj(self._spool, f)
            f.write(tail.encode())
        self._spool.close()
        if source is not None:
            # The final traces are the latest of their lists (a repeat is not sent again)
            sent = renumbered(self._lines, [(pane.view, self._latest[pane.view.list]) for pane in source.panes])
            panes = [Markup(lazy.html(f'class="code pane lazy" data-pane="{pane.name}"').decode())
                     for pane, lazy in zip(source.panes, sent)]
            report.write("source.html", self.pages.source, root="../", s=source, c=source.summary, panes=panes,
                         rows=source_rows, provs_src=provs_src)


class ReportWriter:
    """The output directory: static assets, pages, JSON."""

    def __init__(self, out: Path, nav: list[tuple[str, str]], template_dirs: Sequence[str] = (),
                 observe: Callable[[CompilePage, SourcePage | None, ProvTable], None] | None = None) -> None:
        self.out = out
        self.env = environment(nav, template_dirs)
        self.observe = observe  # called with each compile's page models, in this process (build_report's)

    def write_assets(self) -> None:
        """The directories, the marker file and the static files (CSS, JS): copied as they are."""
        (self.out / "compiles").mkdir(parents=True, exist_ok=True)
        (self.out / "static").mkdir(exist_ok=True)
        write_whole(self.out / MARKER_FILE, b"made by thunder-trace report; --overwrite may delete this directory\n")
        templates = resources.files("provenance.report.render") / "templates"
        for name in ("report.css", "report.js"):
            write_whole(self.out / "static" / name, (templates / name).read_bytes())

    def begin_compile(self, pages: CompilePages, provs: ProvTable) -> CompileWriter:
        return CompileWriter(self, pages, provs)

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    def fill(self, name: str, mark: str, html: str) -> None:
        """A page written again with `html` in place of its `mark` (a slot the run's end fills)."""
        path = self.out / name
        write_whole(path, path.read_bytes().replace(mark.encode(), html.encode(), 1))  # pages are UTF-8

    def write(self, template: str, name: str, stream: bool = False, **context: Any) -> None:
        with written_whole(self.out / name) as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
            if stream:
                f.writelines(self.env.get_template(template).generate(**context))
            else:
                f.write(self.env.get_template(template).render(**context))


def prepare_out(out: Path, overwrite: bool, inputs: Sequence[Path] = (),
                lock: Callable[[Path], None] | None = None,
                reuse: Callable[[Path], bool] | None = None,
                clear: Callable[[Path], None] | None = None,
                refused: Callable[[], str] | None = None) -> tuple[Path, str | None]:
    """Make `out` ready: the directory to write (a symbolic link's target), or the reason it
    cannot be. A non-empty directory is written over only with `overwrite`, and only if this tool
    made it (it holds MARKER_FILE); never a directory that is, or holds, one of `inputs`. Nothing
    in it is deleted here but what `clear(out)` deletes (the files the tool knows it wrote there:
    the rest of OUT is the user's). `lock(out)`: called once `out` exists, before anything in it is
    written or deleted (it may raise; it creates nothing); `reuse(out)`: for a non-empty `out`, whether
    it holds a report of the same logs, which the build writes over in place without `overwrite`
    (incremental.py); `refused()`: why it could not be told whether it does (said when refused)."""
    try:
        if out.is_symlink():
            if not out.exists():
                return out, f"output directory {out} is a symbolic link to nothing; give a directory"
            out = out.resolve()
        for given in inputs:
            for path in {os.path.abspath(given), os.path.realpath(given)}:
                for target in {os.path.abspath(out), os.path.realpath(out)}:
                    if path == target:
                        return out, f"output directory {out} is the input {given}; choose another -o DIR"
                    if path.startswith(target.rstrip(os.sep) + os.sep):
                        return out, f"output directory {out} contains the input {given}; choose another -o DIR"
        if out.exists() and not out.is_dir():
            return out, f"{out} exists and is not a directory"
        existed = out.is_dir() and any(out.iterdir())
        os.makedirs(out, exist_ok=True)
        if lock is not None:
            lock(out)
        for folder in ("compiles", "graphs", "static"):  # a link there would have pages written outside OUT
            if (out / folder).is_symlink():
                return out, (f"{out / folder} is a symbolic link: a report writes only inside its output "
                             "directory (remove the link, or choose another -o DIR)")
        if existed:
            if reuse is not None and reuse(out):
                return out, None
            if not overwrite:
                why = refused() if refused is not None else ""
                return out, (f"output directory {out} exists and is not empty"
                             f"{f' (it holds a report, but {why})' if why else ''}; pass --overwrite to write the "
                             "report over it, or -o DIR")
            if not (out / MARKER_FILE).is_file():
                return out, (f"output directory {out} is not empty and was not made by thunder-trace; "
                             "refusing to write over it (choose another -o DIR)")
            if clear is not None:
                clear(out)
    except OSError as exc:
        return out, f"cannot create output directory {out}: {exc.strerror or exc}"
    return out, None

"""The output directory: static assets, the pages (a compile's page spooled as its traces come),
the marker that lets --overwrite delete only what this tool made. File names are made from
integers and constants only: nothing a log contains ever becomes part of a path."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

from markupsafe import Markup

from provenance.report.desync import MARK as DESYNC_MARK
from provenance.report.highlight import style_css
from provenance.report.html import code_html, diff_items, environment, source_rows
from provenance.report.lazy import LazyTrace, LineTable, lazy_trace, lines_script
from provenance.report.model import CompilePage, CompilePages, SourcePage, TraceView
from provenance.report.provinfo import ProvTable

__all__ = ["MARKER_FILE", "CompileWriter", "ReportWriter", "prepare_out"]

_TRACES_MARK = "<!--@@thunder-trace-report:traces@@-->"
_CODE_MARK = "<!--@@thunder-trace-report:code@@-->"
MARKER_FILE = ".thunder_trace_report"  # marks a directory this tool made (what --overwrite may delete)


class CompileWriter:
    """One compile's page: trace fragments are rendered as they come and spooled (to disk when
    large), then framed by the page's head (which needs every pass) when the compile ends.

    A trace is spooled as compact data (lazy.py), which the page's script renders when it is
    opened; when the compile ends, the final traces' data is replaced by their rendered code
    (the spool remembers where each trace's data lies), so the page opens on them at once."""

    eager: ClassVar[bool] = True  # False: the final traces too are left to the script (tests compare both)

    def __init__(self, report: ReportWriter, pages: CompilePages, provs: ProvTable) -> None:
        self.report = report
        self.pages = pages
        self.provs = provs
        self._spool = tempfile.SpooledTemporaryFile(max_size=4 << 20, mode="w+b", dir=report.out)
        self._lines = LineTable()
        self._slots: dict[str, tuple[int, int]] = {}  # a trace's anchor -> its data's place in the spool
        self._lazy: dict[str, LazyTrace] = {}  # a trace's anchor -> its lines (runs, and those it brought)

    def trace(self, view: TraceView, provs: ProvTable) -> None:
        changes = diff_items(view.diff) if view.diff else Markup("")
        html = self.report.trace_template.render(v=view, code=Markup(_CODE_MARK), changes=changes)
        head, _, tail = html.partition(_CODE_MARK)
        spool = self._spool
        spool.write(head.encode())
        if view.same_as is None:
            lazy = self._lazy[view.anchor] = lazy_trace(view, self._lines)
            start = spool.tell()
            spool.write(lines_script(lazy.new).encode())
            spool.write(lazy.data.encode())
            self._slots[view.anchor] = (start, spool.tell())
        spool.write(tail.encode())

    def finish(self, page: CompilePage, source: SourcePage | None) -> None:
        report = self.report
        html = report.render("compile.html", root="../", p=page, c=page.summary, traces_mark=Markup(_TRACES_MARK),
                             desync_mark=Markup(DESYNC_MARK))
        head, found, tail = html.partition(_TRACES_MARK)
        assert found, "compile.html lost its traces marker"
        eager = sorted(((self._slots[v.anchor], v) for lst in page.lists for v in lst.passes
                        if v.final and self.eager and v.anchor in self._slots), key=lambda slot: slot[0])
        needed = bytearray(len(self._lines))  # the lines the traces left to the script use
        finals = {v.anchor for _, v in eager}
        for anchor, lazy in self._lazy.items():
            if anchor not in finals:
                runs = lazy.runs
                for k in range(0, len(runs), 2):
                    needed[runs[k]: runs[k] + runs[k + 1]] = b"\x01" * runs[k + 1]
        with open(report.out / self.pages.compile, "wb") as f:
            f.write(head.encode())
            spool, pos = self._spool, 0
            spool.seek(0)
            for (start, end), view in eager:
                _copy(spool, f, start - pos)
                lazy = self._lazy[view.anchor]
                kept = [line if needed[lazy.first + i] else 0 for i, line in enumerate(lazy.new)]
                f.write(lines_script(kept).encode())
                f.write(f'<pre class="code">{code_html(view, self.provs)}</pre>'.encode())
                spool.seek(end)
                pos = end
            shutil.copyfileobj(spool, f)
            f.write(tail.encode())
        self._spool.close()
        if source is not None:
            report.write("source.html", self.pages.source, root="../", s=source, c=source.summary,
                         code=functools.partial(code_html, provs=self.provs), rows=source_rows)


def _copy(src: Any, dst: Any, n: int) -> None:
    while n > 0:
        chunk = src.read(min(n, 1 << 20))
        if not chunk:
            return
        dst.write(chunk)
        n -= len(chunk)


class ReportWriter:
    """The output directory: static assets, pages, JSON."""

    def __init__(self, out: Path, nav: list[tuple[str, str]], template_dirs: Sequence[str] = ()) -> None:
        self.out = out
        self.env = environment(nav, template_dirs)
        self.trace_template = self.env.get_template("trace.html")

    def write_assets(self) -> None:
        """The directories, the marker file and the static files (CSS with pygments' style, JS)."""
        (self.out / "compiles").mkdir(parents=True, exist_ok=True)
        (self.out / "static").mkdir(exist_ok=True)
        (self.out / MARKER_FILE).write_text("made by thunder-trace report; --overwrite may delete this directory\n")
        templates = resources.files("provenance.report") / "templates"
        css = (templates / "report.css").read_text(encoding="utf-8") + "\n" + style_css(".code")
        (self.out / "static" / "report.css").write_text(css, encoding="utf-8")
        (self.out / "static" / "report.js").write_text((templates / "report.js").read_text(encoding="utf-8"),
                                                      encoding="utf-8")

    def begin_compile(self, pages: CompilePages, provs: ProvTable) -> CompileWriter:
        return CompileWriter(self, pages, provs)

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    def write(self, template: str, name: str, stream: bool = False, **context: Any) -> None:
        with open(self.out / name, "w", encoding="utf-8") as f:
            if stream:
                f.writelines(self.env.get_template(template).generate(**context))
            else:
                f.write(self.env.get_template(template).render(**context))


def prepare_out(out: Path, overwrite: bool, inputs: Sequence[Path] = ()) -> tuple[Path, str | None]:
    """Make `out` ready: the directory to write (a symbolic link's target), or the reason it
    cannot be. A non-empty directory is replaced only with `overwrite`, and only if this tool
    made it (it holds MARKER_FILE); never a directory that is, or holds, one of `inputs`."""
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
        if out.is_dir() and any(out.iterdir()):
            if not overwrite:
                return out, f"output directory {out} exists and is not empty; pass --overwrite to replace it, or -o DIR"
            if not (out / MARKER_FILE).is_file():
                return out, (f"output directory {out} is not empty and was not made by thunder-trace report; "
                             "refusing to delete it (choose another -o DIR)")
            shutil.rmtree(out)
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        return out, f"cannot create output directory {out}: {exc.strerror or exc}"
    return out, None

"""Rendering: jinja2 templates (autoescape on) into static files under the output directory.

Every string from a log reaches a page through autoescaping, through pygments (which escapes), or
through `markupsafe.escape`; JSON for the pages' scripts is embedded with `<`, `>`, `&` written
as \\u003c, \\u003e, \\u0026, so no log text can close the <script> element. File names are made
here from integers only: nothing a log contains ever becomes part of a path.

Pages stay ASCII where the logs are (templates write symbols as entities): an ASCII str is joined
and encoded at memcpy speed, and pages are most of the work.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import orjson
from markupsafe import Markup, escape

from provenance.annotation import THUNDER_SOURCE_COMMENT
from provenance.report.highlight import style_css
from provenance.report.provinfo import ProvTable
from provenance.report.traces import TraceView

__all__ = ["CompileWriter", "ReportWriter", "json_script"]

_TRACES_MARK = "<!--@@thunder-trace-report:traces@@-->"
MARKER_FILE = ".thunder_trace_report"  # marks a directory this tool made (what --overwrite may delete)


def json_script(value: Any) -> Markup:
    """JSON safe inside <script>: no `</script>`, `<!--` or `&` can appear in it."""
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    if not text.isascii():  # labels' middle dots; line separators would end a JS string literal
        text = text.replace("\u00b7", "\\u00b7").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def _ms(value: float | None) -> str:
    if value is None:
        return Markup("&ndash;")
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _seconds(value: float | None) -> str:
    if value is None:
        return Markup("&ndash;")
    return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("provenance.report", "templates"),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters.update(ms=_ms, seconds=_seconds, json_script=json_script)
    return env


def code_html(view: TraceView, provs: ProvTable) -> Markup:
    """A trace's highlighted lines, each op wrapped in a span carrying its record id, kind and
    role color; above an op whose record differs from the previous op's, a provenance header
    line (what `provenance.annotate()` prints) that the page can hide, instead of Thunder's own
    `# file:line: source` comments."""
    if view.code is not None:
        return Markup(view.code)
    html, lines, out, pos, previous = view.html, view.lines, [], 0, None
    append = out.append

    def between(start: int, stop: int) -> None:
        for i in range(start, stop):
            if ": \t" in lines[i] and THUNDER_SOURCE_COMMENT.match(lines[i]):
                append(f'<span class="tsc">{html[i]}</span>')
            else:
                append(html[i])
                append("\n")

    op_span = provs.op_span
    for line, n, _sym, _outs, prov in view.ops:
        if line > pos:
            between(pos, line)
        opening, header = op_span(prov)
        if header is not None and header != previous:
            first = lines[line]
            append(f'<span class="ph">{first[: len(first) - len(first.lstrip())]}# &#9472;&#9472; {header}</span>')
            previous = header
        append(opening)
        append("\n".join(html[line: line + n]) if n > 1 else html[line])
        append("</span>\n")
        pos = line + n
    between(pos, len(html))
    view.code = "".join(out)
    return Markup(view.code)


def diff_items(diff: dict[str, Any]) -> Markup:
    """The ops a pass added, removed and rewrote, as list items (one trace can list hundreds)."""
    items, out = diff["items"], []
    for sign, cls, entries in (("+", "d-add", items["added"]), ("&minus;", "d-rem", items["removed"])):
        out.extend(f'<li class="{cls}"><span class="sign">{sign}</span><code>{escape(it["text"])}</code></li>'
                   for it in entries)
    out.extend(f'<li class="d-rw"><span class="sign">~</span><code class="old">{escape(it["old"])}</code><br>'
               f'<span class="sign"></span><code>{escape(it["text"])}</code></li>' for it in items["rewritten"])
    hidden = diff["added"] + diff["removed"] + diff["rewritten"] - sum(map(len, items.values()))
    if hidden > 0:
        out.append(f'<li class="muted">&hellip; and {hidden} more</li>')
    return Markup("".join(out))


def source_rows(file: dict[str, Any]) -> Markup:
    """A user file's lines for the source view, each with its ops counts (built here rather than
    in the template: a file has thousands of lines and every compile shows it)."""
    index, out = file["index"], []
    for row in file["rows"]:
        if row is None:
            out.append('<div class="gap">&#8942;</div>')
            continue
        n, counts = row["n"], row["c"]
        badges = ""
        if counts:
            badges = "".join(f'<i class="{cls}">{c}</i>' for cls, c in zip(("c-fw", "c-bw", "c-fu"), counts) if c)
        out.append(f'<div class="sl{" has" if counts else ""}" id="L{index}-{n}">'
                   f'<span class="ln">{n}</span><span class="cnt">{badges}</span><code>{row["html"]}</code></div>')
    return Markup("".join(out))


class CompileWriter:
    """One compile's page: trace fragments are rendered as they come and spooled (to disk when
    large), then framed by the page's head (which needs every pass) when the compile ends."""

    def __init__(self, report: ReportWriter, pages: dict[str, str], provs: ProvTable) -> None:
        self.report = report
        self.pages = pages
        self.provs = provs
        self._spool = tempfile.SpooledTemporaryFile(max_size=4 << 20, mode="w+", encoding="utf-8",
                                                    dir=report.out)

    def trace(self, view: TraceView, provs: ProvTable) -> None:
        code = code_html(view, provs) if view.same_as is None else Markup("")
        changes = diff_items(view.diff) if view.diff else Markup("")
        self._spool.write(self.report.trace_template.render(v=view, code=code, changes=changes))

    def finish(self, page: dict[str, Any], source: dict[str, Any] | None) -> None:
        report = self.report
        page["has_source"] = source is not None
        html = report.render("compile.html", root="../", p=page, traces_mark=Markup(_TRACES_MARK))
        head, found, tail = html.partition(_TRACES_MARK)
        assert found, "compile.html lost its traces marker"
        with open(report.out / self.pages["compile"], "w", encoding="utf-8") as f:
            f.write(head)
            self._spool.seek(0)
            shutil.copyfileobj(self._spool, f)
            f.write(tail)
        self._spool.close()
        if source is not None:
            for pane in source["panes"]:
                pane["code"] = code_html(pane["view"], self.provs)
            for file in source["files"]:
                file["rows_html"] = source_rows(file)
            report.write("source.html", self.pages["source"], root="../", s=source)


class ReportWriter:
    """The output directory: static assets, pages, JSON."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.env = _environment()
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

    def begin_compile(self, pages: dict[str, str], provs: ProvTable) -> CompileWriter:
        return CompileWriter(self, pages, provs)

    def render(self, template: str, **context: Any) -> str:
        return self.env.get_template(template).render(**context)

    def write(self, template: str, name: str, stream: bool = False, **context: Any) -> None:
        with open(self.out / name, "w", encoding="utf-8") as f:
            if stream:
                f.writelines(self.env.get_template(template).generate(**context))
            else:
                f.write(self.env.get_template(template).render(**context))


def prepare_out(out: Path, overwrite: bool) -> str | None:
    """Make `out` ready; the reason it cannot be, or None. A non-empty directory is replaced only
    with `overwrite`, and only if this tool made it (it holds MARKER_FILE)."""
    if out.exists() and not out.is_dir():
        return f"{out} exists and is not a directory"
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            return f"output directory {out} exists and is not empty; pass --overwrite to replace it, or -o DIR"
        if not (out / MARKER_FILE).is_file():
            return (f"output directory {out} is not empty and was not made by thunder-trace report; "
                    "refusing to delete it (choose another -o DIR)")
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    return None

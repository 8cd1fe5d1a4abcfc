"""HTML: the jinja2 environment (autoescape on, the filters) and the fragments built in Python
because pages repeat them thousands of times (a trace's code, a diff's items, a source file's rows).

Every string from a log reaches a page through autoescaping, through pygments (which escapes), or
through `markupsafe.escape`; JSON for the pages' scripts is embedded with `<`, `>`, `&` written
as \\u003c, \\u003e, \\u0026, so no log text can close the <script> element.

Pages stay ASCII where the logs are (templates write symbols as entities): an ASCII str is joined
and encoded at memcpy speed, and pages are most of the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jinja2
import orjson
from markupsafe import Markup, escape

from provenance.annotation import THUNDER_SOURCE_COMMENT
from provenance.report.model import SourceFileView, TraceDiff, TraceView
from provenance.report.plural import plural
from provenance.report.provinfo import ProvTable
from provenance.report.templating import load_compiled, make_environment

__all__ = ["code_html", "diff_items", "environment", "json_script", "source_rows"]


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


def environment(nav: list[tuple[str, str]], template_dirs: Sequence[str] = ()) -> jinja2.Environment:
    """`nav`: the run's pages (file, title), linked from every page's top bar; `template_dirs`:
    where templates of pages defined outside this package are, after the package's own. The
    package's templates come compiled at install time when they are fresh (templating.py); the
    others, and any that changed, are compiled from source."""
    loader: jinja2.BaseLoader = jinja2.PackageLoader("provenance.report", "templates")
    if template_dirs:
        loader = jinja2.ChoiceLoader([loader, jinja2.FileSystemLoader(list(template_dirs))])
    env = make_environment(loader, {"ms": _ms, "seconds": _seconds, "json_script": json_script, "plural": plural})
    env.bytecode_cache = load_compiled(env)
    env.globals["nav"] = nav
    return env


CHUNK = 64  # ops per block that the browser lays out only when it is near the screen (report.css: .ck)


def code_html(view: TraceView, provs: ProvTable) -> Markup:
    """A trace's highlighted lines, each op wrapped in a span carrying its record id, kind and
    role color; above an op whose record differs from the previous op's, a provenance header
    line (what `provenance.annotate()` prints) that the page can hide, instead of Thunder's own
    `# file:line: source` comments. Every CHUNK ops make a block (`ck`) that the browser skips
    while it is off screen, with its lines, headers and Thunder comments counted (`--n`, `--h`,
    `--t`: report.css estimates its height from them); report.js renders traces alike."""
    if view.code is not None:
        return Markup(view.code)
    html, lines, out, pos, previous = view.html, view.lines, [], 0, None
    append = out.append
    shown = [0, 0, 0]  # in the current block: code lines, provenance headers, Thunder's comments

    def between(start: int, stop: int) -> None:
        for i in range(start, stop):
            if ": \t" in lines[i] and THUNDER_SOURCE_COMMENT.match(lines[i]):
                append(f'<span class="tsc">{html[i]}</span>')
                shown[2] += 1
            else:
                append(html[i])
                append("\n")
                shown[0] += 1

    def block(opening: int) -> None:
        out[opening] = f'<span class="ck" style="--n:{shown[0]};--h:{shown[1]};--t:{shown[2]}">'
        append("</span>")

    op_span = provs.op_span
    spans: dict[int | None, tuple[str, str | None]] = {}  # op_span's, without a call per op
    times = view.times or {}
    opening = len(out)
    append("")
    for i, (line, n, _sym, _outs, prov) in enumerate(view.ops):
        if i and not i % CHUNK:
            block(opening)
            opening, shown = len(out), [0, 0, 0]
            append("")
        if line > pos:
            between(pos, line)
        found = spans.get(prov)
        if found is None:
            found = spans[prov] = op_span(prov)
        span, header = found
        if i in times:  # a profiled op: its time per call and heat (timing.py: our text, not the log's)
            span = f'{span[:-1]} data-c="{times[i].heat}" data-t="{times[i].label}">'
        if header is not None and header != previous:
            first = lines[line]
            append(f'<span class="ph">{first[: len(first) - len(first.lstrip())]}# &#9472;&#9472; {header}</span>')
            previous = header
            shown[1] += 1
        append(span)
        append("\n".join(html[line: line + n]) if n > 1 else html[line])
        append("</span>\n")
        shown[0] += n
        pos = line + n
    between(pos, len(html))
    block(opening)
    view.code = "".join(out)
    return Markup(view.code)


def diff_items(diff: TraceDiff) -> Markup:
    """The ops a pass added, removed and rewrote, as list items (one trace can list hundreds)."""
    out = []
    for sign, cls, entries in (("+", "d-add", diff.added_items), ("&minus;", "d-rem", diff.removed_items)):
        out.extend(f'<li class="{cls}"><span class="sign">{sign}</span><code>{escape(it.text)}</code></li>'
                   for it in entries)
    out.extend(f'<li class="d-rw"><span class="sign">~</span><code class="old">{escape(it.old)}</code><br>'
               f'<span class="sign"></span><code>{escape(it.text)}</code></li>' for it in diff.rewritten_items)
    hidden = (diff.added + diff.removed + diff.rewritten
              - len(diff.added_items) - len(diff.removed_items) - len(diff.rewritten_items))
    if hidden > 0:
        out.append(f'<li class="muted">&hellip; and {hidden} more</li>')
    return Markup("".join(out))


def source_rows(file: SourceFileView) -> Markup:
    """A user file's lines for the source view, each with its ops counts (built here rather than
    in the template: a file has thousands of lines and every compile shows it)."""
    index, out = file.index, []
    timed = any(row is not None and row.time is not None for row in file.rows)
    for row in file.rows:
        if row is None:
            out.append('<div class="gap">&#8942;</div>')
            continue
        n, html, counts, time = row
        badges = ""
        if counts:
            badges = "".join(f'<i class="{cls}">{c}</i>' for cls, c in zip(("c-fw", "c-bw", "c-fu"), counts) if c)
        cost = heat = ""
        if timed:  # a profiled compile: a time column, the line's time per call (timing.LineTime)
            cost = '<span class="tm"></span>'
            if time is not None:
                cost = f'<span class="tm" title="{escape(time.title)}">{time.ms:.3f}</span>'
                heat = f' data-c="{time.heat}"'
        out.append(f'<div class="sl{" has" if counts else ""}" id="L{index}-{n}"{heat}>'
                   f'<span class="ln">{n}</span>{cost}<span class="cnt">{badges}</span><code>{html}</code></div>')
    return Markup("".join(out))

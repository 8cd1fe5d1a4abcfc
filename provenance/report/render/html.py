"""HTML: the jinja2 environment (autoescape on, the filters) and the fragments built in Python
because pages repeat them thousands of times (a diff's items, a trace's frame). Traces and user
files are not HTML: the pages' script renders them from data (trace_data.py, source_files.py).

Every string from a log reaches a page through autoescaping, `markupsafe.escape` or `_text` (its entities); JSON
for the pages' scripts through jsonsafe.py.

Pages stay ASCII where the logs are (templates write symbols as entities): an ASCII str is joined
and encoded at memcpy speed, and pages are most of the work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jinja2
from markupsafe import Markup, escape

from provenance.report.model import LISTS, PhaseView, ProvInfo, SourceFileView, StackFrame, TraceDiff, TraceView
from provenance.report.plural import plural
from provenance.report.render.jsonsafe import json_bytes, json_script
from provenance.report.render.source_files import ASSET_DIR
from provenance.report.render.templating import load_compiled, make_environment
from provenance.timing.units import ms_label

__all__ = ["diff_items", "environment", "frame", "pass_rows", "phase_bar", "provs_script", "source_rows", "stack",
           "trace_frame"]

_LISTS = frozenset(LISTS)


def _ms(value: float | None) -> str:
    return Markup("&ndash;") if value is None else ms_label(value)


def _seconds(value: float | None) -> str:
    if value is None:
        return Markup("&ndash;")
    return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"


def environment(nav: list[tuple[str, str]], template_dirs: Sequence[str] = ()) -> jinja2.Environment:
    """`nav`: the run's pages (file, title), linked from every page's top bar; `template_dirs`:
    where templates of pages defined outside this package are, after the package's own. The
    package's templates come compiled at install time when they are fresh (templating.py); the
    others, and any that changed, are compiled from source."""
    loader: jinja2.BaseLoader = jinja2.PackageLoader("provenance.report.render", "templates")
    if template_dirs:
        loader = jinja2.ChoiceLoader([loader, jinja2.FileSystemLoader(list(template_dirs))])
    env = make_environment(loader, {"ms": _ms, "seconds": _seconds, "json_script": json_script, "plural": plural})
    env.bytecode_cache = load_compiled(env)
    env.globals.update(nav_links=_nav_links(nav), phase_bar=phase_bar, pass_rows=pass_rows, frame=frame, stack=stack)
    return env


def _nav_links(nav: list[tuple[str, str]]) -> Callable[[str], Markup]:
    """The top bar's links to the run's pages, made once per way back to the report's directory
    (`root`: "" or "../"), not once per page (a report has thousands)."""
    made: dict[str, Markup] = {}

    def links(root: str) -> Markup:
        found = made.get(root)
        if found is None:
            found = made[root] = Markup("\n    ").join(
                Markup('<a href="{}{}">{}</a>').format(root, file, title) for file, title in nav)
        return found

    return links


def pass_rows(passes: list[TraceView], total_ms: float) -> Markup:
    """A pass list's rows as data, drawn by the page's script (report.js passRows): a compile page
    has dozens and a report of many compiles tens of thousands. Per trace: [index, pass, anchor,
    final, the trace it repeats (or null), its time (text, or null), its bar's width in % of the
    compile's timed passes, its ops (null for a repeat), [added, removed, rewritten] (or null)]."""
    rows = []
    for r in passes:
        d = r.diff
        rows.append([r.index, r.pass_name, r.anchor, r.final, r.same_as,
                     _ms(r.ms) if r.ms is not None else None,
                     round(100 * r.ms / total_ms, 1) if r.ms is not None and total_ms else 0,
                     r.n_ops if r.same_as is None else None,
                     [d.added, d.removed, d.rewritten] if d is not None else None])
    return Markup(f'<script type="application/json" class="passes">{json_script(rows)}</script>')


def trace_frame(view: TraceView) -> tuple[str, str]:
    """A trace's <details> on its compile page, before and after its code: the summary line (its
    list, pass, time, ops, what the pass changed) and the changed ops. Built here, not in a
    template: a compile page has a dozen and a report thousands."""
    lst = view.list if view.list in _LISTS else "other"
    # Plain-str escaping, no Markup per field: a report frames ~10^4 traces. Only `lst` is from a
    # fixed vocabulary (the _word cache); a log's list and pass names can be anything, of any length
    e_list, e_lst, e_pass = _text(view.list), _word(lst), _text(view.pass_name)
    out = [f'<details class="trace{" repeat" if view.same_as is not None else ""}" id="{_text(view.anchor)}" '
           f'data-list="{e_lst}">\n<summary><span class="list l-{e_lst}">{e_list}</span> '
           f'<span class="muted">#{view.index}</span> <b>{e_pass}</b>\n']
    if view.ms is not None:
        out.append(f'<span class="ms">{_ms(view.ms)}</span>')  # digits and " ms"
    if view.same_as is None:
        out.append(f'<span class="muted">{len(view.ops)} ops</span>')
    d = view.diff
    if d:
        out.append(f'<span class="d-add">+{d.added}</span> <span class="d-rem">&minus;{d.removed}</span> '
                   f'<span class="d-rw">~{d.rewritten}</span>')
    if view.label:
        out.append(f'<span class="small muted">{_text(view.label)}</span>')
    out.append("</summary>\n")
    if view.same_as is not None:
        out.append(f'<p class="muted small">The same trace as <a href="#{e_lst}-{view.same_as}">#{view.same_as}</a>: '
                   "Thunder lists it twice.</p>\n</details>")
        return "".join(out), ""
    if d and (d.added or d.removed or d.rewritten):
        previous = _text(d.previous)
        out.append(f'<details class="diff"><summary>What <b>{e_pass}</b> changed since <a href="#{previous}">'
                   f"the previous trace</a>: {d.added} added, {d.removed} removed, {d.rewritten} rewritten"
                   + (f", {d.reattributed} with a new provenance record" if d.reattributed else "")
                   + f'</summary>\n<ul class="difflist">{diff_items(d)}</ul>\n</details>\n')
    return "".join(out), "\n</details>"


def provs_script(provs: dict[int, ProvInfo], paths: dict[int, str]) -> Markup:
    """The records a page's script looks up by id, and the paths their frames index, as JSON
    (`{"provs": {id: compact record}, "paths": {index: path}}`) made of each record's JSON, made
    once per record: compiles share records (a recompile, a process's interned ones). A
    compile's two pages load it from one file (output.py: PROVS_SUFFIX)."""
    parts = []
    for prov_id, info in provs.items():
        if info.script_json is None:
            info.script_json = json_bytes(info.compact())
        parts.append(b'"%d":%s' % (prov_id, info.script_json))
    return Markup((b'{"provs":{%s},"paths":%s}' % (b",".join(parts), json_bytes(paths))).decode())


def _text(text: str) -> str:
    """markupsafe.escape's entities, without a Markup object per call (a report escapes ~10^5 op
    texts in diffs): &, <, >, ', " replaced."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;")
            .replace('"', "&#34;"))


@functools.lru_cache(maxsize=4096)
def _word(text: str) -> str:
    """`_text` of a word from a small vocabulary (phase names and groups, what they worked on):
    escaped once, bounded."""
    return _text(text)


def diff_items(diff: TraceDiff) -> Markup:
    """The ops a pass added, removed and rewrote, as list items (one trace can list hundreds)."""
    out = []  # the signs (+, −, ~) and the code font are the stylesheet's (ul.difflist): bytes on every page
    for cls, entries in (("d-add", diff.added_items), ("d-rem", diff.removed_items)):
        out.extend(f'<li class="{cls}">{_text(it.text)}</li>' for it in entries)
    out.extend(f'<li class="d-rw"><code class="old">{_text(it.old)}</code><br>{_text(it.text)}</li>'
               for it in diff.rewritten_items)
    hidden = (diff.added + diff.removed + diff.rewritten
              - len(diff.added_items) - len(diff.removed_items) - len(diff.rewritten_items))
    if hidden > 0:
        out.append(f'<li class="muted">&hellip; and {hidden} more</li>')
    return Markup("".join(out))


def source_rows(file: SourceFileView, root: str) -> Markup:
    """A user file's box on a source view, which the page's script fills (report.js: sourceRows):
    the lines it shows (`data-show`: first-last runs), and where its lines are: the report's one
    data file of it (a file from disk: loaded here, shared by every page that shows it), or the
    page's own data (rebuilt from the log). `root`: the way back to the report's directory."""
    show = ",".join(f"{first}-{last}" for first, last in file.ranges)
    box = f'<div class="code src" data-show="{show}"'
    if file.asset is not None:  # a hash (hex): nothing from the log
        return Markup(f'{box} data-src="{file.asset}"></div>'
                      f'<script src="{escape(root)}{ASSET_DIR}/{file.asset}.js"></script>')
    return Markup(f'{box}></div><script type="application/json" class="src-data">{json_script(file.data)}</script>')


def phase_bar(ph: PhaseView, what: str) -> Markup:
    """A compile's pipeline bar (its phases to scale), the time by group, and every phase in a
    table. The bar's segments and the table's rows are data, drawn by the page's script (report.js
    phaseBars): a compile has dozens of phases, a report thousands of compiles. Segments: [group,
    its name if wide enough to show, its title, its width]; rows: [depth, group, name, what it
    worked on, its start, its time, its share] (texts formatted here)."""
    narrow = ph.window_ms * 0.02  # a segment under 2% of the bar is too narrow for its name: its title has it
    window, t0 = ph.window_ms, ph.start_ns
    segments = []
    for s in ph.segments:  # each phase's `ms` (a property) computed once
        ms = s.ms
        segments.append([s.group, s.name if ms >= narrow else "", f"{s.label} \u00b7 {_ms(ms)}", round(ms, 4)])
    rows = []
    for s in ph.phases:
        ms = s.ms
        rows.append([min(s.depth, 4), s.group, s.name, s.detail or "", _ms((s.start_ns - t0) / 1e6), _ms(ms),
                     f"{100 * ms / window if window else 0:.1f}%"])
    data = {"s": segments, "p": rows}
    legend = " &nbsp; ".join(f'<span class="key g-{_word(g.group)}"></span>{_word(g.group)} {_ms(g.ms)} '
                             f"({g.pct:.1f}%)" for g in ph.groups)
    return Markup(
        f'<div class="phasebox"><div class="timeline phases" title="{_text(what)} by phase, to scale"></div>\n'
        f'<p class="legend small">{legend}</p>\n<details class="phases"><summary>Every phase ({len(ph.phases)}), '
        f"with its real start; {ph.covered_pct:.1f}% of the {_ms(window)} in named phases, the rest is <i>other</i>"
        '</summary>\n<table class="grid phases">\n  <thead><tr><th>phase</th><th>on</th><th class="r">starts at</th>'
        '<th class="r">time</th><th class="r">share</th></tr></thead>\n  <tbody></tbody>\n</table>\n</details>\n'
        f'<script type="application/json" class="phases">{json_script(data)}</script></div>\n')


def _frame(f: StackFrame) -> str:
    return (f'<span class="frame{"" if f.user else " lib"}"><span class="where" title="{_text(str(f.file))}">'
            f"{_text(str(f.name))}:{_text(str(f.line))}</span> <span class=\"fn\">{_text(str(f.fn))}</span> "
            f"<code>{_text(str(f.text))}</code></span>")


def frame(f: StackFrame) -> Markup:
    """A frame: where (its file in the title), its function, its line's text; a library frame dimmed."""
    return Markup(_frame(f))


def stack(frames: Sequence[StackFrame], start: int = 1) -> Markup:
    """Frames as a numbered list, outermost first, from `start` (a compile page has two stacks
    of a dozen frames each: a macro call per frame was a tenth of its page's time)."""
    first = f' start="{start}"' if start != 1 else ""
    return Markup(f'<ol class="stack"{first}>' + "".join(f"<li>{_frame(f)}</li>" for f in frames) + "</ol>")

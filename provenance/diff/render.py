"""The diff's outputs, all from one view of it (`view`: plain JSON-able data, the `--json` shape
docs/diff.md documents): the terminal summary (rich tables on a terminal, plain text otherwise),
the JSON, and the HTML page, rendered with the report's jinja2 environment and its base template
and stylesheet (provenance/report/render/html.py), next to the two runs' reports it links into.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from provenance.allocation.static_memory import size
from provenance.diff.compare import IMPROVEMENT, REGRESSION, RUN, STRUCTURE, Change, Diff, label
from provenance.diff.gate import Violation
from provenance.diff.read import Side
from provenance.report.console import printable
from provenance.report.numbers import dumps
from provenance.report.plural import plural

__all__ = ["FORMAT", "html", "terminal", "view"]

FORMAT = "thunder-trace-diff/1"
GROUPS = {REGRESSION: "regression", IMPROVEMENT: "improvement", STRUCTURE: "structure", RUN: "run"}
REPORTS = ("a", "b")  # the two reports' directories, under the diff's output directory


def _side(side: Side, report: str | None) -> dict[str, Any]:
    return {"path": side.path, "logs": len(side.files), "ranks": side.model.ranks, "compiles": len(side.compiles),
            "problems": side.problems.total, "report": report}


def _change(change: Change) -> dict[str, Any]:
    out = change.as_json()
    out["group"] = GROUPS[change.group]
    return out


def view(diff: Diff, violations: list[Violation] | None = None, rules: list[str] = (),
         reports: bool = False) -> dict[str, Any]:
    """The diff as data: what --json prints, what the page and the terminal show."""
    return {
        "format": FORMAT,
        "a": _side(diff.a, "a/index.html" if reports else None),
        "b": _side(diff.b, "b/index.html" if reports else None),
        "compiles": {
            "matched": [{"a": a.key, "b": b.key, "label": label(a)} for a, b in diff.matched],
            "removed": [{"a": c.key, "label": label(c)} for c in diff.removed],
            "added": [{"b": c.key, "label": label(c)} for c in diff.added],
        },
        "significant": len(diff.significant),
        "changes": [_change(c) for c in diff.changes],
        "more": diff.more,
        "notes": list(diff.notes),
        "gate": {"rules": list(rules), "failed": [v.describe() for v in violations or []],
                 "status": 1 if violations else 0},
    }


def json_bytes(data: dict[str, Any]) -> bytes:
    return dumps(data)


def _figure(c: dict[str, Any]) -> str:
    before, after, unit = c["before"], c["after"], c["unit"]
    if before is None or after is None:
        return ""
    if unit == "bytes":
        text = f"{size(before)} → {size(after)}"
    elif unit in ("ms", "s"):
        text = f"{before:.3f} → {after:.3f} {unit}" + (" per call" if unit == "ms" else "")
    else:
        text = f"{before:g} → {after:g} {unit}"
    ratio = c["ratio"]
    if isinstance(ratio, float) and ratio and unit in ("bytes", "ms", "s"):
        text += f" ({ratio:+.1%})"
    return text


def _shown(data: dict[str, Any], everything: bool, top: int) -> tuple[list[dict], int]:
    changes = [c for c in data["changes"] if everything or c["significant"]]
    return changes[:top], len(changes) - min(top, len(changes))


def terminal(data: dict[str, Any], out: TextIO | None = None, everything: bool = False, top: int = 40) -> None:
    """The summary: rich tables on a terminal, plain text otherwise. What comes from the logs (function
    names, line texts, paths) is untrusted: its control characters are escaped (console.printable),
    so no escape sequence, BEL, CR or BS in a log reaches the terminal."""
    out = out or sys.stdout
    changes, more = _shown(data, everything, top)
    changes = [{**c, "title": printable(c["title"]), "details": [printable(d) for d in c["details"]],
                "compile": printable(c["compile"]) if c["compile"] else c["compile"]} for c in changes]
    a, b = ({**side, "path": printable(str(side["path"]))} for side in (data["a"], data["b"]))
    head = (f"A: {a['path']} ({plural(a['compiles'], 'compile')}, {plural(a['logs'], 'log')})  "
            f"B: {b['path']} ({plural(b['compiles'], 'compile')}, {plural(b['logs'], 'log')})")
    counts = data["compiles"]
    matched = (f"{plural(len(counts['matched']), 'compile')} matched, {len(counts['removed'])} removed, "
               f"{len(counts['added'])} added; {plural(data['significant'], 'significant change')}")
    hidden = len(data["changes"]) - data["significant"]
    if out.isatty():
        from rich.console import Console
        from rich.table import Table

        console = Console(file=out)
        console.print(head, markup=False, highlight=False)
        console.print(matched, markup=False, highlight=False)
        for note in data["notes"]:
            console.print(f"note: {note}", markup=False, highlight=False, style="yellow")
        if changes:
            table = Table(show_lines=False, title_justify="left")
            for name in ("", "change", "compile", "A → B"):
                table.add_column(name, overflow="fold")
            for n, c in enumerate(changes, 1):
                text = "\n".join([c["title"], *(f"  {d}" for d in c["details"][:4])])
                table.add_row(f"{n}", text, c["compile"] or "", _figure(c),
                              style={"regression": "red", "improvement": "green"}.get(c["group"]))
            console.print(table)
    else:
        print(head, file=out)
        print(matched, file=out)
        for note in data["notes"]:
            print(f"note: {note}", file=out)
        for n, c in enumerate(changes, 1):
            where = f" [{c['compile']}]" if c["compile"] else ""
            figure = _figure(c)
            print(f"{n:3}. {c['group']}: {c['title']}{where}" + (f"  {figure}" if figure else ""), file=out)
            for detail in c["details"][:4]:
                print(f"       {detail}", file=out)
    if more:
        print(f"... {more} more (--top N, --json, or -o DIR for the page)", file=out)
    if hidden and not everything:
        print(f"({plural(hidden, 'change')} within the noise not listed: --all lists them)", file=out)
    if data["more"]:
        print(f"({plural(data['more'], 'change')} past the diff's bound not kept)", file=out)
    for failed in data["gate"]["failed"]:
        print(f"FAIL {printable(failed)}", file=out)


def html(data: dict[str, Any], out: Path) -> Path:
    """The diff page, `out`/index.html, beside the two reports (`out`/a, `out`/b) it links into;
    rendered with the report's environment, base template and stylesheet."""
    from provenance.report.render.html import environment

    templates = str(resources.files("provenance.diff") / "templates")
    env = environment([], [templates])
    page = out / "index.html"
    page.write_text(env.get_template("diff.html").render(d=data, root=f"{REPORTS[0]}/", reports=REPORTS,
                                                        figure=_figure), encoding="utf-8")
    return page

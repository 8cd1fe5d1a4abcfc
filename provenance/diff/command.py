"""`thunder-trace diff A B`: read both sides, compare, print or write, gate (provenance/cli.py
builds the parser and calls `run`). Exit status: 0 no --fail-on rule broken; 1 one was; 2 bad
input (a side with no readable log, a bad rule, OUT in the way)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from provenance.diff.compare import compare
from provenance.diff.gate import check, parse_rule
from provenance.diff.read import BadInput, read_side
from provenance.diff.render import REPORTS, html, json_bytes, terminal, view
from provenance.report.console import open_in_browser, printable
from provenance.report.render.output import MARKER_FILE, prepare_out

__all__ = ["run"]


def _fail(message: str) -> int:
    print(f"thunder-trace diff: error: {printable(message)}", file=sys.stderr)
    return 2


def _discard(out: Path | None, made: bool) -> None:
    """A diff that could not be made leaves nothing in OUT (A's report when B is bad): OUT itself if
    this run made it, else the side reports it wrote there."""
    if out is None:
        return
    for path in ([out] if made else [out / name for name in REPORTS]):
        shutil.rmtree(path, ignore_errors=True)


def _clear(out: Path) -> None:
    """--overwrite: what a diff writes there, and nothing else (OUT is the user's)."""
    for name in REPORTS:
        if (out / name).is_dir() and not (out / name).is_symlink():
            shutil.rmtree(out / name)
    for name in ("index.html", MARKER_FILE):
        if (out / name).is_file() or (out / name).is_symlink():
            (out / name).unlink()


def run(args: argparse.Namespace) -> int:
    try:
        rules = [parse_rule(text) for text in args.fail_on or ()]
    except ValueError as exc:
        return _fail(str(exc))
    out, made = None, False
    if args.out is not None:
        made = not Path(args.out).exists()
        out, reason = prepare_out(Path(args.out), args.overwrite, [Path(args.a), Path(args.b)], clear=_clear)
        if reason is not None:
            return _fail(reason)
        (out / MARKER_FILE).write_text("made by thunder-trace diff; --overwrite may delete this directory\n")
    try:
        sides = []
        for name, path in zip(REPORTS, (args.a, args.b)):
            report = None
            if out is not None:
                report = out / name
                report.mkdir()
            sides.append(read_side(path, report))
    except BadInput as exc:
        _discard(out, made)
        return _fail(str(exc))
    except OSError as exc:
        _discard(out, made)
        return _fail(f"cannot write into {out}: {exc.strerror or exc}")
    a, b = sides
    diff = compare(a, b)
    violations = check(diff, rules)
    data = view(diff, violations, [r.text for r in rules], reports=out is not None)
    for side, name in ((a, "A"), (b, "B")):
        if side.problems.total:
            print(f"thunder-trace diff: warning: {name} ({printable(str(side.path))}): {side.problems.total} bad "
                  "or malformed input lines skipped", file=sys.stderr)
    if out is not None:
        page = html(data, out)
        print(f"thunder-trace diff: {printable(str(page))}", file=sys.stderr)
        if not args.no_browser:
            open_in_browser(page)
    if args.json:
        sys.stdout.buffer.write(json_bytes(data) + b"\n")
        sys.stdout.flush()
    else:
        terminal(data, everything=args.all, top=args.top)
    return 1 if violations else 0

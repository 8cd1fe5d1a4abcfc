"""Page load and click times of a big compile page and its source page, in headless Chromium
(Debian's /usr/bin/chromium, driven by playwright), for two code trees: before and after.

    python bench/page_load.py LOGDIR --before /work/main --after . [--rounds 5]

Each tree makes its report of LOGDIR (a subprocess with that tree first on PYTHONPATH); then,
round after round, the same pages of both reports are loaded in a fresh tab, alternately
(paired: the machine's load at the time weighs on both alike), and timed:
- load: from navigation to the `load` event plus two animation frames (the page painted, its
  script run);
- a click: from the click to two animation frames later (handler, style, layout, paint; for a
  trace rendered when opened, to the frame after it is), on the
  compile page an op of a final trace, then the summary of the first trace that is not final
  of the computation list and the largest closed trace (opening it: rendered by the script,
  after; shown, before), on the
  source page a source line
  (its ops highlighted) and an op (its line found); and typing a tensor name into the find box
  (after only).
Medians over the rounds, and the report's size over the log's.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
LARGEST = "the largest closed trace's summary"
FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
CLICK = """async (sel) => {
  const ops = d => +((d.querySelector("summary").textContent.match(/(\\d+) ops/) || [0, 0])[1]);
  const el = sel === LARGEST ? Array.from(document.querySelectorAll("details.trace:not([open]):not(.repeat)"))
    .sort((a, b) => ops(b) - ops(a))[0].querySelector("summary") : document.querySelector(sel);
  if (!el) return null;
  const t = performance.now();
  el.click();
  const frame = () => new Promise(r => requestAnimationFrame(r));
  await frame(); await frame();
  while (document.querySelector("details.trace[open] pre.code.lazy")) await frame();  // rendered when opened
  await frame();
  return performance.now() - t;
}"""
FIND = """async (q) => {
  const box = document.getElementById("find");
  if (!box) return null;
  const t = performance.now();
  box.value = q; box.dispatchEvent(new Event("input"));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t;
}"""


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build(tree: Path, logs: Path, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-m", "provenance.report", "report", str(logs), "-o", str(out), "--no-browser",
                    "-j", "1"], env=env, check=True, capture_output=True, cwd=tree)


def measure(page, url: str, clicks: list[str], find: str | None) -> dict[str, float | None]:
    page.goto("about:blank")
    page.goto(url, wait_until="load")
    page.evaluate(FRAMES)
    nav = page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
    painted = page.evaluate("() => performance.now()")
    out: dict[str, float | None] = {"load": painted, "load_event": nav}
    for selector in clicks:
        out[selector] = page.evaluate(CLICK.replace("LARGEST", repr(LARGEST)), selector)
    if find:
        out["find " + find] = page.evaluate(FIND, find)
    return out


def main() -> None:
    parser = harness.parser(__doc__, full=True)
    parser.add_argument("logs", type=Path)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--find", default="t100", help="what to type into the find box (after)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="page_load."))
    try:
        reports = {}
        for name, tree in (("before", args.before), ("after", args.after)):
            reports[name] = work / name
            build(tree.resolve(), args.logs, reports[name])
        log_bytes = size(args.logs)
        for name, out in reports.items():
            print(f"{name}: report {size(out) / 1e6:.2f} MB = {size(out) / log_bytes:.2f}x the log "
                  f"({log_bytes / 1e6:.2f} MB)")
        compile_page = max((p for p in (reports["after"] / "compiles").glob("*.html") if "-source" not in p.name),
                           key=lambda p: p.stat().st_size).name
        source_page = compile_page.replace(".html", "-source.html")
        pages = {
            "compile": (compile_page, ["details.trace[open] pre.code .op[data-p]",
                                       "details.trace[data-list=computation]:not([open]) > summary", LARGEST]),
            "source": (source_page, [".sl.has", "pre.pane .op[data-p]"]),
        }
        results: dict[tuple[str, str, str], list[float]] = {}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            for _ in range(args.rounds):
                for kind, (file, clicks) in pages.items():
                    for name in ("before", "after"):
                        tab = browser.new_page(viewport={"width": 1600, "height": 1000})
                        found = measure(tab, (reports[name] / "compiles" / file).as_uri(), clicks,
                                        args.find if name == "after" else None)
                        tab.close()
                        for what, ms in found.items():
                            if ms is not None:
                                results.setdefault((kind, what, name), []).append(ms)
            browser.close()
        print(f"{'page':8} {'what':55} {'before ms':>10} {'after ms':>10}")
        for kind in pages:
            whats = dict.fromkeys(w for (k, w, _n) in results if k == kind)
            for what in whats:
                med = [statistics.median(results[(kind, what, n)]) if (kind, what, n) in results else None
                       for n in ("before", "after")]
                cells = [f"{m:10.0f}" if m is not None else f"{'-':>10}" for m in med]
                print(f"{kind:8} {what:55} {cells[0]} {cells[1]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Debian's headless Chromium for the report's browser tests (the `browser` fixture, conftest.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "report"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Consecutive ops of a rendered trace: the gap between them that what lies between them (a
# provenance header, a line of its own) does not explain, in px. 0 when no blank line separates them.
UNEXPLAINED_GAPS = """pre => {
  const blocks = Array.from(pre.querySelectorAll('.ck')), styles = blocks.map(c => c.getAttribute('style'));
  blocks.forEach(c => { c.style.contentVisibility = 'visible'; });  // every block laid out while measured
  const ops = Array.from(pre.querySelectorAll('.op')), out = [];
  for (let i = 1; i < ops.length; i++) {
    const a = ops[i - 1].getBoundingClientRect(), b = ops[i].getBoundingClientRect();
    let between = 0;
    for (let n = ops[i - 1].nextSibling; n && n !== ops[i]; n = n.nextSibling)
      if (n.nodeType === 1) between += n.getBoundingClientRect().height;
    out.push(Math.round(b.top - a.bottom - between));
  }
  blocks.forEach((c, i) => c.setAttribute('style', styles[i]));
  return out;
}"""


class Browser:
    """One Chromium for the module; every page's console errors and dialogs are collected."""

    def __init__(self, browser) -> None:
        self.browser = browser
        self.errors: list[str] = []
        self.dialogs: list[str] = []

    def open(self, path: Path, fragment: str = ""):
        page = self.browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: self.errors.append(f"{path.name}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"{path.name}: {e}"))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.goto(path.resolve().as_uri() + fragment)
        page.wait_for_load_state("load")
        return page

    def shot(self, page, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"))

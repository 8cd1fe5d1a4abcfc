"""Debian's headless Chromium for the report's browser tests (the `browser` fixture, conftest.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "report"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


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

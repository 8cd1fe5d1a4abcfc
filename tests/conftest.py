from __future__ import annotations

import os
import warnings

import pytest
import torch

import provenance

warnings.filterwarnings("ignore", message="transformer_engine module not found")


@pytest.fixture
def traced():
    """Provenance hooks installed for the test, removed after it."""
    provenance.enable()
    try:
        yield
    finally:
        provenance.disable()


@pytest.fixture(autouse=True, scope="session")
def _state_key_home(tmp_path_factory):
    """The key that authenticates reports' states (provenance/report/incremental.py) made in the test
    session's own folder, not the user's (subprocesses inherit it)."""
    saved = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if saved is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = saved


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium driven by playwright (tests/support/browser.py's Browser)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from browser import CHROMIUM, CHROMIUM_ARGS, Browser

    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield Browser(chromium)
        finally:
            chromium.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that fails inside Thunder or torch is run again untraced: failing the same way there, it
    is Thunder's failure on this stack and xfails with Thunder's error (support/thunder_failures.py)."""
    try:
        return (yield)
    except Exception as exc:
        import thunder_failures

        thunder_failures.check(exc, item.runtest)
        raise

"""Where Thunder itself fails a test's program on the installed stack, say so; never a blanket skip.

A test that fails with an exception raised inside a library (Thunder, torch) is run again with tracing
off: no hook of ours installed, THUNDER_TRACE unset, Dynamo's caches reset. If the untraced run fails
the same way (the same exception type, first line and innermost library frame), the failure is
Thunder's on this stack: the test is marked xfail with Thunder's error and where it was raised
(torch 2.12's ThunderFX: `TypeError: object of type 'MappingKeysView' has no len()` at
thunder/core/interpreter.py). Anything else, an untraced run that passes or fails otherwise among it,
stays the failure it was. conftest.py applies `check` to every test's call; module fixtures and
programs run in a subprocess call `check` and `check_process` themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

_LIBRARIES = ("thunder", "torch")


def _where(exc: BaseException) -> str | None:
    """The innermost frame of `exc` (or of the exception it was raised from) in Thunder or torch,
    as `thunder/core/interpreter.py:1831`; None when it was raised in our code or a test's."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            parts = frames[-1].filename.replace("\\", "/").split("/")
            if "site-packages" in parts:
                rest = parts[parts.index("site-packages") + 1:]
                if rest and rest[0] in _LIBRARIES:
                    return f"{'/'.join(rest)}:{frames[-1].lineno}"
                return None
        exc = exc.__cause__ or exc.__context__
    return None


def _signature(exc: BaseException) -> tuple[str, str, str | None]:
    return type(exc).__name__, str(exc).strip().partition("\n")[0], _where(exc)


def _stack() -> str:
    import thunder
    import torch

    return f"torch {torch.__version__} with lightning-thunder {thunder.__version__}"


@contextmanager
def untraced() -> Iterator[None]:
    """Tracing off for the block, whatever the test asks: provenance.enable() installs no hook."""
    import provenance
    import provenance.thunder as integration

    provenance.disable()
    install = integration.install
    integration.install = lambda **_: None
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("THUNDER_TRACE")}
    try:
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].reset()
        yield
    finally:
        integration.install = install
        os.environ.update(saved)
        provenance.disable()


def check(exc: BaseException, rerun: Callable[[], Any]) -> None:
    """`exc` failed a test: if it was raised inside Thunder or torch and `rerun` (the same program)
    fails the same way untraced, mark the test xfail as Thunder's failure. Returns otherwise."""
    if isinstance(exc, pytest.xfail.Exception | pytest.skip.Exception) or _where(exc) is None:
        return
    with untraced():
        try:
            rerun()
        except Exception as again:
            if _signature(again) == _signature(exc):
                kind, first, where = _signature(exc)
                pytest.xfail(f"Thunder itself fails on {_stack()}, untraced too: {kind}: {first} ({where})")


def run(program: Callable[[], Any]) -> Any:
    """`program()`, for a fixture: a failure that is Thunder's (see `check`) marks the tests xfail."""
    try:
        return program()
    except Exception as exc:
        check(exc, program)
        raise


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def check_process(cmd: list[str], env: dict[str, str] | None, done: subprocess.CompletedProcess,
                  **kwargs: Any) -> None:
    """`done`, the traced run of `cmd`, failed: run it again without THUNDER_TRACE (nor OTel); if it
    fails with the same last line of its traceback, mark the test xfail as Thunder's failure."""
    if done.returncode == 0:
        return
    error = _last_error(done.stderr or "")
    if "Error" not in error and "Exception" not in error:
        return
    env = {k: v for k, v in (os.environ if env is None else env).items()
           if not k.startswith(("THUNDER_TRACE", "OTEL_"))}
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, **kwargs)
    if again.returncode != 0 and _last_error(again.stderr or "") == error:
        pytest.xfail(f"Thunder itself fails this program on {_stack()}, untraced too: {error}")

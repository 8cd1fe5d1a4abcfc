"""Importing any module of the package has no side effect: no exit handler, no fork handler, no
scope listener, no hook; the modules that must run without torch and Thunder do not import them.
enable() registers what it needs and disable() removes it (a fork handler, which cannot be
unregistered, is registered once and does nothing while disabled). Exit handlers are counted as
registered minus unregistered: CPython 3.11's atexit._ncallbacks() still counts an unregistered one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paths import ROOT

# Modules that must import neither torch nor Thunder: the report and exporters (packages), the
# core layers, and the capture package's own entry points, which import Thunder only to install.
_LIGHT_PACKAGES = ("provenance.report", "exporters")
_LIGHT = {"provenance", "provenance._version", "provenance.core", "provenance.core.caches", "provenance.core.record",
          "provenance.core.scope", "provenance.log", "provenance.log.events", "provenance.log.session",
          "provenance.core.annotation", "provenance.core.coverage_stats", "provenance.timing",
          "provenance.timing.waits",
          "provenance.dynamo", "provenance.dynamo.graphs", "provenance.timing.profile", "provenance.timing.rollup",
          "provenance.bootstrap", "provenance.cli", "provenance.thunder", "provenance.thunder.compat",
          "provenance.thunder.capture",
          "provenance.thunder.patching"}

_PROBE = r"""
import atexit, importlib, json, os, sys
exits, forks = [], []  # the modules of the handlers registered from here on
live = []  # the exit handlers registered and not unregistered (atexit._ncallbacks() counts cleared slots too)
_register, _unregister, _register_at_fork = atexit.register, atexit.unregister, os.register_at_fork
def register(fn, *args, **kwargs):
    exits.append(getattr(fn, "__module__", "?"))
    live.append(fn)
    return _register(fn, *args, **kwargs)
def unregister(fn):
    live[:] = [f for f in live if f != fn]
    return _unregister(fn)
def register_at_fork(**handlers):
    forks.append(sorted({getattr(h, "__module__", "?") for h in handlers.values()}))
    return _register_at_fork(**handlers)
atexit.register, atexit.unregister, os.register_at_fork = register, unregister, register_at_fork
if sys.argv[1] == "all":
    import torch, thunder, thunder.dynamo  # their own handlers are not ours
before, seen, alive = atexit._ncallbacks(), len(exits), len(live)
for name in json.loads(sys.argv[2]):
    importlib.import_module(name)
from provenance.core.scope import span_end_listeners, span_start_listeners
ours = lambda modules: [m for m in modules if str(m).partition(".")[0] in ("provenance", "exporters")]
assert atexit._ncallbacks() - before == len(exits) - seen, "an exit handler registered without atexit.register"
result = {"atexit": ours(exits), "forks": ours(m for group in forks for m in group),
          "listeners": len(span_start_listeners) + len(span_end_listeners),
          "loaded": sorted(m for m in ("torch", "thunder") if m in sys.modules)}
forks = [group for group in forks if ours(group)]
if sys.argv[1] == "all":
    import provenance
    from provenance.thunder import capture
    cycles = []
    for _ in range(2):
        provenance.enable(sys.argv[3], wait_counters=True, profile=1)
        on = {"atexit": len(live) - alive, "forks": len(forks),
              "listeners": len(span_start_listeners) + len(span_end_listeners), "capture": capture.ACTIVE is not None}
        provenance.disable()
        off = {"atexit": len(live) - alive, "forks": len(forks),
               "listeners": len(span_start_listeners) + len(span_end_listeners), "capture": capture.ACTIVE is not None}
        cycles.append([on, off])
    result["cycles"], result["fork_modules"] = cycles, forks
print("RESULT " + json.dumps(result))
"""


def _modules() -> list[str]:
    found = []
    for package in ("provenance", "exporters"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__main__":  # runs the CLI
                continue
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _probe(mode: str, modules: list[str], log_dir: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THUNDER_TRACE", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", _PROBE, mode, json.dumps(modules), str(log_dir)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def test_the_light_modules_import_neither_torch_nor_thunder_and_register_nothing():
    modules = [m for m in _modules() if m in _LIGHT or m.startswith(_LIGHT_PACKAGES)]
    assert "provenance.cli" in modules and "exporters.otel" in modules and "provenance.log.session" in modules
    result = _probe("light", modules)
    assert result == {"atexit": [], "forks": [], "listeners": 0, "loaded": []}, result


def test_importing_every_module_registers_nothing_and_enable_disable_undo_what_they_add(tmp_path):
    modules = _modules()
    assert "provenance.thunder.hooks" in modules and "provenance.thunder.compat" in modules
    result = _probe("all", modules, tmp_path / "logs")
    assert (result["atexit"], result["forks"], result["listeners"]) == ([], [], 0), result
    (on, off), (on_again, off_again) = result["cycles"]
    # on: the session's exit handler and its two scope listeners, and (wait counters with a log) the
    # wait watchdog's exit handler, which writes its last records before the session closes the log;
    # the fork handlers, once
    assert on["atexit"] == 2 and on["listeners"] == 2 and on["capture"], result
    assert off == {"atexit": 0, "forks": on["forks"], "listeners": 0, "capture": False}, result
    assert on_again == on and off_again == off, result  # a second enable() registers no second fork handler
    # the session's, the capture's, the wait counters' (a child's waits start afresh, its lock unheld)
    assert on["forks"] == len(result["fork_modules"]) == 3, result


_PACKAGE = r"""
import json, sys
import provenance
light = sorted(m for m in ("dataclasses", "provenance.core.record", "provenance.dynamo.graphs",
                           "provenance.timing.rollup") if m in sys.modules)
import provenance.core.scope  # the submodule, imported again: the package's `scope` is still the function
names = {name: getattr(provenance, name).__module__ for name in ("Frame", "Provenance", "Coverage", "DynamoGraph",
                                                                "of", "scope", "current_span")}
print("RESULT " + json.dumps({"light": light, "names": names, "dir": "Frame" in dir(provenance)}))
"""


def test_importing_the_package_loads_its_classes_only_when_asked():
    """`import provenance` (the first step of every submodule's import, `thunder-trace --version`'s
    included) loads no dataclass machinery; the public names resolve on first use."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THUNDER_TRACE", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", _PACKAGE], env=env, capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert result["light"] == [], result
    assert result["names"] == {"Frame": "provenance.core.record", "Provenance": "provenance.core.record",
                               "Coverage": "provenance.core.coverage_stats", "DynamoGraph": "provenance.dynamo.graphs",
                               "of": "provenance.core.record", "scope": "provenance.core.scope",
                               "current_span": "provenance.core.scope"}, result
    assert result["dir"]

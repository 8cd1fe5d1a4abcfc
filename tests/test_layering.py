"""Layering: no import cycle among the package's modules, the core layers import only what is below
them, and the report runs without torch, Thunder or the capture session."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT, SUPPORT

PACKAGES = ("provenance", "exporters")

# record → scope → events/session → exporters: what each core module may import of ours.
ALLOWED = {
    "provenance._version": set(),
    "provenance.core.caches": set(),
    "provenance.core.record": {"provenance.core.caches"},
    "provenance.core.usercode": set(),
    "provenance.core.libraries": set(),
    "provenance.core.attribution": {"provenance.core.record"},
    "provenance.core.scope": {"provenance.core.record"},
    "provenance.log.events": {"provenance.core.record"},
    "provenance.log.session": {"provenance._version", "provenance.log.events", "provenance.core.libraries",
                               "provenance.core.record", "provenance.core.scope"},
    "exporters.base": {"provenance.log.exporter"},
    "exporters.jsonl": {"exporters.base", "provenance.core.scope"},
    "exporters.otel": {"provenance._version", "provenance.log.events", "provenance.core.record",
                       "provenance.core.attribution", "provenance.allocation.static_memory"},  # memory: the peak's rule
    # the API's trace readers get Thunder's printing and bookkeeping rule from their caller
    "provenance.core.annotation": {"provenance.core.record"},
    "provenance.core.coverage_stats": {"provenance.core.record", "provenance.core.attribution"},  # at_module_file
    # capture's seam and state: below every hook module
    "provenance.thunder.compat": {"provenance._version"},  # its refusals name our version
    "provenance.thunder.patching": set(),
    "provenance.thunder.capture": {"provenance.core.caches", "provenance.thunder.patching"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path, known: set[str], type_checking: bool = False) -> set[str]:
    """Our modules that `module` imports anywhere (functions included), `if TYPE_CHECKING:` aside
    unless `type_checking`."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [base])])
            for alias in node.names:  # `from pkg import mod` imports the module pkg.mod
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {name for name in found if name in known and name != module}


def _graph(type_checking: bool = False) -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules), type_checking) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_sees_function_level_imports_and_skips_type_checking_ones():
    graph = _graph()
    assert len(graph) > 30 and "provenance.report.read.log_file" in graph
    assert "provenance.thunder" in graph["provenance"]  # enable() imports it inside the function
    assert "provenance.log.exporter" not in graph["provenance.log.session"]  # TYPE_CHECKING only
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_no_import_cycle_not_even_through_type_checking_imports():
    cycle = _cycle(_graph(type_checking=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The package's pipeline, by folder: capture's record (core) -> the log -> each feature's home (ThunderFX's
# graphs, time, memory) -> the exporters -> capture (thunder/) -> what reads or drives it all (the API,
# report, diff, the CLI). A module imports its own stage or earlier ones, never a later one.
PIPELINE = (("provenance._version", "provenance.core"), ("provenance.log",),
            ("provenance.dynamo", "provenance.timing", "provenance.allocation"), ("exporters",),
            ("provenance.thunder",), ("provenance", "provenance.bootstrap", "provenance.report", "provenance.diff",
                                      "provenance.cli", "provenance.__main__"))


def _pipeline_stage(module: str) -> int:
    """The stage of the longest prefix naming `module` (`provenance` itself: only the package's API)."""
    return max(((len(prefix), i) for i, stage in enumerate(PIPELINE) for prefix in stage
                if module == prefix or (prefix != "provenance" and module.startswith(prefix + "."))))[1]


def test_the_package_folders_show_its_pipeline_and_import_only_earlier_stages():
    graph = _graph(type_checking=True)
    later = [(m, t) for m, targets in graph.items() for t in targets if _pipeline_stage(t) > _pipeline_stage(m)]
    assert later == [], later
    tops = {p.name for p in (ROOT / "provenance").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert tops == {"__init__.py", "__main__.py", "_version.py", "bootstrap.py", "cli.py", "core", "log", "dynamo",
                    "timing", "allocation", "thunder", "report", "diff"}


def test_no_public_name_of_the_package_shadows_an_unrelated_module():
    """`def stats()` in provenance/__init__.py would replace the attribute a provenance/stats.py
    sets (`import provenance.stats as m` would give the function). Only a module's own namesake
    may be re-exported over it (none is: `provenance.scope` is the function of provenance/core/scope.py)."""
    import provenance

    for name in provenance.__all__:
        if f"provenance.{name}" in _modules():
            assert getattr(provenance, name).__module__ == f"provenance.{name}", name


def test_core_layers_import_only_what_is_below_them():
    graph = _graph()
    for module, allowed in ALLOWED.items():
        assert graph[module] <= allowed, (module, graph[module] - allowed)


_REPORT_ONLY = """
import atexit, sys
registered = []  # every atexit handler registered from here on, by its module
_register = atexit.register
atexit.register = lambda fn, *a, **k: (registered.append(getattr(fn, "__module__", "?")), _register(fn, *a, **k))[1]
before = atexit._ncallbacks()
import provenance.report
from provenance.cli import main
code = main(["report", sys.argv[1], "-o", sys.argv[2], "--no-browser"])
assert atexit._ncallbacks() - before == len(registered), "a handler registered without atexit.register"
ours = [m for m in registered if m.partition(".")[0] in ("provenance", "exporters")]
loaded = sorted(m for m in ("torch", "thunder", "provenance.log.session", "provenance.thunder") if m in sys.modules)
print("RESULT", code, ours, loaded, "| handlers:", registered)
"""


def test_the_report_imports_neither_torch_thunder_nor_the_session(tmp_path):
    sys.path.insert(0, str(SUPPORT))
    import report_logs

    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.profiled())  # its Time section too
    env = {k: v for k, v in os.environ.items() if k != "THUNDER_TRACE"}
    done = subprocess.run([sys.executable, "-c", _REPORT_ONLY, str(log), str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "RESULT 0 [] [] |" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / "out" / "index.html").is_file()
    assert 'id="time"' in next((tmp_path / "out" / "compiles").glob("*-c1.html")).read_text()


# The report's pipeline, by folder: what each stage may import of the report (its own modules
# always; the top level of provenance/report/, cli/build/workers, is the pipeline that runs them).
STAGES = {
    "model": set(),  # the render model is a leaf: every other stage may import it
    # plural and numbers (a log's numbers as safe values) are leaves every stage uses
    "read": {"model", "plural", "numbers"},
    "analyze": {"read", "model", "plural", "numbers"},
    "render": {"analyze", "model", "plural", "numbers"},
}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["provenance", "report"] else None


def test_the_report_folders_show_its_pipeline_and_import_only_their_stages():
    """read <- analyze <- render, the model a leaf (TYPE_CHECKING imports too: analysis names what it
    writes to by protocols, analyze/ports.py)."""
    graph = _graph(type_checking=True)
    report = [m for m in graph if _stage(m) is not None]
    assert {_stage(m) for m in report} >= {*STAGES, "build", "workers", "report_command"}
    for module in report:
        stage = _stage(module)
        if stage not in STAGES:
            continue
        used = {_stage(target) for target in graph[module] if _stage(target) is not None} - {stage}
        assert used <= STAGES[stage], (module, used - STAGES[stage])
    for module, path in _modules().items():  # the model: not even for type checkers
        if _stage(module) == "model":
            assert "provenance.report" not in path.read_text().replace("provenance.report.model", ""), module


def test_every_event_type_has_exactly_one_report_handler():
    """provenance/log/events.py declares the types; analyze/handlers.py says what the report does
    with each: one handler each, no other list of types to keep in step."""
    from provenance.log import events
    from provenance.report.analyze import handlers

    declared = [h.type for h in handlers.default_handlers()]
    assert sorted(declared) == sorted(events.TYPES)
    assert {t for t, h in handlers.HANDLERS.items() if h.route is handlers.Route.CLOSES} == events.CLOSING_TYPES
    with pytest.raises(ValueError, match="two report handlers"):
        handlers.registry([handlers.TraceHandler(), handlers.TraceHandler()])


def test_the_otel_exporter_handles_or_names_as_ignored_every_event_type():
    """The other consumer of the event stream declares what it does with each type the same way:
    a method per handled type, the rest named with why; a type added to events.py is neither until
    it says (importing the exporter fails while a type is in neither)."""
    from exporters.otel import OtelExporter
    from provenance.log import events

    handled, ignored = set(OtelExporter.HANDLERS), set(OtelExporter.IGNORED)
    assert handled | ignored == set(events.TYPES) and not handled & ignored
    assert all(OtelExporter.IGNORED[t].strip() for t in ignored)
    assert all(callable(h) and h.__name__ == f"_on_{t}" for t, h in OtelExporter.HANDLERS.items())


def test_every_name_a_report_module_exports_exists():
    """`__all__` of the report's and the diff's modules names only what they define: a stale name
    (a class moved or removed) breaks `from module import *`, which model/__init__.py uses."""
    import importlib

    for name in sorted(_modules()):
        if name.startswith(("provenance.report", "provenance.diff")) and not name.endswith("__main__"):
            module = importlib.import_module(name)
            missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
            assert not missing, (name, missing)

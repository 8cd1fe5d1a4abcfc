"""Compiles in several threads at once: each one whole in the log, once, with its own traces.

Thunder keeps one CompileStats per jitted function, shared by the threads that call it; capture's
state must be per compile (state.compile_of), or two first calls of one function at once mix their
compiles (one left with only a start, the other ended twice with its traces written twice).
"""

from __future__ import annotations

import collections
import threading

import models
import orjson
import pytest
import thunder
import thunder.dynamo
import thunder_failures
import torch

import provenance
from provenance.cli import main as report_main

CLOSING = ("compile_end", "compile_error", "capture_disabled")


def _at_once(n: int, call) -> list:
    """`call(i)` in n threads released together; their results (an exception is re-raised here)."""
    barrier, results = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = call(i)
        except BaseException as exc:  # handed to the test's thread
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _check_log(logs, tmp_path) -> dict[int, collections.Counter]:
    """Every compile of the log started once and closed once, its traces written once each; the
    report --strict clean. Returns each compile's event counts."""
    (log,) = logs.glob("*.jsonl")
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    by_compile: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    traces: collections.Counter = collections.Counter()
    for e in events:
        if "compile" in e and e["type"] in ("compile_start", "trace", *CLOSING):
            by_compile[e["compile"]][e["type"]] += 1
            if e["type"] == "trace":
                traces[(e["compile"], e["list"], e["index"])] += 1
    assert by_compile
    for compile_id, counts in by_compile.items():
        assert counts["compile_start"] == 1, (compile_id, counts)
        assert sum(counts[t] for t in CLOSING) == 1, (compile_id, counts)
        assert counts["compile_end"] == 1, (compile_id, counts)  # none failed or lost capture
        assert counts["trace"] > 0, (compile_id, counts)
    assert max(traces.values()) == 1, [k for k, v in traces.items() if v > 1]
    assert report_main(["report", str(logs), "-o", str(tmp_path / "report"), "--strict", "--no-browser",
                        "--overwrite"]) == 0
    return by_compile


@pytest.mark.parametrize("repeat", range(3))
def test_two_threads_making_the_first_call_of_one_function_at_once(tmp_path, repeat):
    model = models.Net(n=8, depth=2)
    xs = [torch.randn(3, 8), torch.randn(5, 8)]  # two shapes: two compiles of the one function
    expected = [model(x) for x in xs]
    with provenance.tracing(tmp_path / "logs"):
        jmodel = thunder.jit(model)
        outs = _at_once(2, lambda i: jmodel(xs[i]))
        by_compile = _check_log(tmp_path / "logs", tmp_path)
    for out, want in zip(outs, expected):
        torch.testing.assert_close(out, want)
    # each thread's compile has its own traces: as many as one compile alone writes
    assert len(by_compile) == 2 and len({c["trace"] for c in by_compile.values()}) == 1


def test_four_threads_calling_one_thunderfx_function(tmp_path):
    def program() -> list:
        model = models.Net(n=8, depth=2)
        xs = [torch.randn(3, 8) for _ in range(4)]
        compiled = thunder.dynamo.thunderfx(model)
        outs = _at_once(4, lambda i: compiled(xs[i]))
        for out, x in zip(outs, xs):
            torch.testing.assert_close(out, model(x))
        return outs

    with provenance.tracing(tmp_path / "logs"):
        thunder_failures.run(program)
        _check_log(tmp_path / "logs", tmp_path)

"""Hostile log shapes, each with a valid log of the same size to compare it with (issue 10): the
inputs of tests/report/test_report_fuzz.py's linear bounds and of bench/hostile_inputs.py.

Each shape is a function of its scale returning {file name: items} (items as report_logs.write
takes them: records, or raw bytes); `valid(size)` is a run of ordinary compiles of about `size`
bytes.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import report_logs

__all__ = ["SHAPES", "bad_lines", "big_trace", "deep_module", "deep_stacks", "desync", "distinct_files", "fx_split",
           "long_line", "many_phases", "prologue_order", "rank_functions", "repeated_ids", "size", "valid", "write"]

Items = list  # of dict | bytes
Log = dict[str, Items]


def _compile(compile_id: int, rank: int | None = None) -> list[dict]:
    """One ordinary compile's records (its header, provenance records and calls summary left out)."""
    records = report_logs.records(compile_id=compile_id, rank=rank)
    return [r for r in records if r["type"] in ("compile_start", "trace", "compile_end")]


def _provs(rank: int | None = None) -> list[dict]:
    return [r for r in report_logs.records(rank=rank) if r["type"] == "prov"]


def size(log: Log) -> int:
    return sum(len(i) if isinstance(i, bytes) else len(orjson.dumps(i)) + 1 for items in log.values() for i in items)


def valid(target: int, rank: int | None = None, name: str = "valid.jsonl") -> Log:
    """Ordinary compiles, distinct ids, about `target` bytes."""
    header = report_logs.records(rank=rank)[0]
    one = len(orjson.dumps(_compile(1))) + len(_compile(1))
    n = max(1, target // one)
    items: Items = [header, *_provs(rank)]
    for cid in range(1, n + 1):
        items += _compile(cid, rank)
    return {name: items}


def bad_lines(n: int, width: int = 10) -> Log:
    """A header, then `n` lines that are not JSON."""
    return {"bad.jsonl": [report_logs.records()[0], *[b"x" * width + b"\n"] * n]}


def long_line(n: int) -> Log:
    """One compile whose forward trace has a line of `n` characters: an unterminated string of
    escaped quotes (the worst case of a backtracking string regex)."""
    records = report_logs.records()
    trace = next(r for r in records if r["type"] == "trace" and r.get("index") == 1)
    line = "  t9 = f(\"" + "\\\"" * (n // 2)
    trace["python"] = trace["python"] + "\n" + line
    trace["ops"] = [*trace["ops"], [len(trace["python"].split("\n")) - 1, 1, "f", ["t9"], 3]]
    return {"long.jsonl": records}


def big_trace(target: int) -> Log:
    """The valid counterpart of long_line: one compile of about `target` bytes, whose forward
    trace has ordinary lines (88 bytes of log each, with its op)."""
    records = report_logs.records()
    trace = next(r for r in records if r["type"] == "trace" and r.get("index") == 1)
    lines = [f"  t{i} = torch.mul(t{i - 1}, 2.0)  # t{i}: \"cpu f32[2]\"" for i in range(10, 10 + target // 88)]
    first = len(trace["python"].split("\n"))
    trace["python"] = trace["python"] + "\n" + "\n".join(lines)
    trace["ops"] = [*trace["ops"], *([first + k, 1, "mul", [f"t{10 + k}"], 2] for k in range(len(lines)))]
    return {"long.jsonl": records}


def _trace_of(ops: list[str], compile_id: int) -> dict:
    lines = [f"  t{i} = torch.{op}(x)" for i, op in enumerate(ops)]
    return {"type": "trace", "compile": compile_id, "list": "computation", "index": 0, "pass": "final",
            "label": None, "ms": None, "end_ns": None, "python": "\n".join(lines),
            "ops": [[i, 1, op, [f"t{i}"], 2] for i, op in enumerate(ops)]}


def desync(n_ops: int, seed: int = 0, differ: bool = True, start: int | None = None) -> Log:
    """Two ranks, one compile each of `n_ops` random ops of 10 symbols (a trace has few: mul,
    add, ...); rank 1's are other random ops from op `start` on (default n_ops / 4; `differ`=False:
    the same ops: the valid log of the same size)."""
    rng = random.Random(seed)
    ops = [f"op{rng.randrange(10)}" for _ in range(n_ops)]
    start = n_ops // 4 if start is None else start
    other = ops[:start] + [f"op{rng.randrange(10)}" for _ in range(n_ops - start)] if differ else ops
    out: Log = {}
    for rank, seq in ((0, ops), (1, other)):
        records = report_logs.records(rank=rank)
        start, end = (next(r for r in records if r["type"] == t) for t in ("compile_start", "compile_end"))
        out[f"r{rank}.jsonl"] = [records[0], *_provs(rank), start, _trace_of(seq, 1), end]
    return out


def repeated_ids(n: int, same: bool = True) -> Log:
    """`n` small compiles that all have compile id 1 (`same`=False: ids 1..n, the same size)."""
    header = report_logs.records()[0]
    items: Items = [header, *_provs()]
    for k in range(n):
        start, end = (r for r in _compile(1 if same else 10**6 + k) if r["type"] in ("compile_start", "compile_end"))
        items += [start, end]
    return {"ids.jsonl": items}


def deep_stacks(n: int, depth: int = 2000) -> Log:
    """`n` compiles called from `depth` frames deep."""
    stack = [report_logs.frame(i + 1, f"f{i}()", f"/nonexistent/deep{i % 50}.py", f"f{i}") for i in range(depth)]
    log = valid(1, name="deep.jsonl")
    items: Items = log["deep.jsonl"][:1] + _provs()
    for cid in range(1, n + 1):
        compile_ = _compile(cid)
        compile_[0]["call_stack"] = stack
        items += compile_
    return {"deep.jsonl": items}


# -- issue 22: analyses that were not linear --------------------------------------------------------
def deep_module(n: int, deep: bool = True) -> Log:
    """A profiled compile whose ops' module path has `n` parts (`deep`=False: a flat name of the
    same length, the valid log of the same size)."""
    path = ".".join(["m"] * n) if deep else "m" * (2 * n - 1)
    return {"module.jsonl": report_logs.profiled(module=path, calls=3)}


def distinct_files(n: int, distinct: bool = True) -> Log:
    """One compile whose final forward trace has `n` ops, each made at a line of a file of its own
    (`distinct`=False: lines of one file, paths of the same length: the valid log)."""
    records = report_logs.records()
    header, start, end = records[0], records[1], records[-2]
    provs = [{"type": "prov", "id": 100 + i, "kind": "op", "module": "", "module_type": "Model", "transforms": [],
              "role": None, "span": None, "derived_from": None, "members": [],
              "source": [report_logs.frame(i + 1 if not distinct else 7, f"y{i} = torch.mul(x, {i})",
                                           f"/nonexistent/f{i if distinct else 0:06d}.py")]} for i in range(n)]
    trace = _trace_of(["mul"] * n, 1)
    trace["ops"] = [[i, 1, "mul", [f"t{i}"], 100 + i] for i in range(n)]
    return {"files.jsonl": [header, start, *provs, trace, end]}


def rank_functions(n: int, distinct: bool = True) -> Log:
    """`n` ranks (logs), each with one compile of a function of its own (`distinct`=False: the
    same function on every rank: the valid log, as long)."""
    out: Log = {}
    for rank in range(n):
        fn = f"model_{rank:05d}.Net" if distinct else "model_00000.Net"
        records = report_logs.records(rank=rank, fn=fn)
        out[f"r{rank:05d}.jsonl"] = [r for r in records if r["type"] != "calls"]
    return out


def many_phases(n: int) -> Log:
    """Compiles of MAX_PHASES phases each, `n` phases in all: every one a Perfetto event."""
    from provenance.log.events import MAX_PHASES

    header = report_logs.records()[0]
    items: Items = [header, *_provs()]
    t = header["time_ns"]
    for cid in range(1, max(1, n // MAX_PHASES) + 1):
        compile_ = _compile(cid)
        base = t + cid * 10**9
        phases = [[f"pass{k % 40}", base + k * 1000, base + k * 1000 + 900, k % 3, None] for k in range(MAX_PHASES)]
        compile_.insert(-1, {"type": "phases", "compile": cid, "start_ns": base, "end_ns": base + MAX_PHASES * 1000,
                             "phases": phases})
        items += compile_
    return {"phases.jsonl": items}


def prologue_order(n: int, shuffled: bool = True, seed: int = 0) -> Log:
    """A recompile whose prologue and the rejected compile's have `n` checks each, in another
    order (`shuffled`=False: the same checks, one of them changed, as a shape change makes: the
    valid log of the same size)."""
    lines = [f"  check_tensor_shape_and_metadata(t{i}, ({i % 7 + 2}, 8), 'cpu', torch.float32, False)"
             for i in range(n)]
    other = list(lines)
    if shuffled:
        random.Random(seed).shuffle(other)
    else:
        other[n // 2] = other[n // 2].replace(", 8)", ", 9)")
    header = report_logs.records()[0]
    items: Items = [header, *_provs()]
    for cid, body in ((1, lines), (2, other)):
        compile_ = _compile(cid)
        compile_[0]["index"] = cid - 1
        prologue = {"type": "trace", "compile": cid, "list": "prologue", "index": 0, "pass": "final", "label": None,
                    "ms": None, "end_ns": None, "python": "def prologue(*args):\n" + "\n".join(body), "ops": []}
        if cid == 2:
            compile_.insert(1, {"type": "recompile", "compile": 2, "time_ns": compile_[0]["time_ns"] + 1,
                                "call": report_logs.frame(4, "jm(x)", "/nonexistent/train.py", "<module>"),
                                "reason": "t0: shape", "more": 0,
                                "rejected": [{"compile": 1, "reason": "t0: shape", "subject": "t0", "changes": [],
                                              "check": lines[0].strip(), "error": "AssertionError"}]})
        compile_.insert(-1, prologue)
        items += compile_
    return {"prologue.jsonl": items}


def fx_split(n_lines: int, n_reasons: int | None = None) -> Log:
    """A ThunderFX graph whose torch fallback piece runs `n_lines` user lines, split off for
    `n_reasons` reasons (default n_lines // 5)."""
    n_reasons = n_lines // 5 if n_reasons is None else n_reasons
    records = report_logs.records(fx=True, schema="1.4")
    graph = next(r for r in records if r["type"] == "dynamo_graph")
    fallback = graph["pieces"][1]
    fallback["frames"] = [report_logs.frame(100 + i, f"z{i} = torch.linalg.det(y{i})") for i in range(n_lines)]
    graph["reasons"] = [{**graph["reasons"][0], "info": f"node linalg_det_{i}: only an automatic torch fallback",
                         "node": f"linalg_det_{i}"} for i in range(n_reasons)]
    return {"fx.jsonl": records}


# name: (hostile log at scale n, the same shape made valid at scale n, or None: a valid log of the same size)
SHAPES = {
    "bad lines": (bad_lines, None),
    "one long trace line": (long_line, lambda n: big_trace(size(long_line(n)))),
    "desync": (desync, lambda n: desync(n, differ=False)),
    "repeated compile ids": (repeated_ids, lambda n: repeated_ids(n, same=False)),
    "deep call stacks": (deep_stacks, None),
    "deep module path": (deep_module, lambda n: deep_module(n, deep=False)),
    "ops from distinct files": (distinct_files, lambda n: distinct_files(n, distinct=False)),
    "ranks with distinct functions": (rank_functions, lambda n: rank_functions(n, distinct=False)),
    "many phases": (many_phases, None),
    "prologues in another order": (prologue_order, lambda n: prologue_order(n, shuffled=False)),
    "fallback lines times split reasons": (fx_split, None),
}


def write(directory: Path, log: Log) -> Path:
    """The log's files in `directory`; the path to report (the file, if there is only one)."""
    for name, items in log.items():
        report_logs.write(directory / name, items)
    return directory / next(iter(log)) if len(log) == 1 else directory


# -- OTLP/JSON exports (provenance/report/read/otlp_json.py): one export request per line --------

def _kv(key: str, value: object) -> dict:
    kind = "stringValue" if isinstance(value, str) else "intValue" if isinstance(value, int) else "doubleValue"
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def _otlp_request(spans: list[dict], pid: int = 4242, rank: int | None = 0) -> dict:
    resource = [_kv("service.name", "bench"), _kv("host.name", "h"), _kv("process.pid", pid)]
    if rank is not None:
        resource.append(_kv("thunder.rank", rank))
    return {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"scope": {"name": "thunder-provenance", "version": "0.1.0"},
                                               "spans": spans}]}]}


def _otlp_compile(compile_id: int, phases: int = 10) -> list[dict]:
    """A compile span (base64 ids, as json_format writes them) and its phase spans."""
    import base64

    t = 1_796_000_000_000_000_000 + compile_id * 10_000_000
    span_id = base64.b64encode(compile_id.to_bytes(8, "big")).decode()
    trace_id = base64.b64encode(compile_id.to_bytes(16, "big")).decode()
    out = [{"traceId": trace_id, "spanId": span_id, "name": "thunder.compile f", "startTimeUnixNano": str(t),
            "endTimeUnixNano": str(t + 9_000_000),
            "attributes": [_kv("thunder.compile_id", compile_id), _kv("thunder.function", "m.f"),
                           _kv("thunder.compile_index", 0), _kv("code.file.path", "/m.py"),
                           _kv("code.line.number", 3), _kv("code.function.name", "main"), _kv("thunder.ops", 10),
                           _kv("thunder.fusions", 0), _kv("thunder.coverage.with_provenance", 10),
                           _kv("thunder.coverage.compute", 5), _kv("thunder.coverage.compute_with_user_source", 5),
                           _kv("thunder.log_seconds", 0.001)]}]
    for i in range(phases):
        phase_id = base64.b64encode((compile_id << 16 | i + 1).to_bytes(8, "big")).decode()
        out.append({"traceId": trace_id, "spanId": phase_id,
                    "parentSpanId": span_id, "name": f"thunder.phase p{i}", "startTimeUnixNano": str(t + i * 800_000),
                    "endTimeUnixNano": str(t + i * 800_000 + 700_000),
                    "attributes": [_kv("thunder.compile_id", compile_id), _kv("thunder.phase", f"p{i}")]})
    return out


def otlp_export(target: int, per_line: int = 32) -> Log:
    """A valid export of about `target` bytes: compiles of one process, `per_line` per request."""
    items: list[dict] = []
    compile_id, total = 1, 0
    while total < target:
        request = _otlp_request([s for c in range(compile_id, compile_id + per_line) for s in _otlp_compile(c)])
        compile_id += per_line
        items.append(request)
        total += len(orjson.dumps(request)) + 1
    return {"export.json": items}


def otlp_bad_lines(n: int) -> Log:
    """A valid request, then `n` lines that look like requests and are not (json_format refuses each)."""
    return {"bad.json": [_otlp_request(_otlp_compile(1)), *[b'{"resourceSpans": 7}\n'] * n]}


def otlp_processes(n: int, distinct: bool = True) -> Log:
    """One compile in each of `n` processes (resources) of one export, or all in one process."""
    return {"procs.json": [_otlp_request(_otlp_compile(i + 1, phases=2), pid=i + 1 if distinct else 1, rank=None)
                           for i in range(n)]}

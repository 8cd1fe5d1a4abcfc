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

__all__ = ["SHAPES", "bad_lines", "big_trace", "deep_stacks", "desync", "long_line", "repeated_ids", "size", "valid",
           "write"]

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


# name: (hostile log at scale n, the same shape made valid at scale n, or None: a valid log of the same size)
SHAPES = {
    "bad lines": (bad_lines, None),
    "one long trace line": (long_line, lambda n: big_trace(size(long_line(n)))),
    "desync": (desync, lambda n: desync(n, differ=False)),
    "repeated compile ids": (repeated_ids, lambda n: repeated_ids(n, same=False)),
    "deep call stacks": (deep_stacks, None),
}


def write(directory: Path, log: Log) -> Path:
    """The log's files in `directory`; the path to report (the file, if there is only one)."""
    for name, items in log.items():
        report_logs.write(directory / name, items)
    return directory / next(iter(log)) if len(log) == 1 else directory

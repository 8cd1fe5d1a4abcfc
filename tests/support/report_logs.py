"""Small THUNDER_TRACE logs written by hand (docs/log-schema.md), for the report's tests: one
compile of `y = x * 2 + x` with a forward and a backward trace, whose pieces a test can replace
(source text, names, ...) or corrupt."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

MODEL = "/nonexistent/report_model.py"  # not on disk: the source view rebuilds it from the log

FORWARD = """\
# Constructed by Delete Last Used (took 3 milliseconds)
import torch
from thunder.executors.torchex import no_autocast

@torch.no_grad()
@no_autocast
def computation(x):
  # x: "cpu f32[2]"
  t0 = torch.mul(x, 2.0)  # t0: "cpu f32[2]"
  t1 = torch.add(t0, x)  # t1: "cpu f32[2]"
  del t0
  return {'output': t1, 'flat_args': [x]}"""

FORWARD_FIRST = FORWARD.replace("Delete Last Used (took 3 milliseconds)", "Dead Code Elimination").replace(
    "  del t0\n", "")

BACKWARD = """\
# Constructed by Delete Last Used (took 2 milliseconds)
import torch

@torch.no_grad()
def backward_fn(saved_for_backward, cotangents):
  t2, = cotangents
  t3 = torch.mul(t2, 2.0)  # t3: "cpu f32[2]"
  t4 = torch.add(t3, t2)  # t4: "cpu f32[2]"
  del t3
  return (t4,)"""


def frame(line: int, text: str, file: str = MODEL, fn: str = "Model.forward") -> list:
    return [file, line, fn, text, True]


def records(*, text_mul: str = "y = x * 2", text_add: str = "return y + x", fn: str = "report_model.Model",
            module: str = "", compile_id: Any = 1, file: str = MODEL, argv: list[str] | None = None,
            error: dict | None = None, schema: str = "1.0", rank: int | None = None,
            time_ns: int = 1_796_000_000_000_000_000, role: str | None = None, why: bool = False,
            fx: bool = False) -> list[dict]:
    """One process's records, in the order the writer emits them; `why`: with the records of
    schema 1.1 (a recompile of compile 1, phases, an executor compile); `fx`: the compile is a
    ThunderFX piece, `thunder_0` of Dynamo graph [0/0], with a graph break before it and a fallback
    piece after it (schema 1.4)."""
    t = time_ns
    out: list[dict] = [
        {"type": "header", "schema": schema, "time_ns": t, "versions": {"python": "3.11.7", "thunder": "0.2.6"},
         "argv": argv or ["train.py"], "pid": 4242, "host": "vm", "rank": rank,
         "world_size": None if rank is None else 2},
        {"type": "compile_start", "compile": compile_id, "fn": fn, "index": 0, "is_module": True, "time_ns": t + 1000,
         "jit_stack": [frame(3, "jm = thunder.jit(model)", "/nonexistent/train.py", "<module>")],
         "call_stack": [frame(4, "jm(x).sum().backward()", "/nonexistent/train.py", "<module>")]},
        {"type": "prov", "id": 1, "kind": "bookkeeping", "source": [], "module": None, "module_type": None,
         "transforms": ["del_last_used"], "role": None, "span": None, "derived_from": None, "members": []},
        {"type": "prov", "id": 2, "kind": "op", "source": [frame(10, text_mul, file)], "module": module,
         "module_type": "Model", "module_file": file, "transforms": [], "role": role, "span": None,
         "derived_from": None, "members": []},
        {"type": "prov", "id": 3, "kind": "op", "source": [frame(11, text_add, file)], "module": module,
         "module_type": "Model", "transforms": [], "role": None, "span": None, "derived_from": None, "members": []},
        {"type": "prov", "id": 4, "kind": "backward", "source": [frame(10, text_mul, file)], "module": module,
         "module_type": "Model", "transforms": ["grad"], "role": role, "span": None, "derived_from": 2, "members": []},
        {"type": "prov", "id": 5, "kind": "backward", "source": [frame(11, text_add, file)], "module": module,
         "module_type": "Model", "transforms": ["grad"], "role": None, "span": None, "derived_from": 3, "members": []},
        {"type": "trace", "compile": compile_id, "list": "computation", "index": 0, "pass": "dce",
         "label": "Dead Code Elimination", "ms": None, "end_ns": t + 2_000_000, "python": FORWARD_FIRST,
         "ops": [[8, 1, "mul", ["t0"], 2], [9, 1, "add", ["t1"], 3], [10, 1, "python_return", [], 1]]},
        {"type": "trace", "compile": compile_id, "list": "computation", "index": 1, "pass": "del_last_used",
         "label": "Delete Last Used (took 3 milliseconds)", "ms": 3, "end_ns": t + 3_000_000, "python": FORWARD,
         "ops": [[8, 1, "mul", ["t0"], 2], [9, 1, "add", ["t1"], 3], [10, 1, "python_del", [], 1],
                 [11, 1, "python_return", [], 1]]},
        {"type": "trace", "compile": compile_id, "list": "computation", "index": 2, "same_as": 1},
        {"type": "trace", "compile": compile_id, "list": "backward", "index": 0, "pass": "del_last_used",
         "label": "Delete Last Used (took 2 milliseconds)", "ms": 2, "end_ns": t + 4_000_000, "python": BACKWARD,
         "ops": [[6, 1, "mul", ["t3"], 4], [7, 1, "add", ["t4"], 5], [8, 1, "python_del", [], 1],
                 [9, 1, "python_return", [], 1]]},
    ]
    if error is None:
        out.append({"type": "compile_end", "compile": compile_id, "status": "ok", "time_ns": t + 5_000_000,
                    "seconds": 0.005, "log_seconds": 0.001, "cache": {"hits": 0, "misses": 1, "calls": 1},
                    "final": {"ops": 8, "with_provenance": 8, "compute": 4, "compute_with_user_source": 4,
                              "fusions": 0}})
    else:
        out.append({"type": "compile_error", "compile": compile_id, "time_ns": t + 5_000_000, "seconds": 0.005,
                    "error_type": "builtins.RuntimeError", "message": "boom",
                    "traceback": "Traceback ...\nRuntimeError: boom",
                    "last_prov": 3, **error})
    out.append({"type": "calls", "fn": fn, "compiles": [compile_id], "calls": 3, "cache_hits": 2, "cache_misses": 1,
                "compile_hits": [2], "time_ns": t + 9_000_000})
    if why:
        out.insert(2, {"type": "recompile", "compile": compile_id, "time_ns": t + 1500,
                       "call": frame(4, "jm(x).sum().backward()", "/nonexistent/train.py", "<module>"),
                       "reason": "x: shape [2] \u2192 [3]", "more": 0, "rejected": [
                           {"compile": 1, "reason": "x: shape [2] \u2192 [3]", "subject": "x",
                            "changes": [["shape", "[2]", "[3]"]], "check": "check_tensor_metadata(x, (2,), 'cpu', "
                            "torch.float32, True)", "error": "AssertionError: expected tensor with (2,) ..."}]})
        end = next(i for i, r in enumerate(out) if r["type"] in ("compile_end", "compile_error"))
        out.insert(end, {"type": "phases", "compile": compile_id, "start_ns": t + 1000, "end_ns": t + 5_000_000,
                         "phases": [["acquire_trace", t + 1000, t + 3_000_000, 0, None],
                                    ["codegen", t + 3_000_000, t + 4_000_000, 0, "computation"],
                                    ["executor_claiming", t + 3_100_000, t + 3_200_000, 1, None]]})
        out.insert(end + 2, {"type": "executor_compile", "compile": compile_id, "executor": "torchcompile",
                             "fusion": "TorchCompile0", "trace": "computation", "start_ns": t + 6_000_000,
                             "end_ns": t + 8_000_000})
    if fx:
        out[1]["piece"] = {"graph": 1, "compile_id": "0/0", "name": "thunder_0"}
        out[1:1] = [
            {"type": "graph_break", "compile_id": "0/0", "time_ns": t + 100,
             "reason": "Failed to trace builtin operator\n  Explanation: print",
             "frames": [frame(12, "print(y)", file)]},
            {"type": "dynamo_graph", "graph": 1, "compile_id": "0/0", "start_ns": t + 200, "time_ns": t + 300,
             "pieces": [{"name": "thunder_0", "index": 0, "compiler": "thunder", "nodes": 2,
                         "frames": [frame(10, text_mul, file), frame(11, text_add, file)]},
                        {"name": "inductor_1", "index": 1, "compiler": "inductor", "nodes": 1,
                         "frames": [frame(13, "z = torch.linalg.det(y)", file)]}],
             "reasons": [{"piece": "inductor_1", "kind": "MISSING_OP_SUPPORT",
                          "info": "node with name: linalg_det and target: det only has an automatic torch fallback",
                          "exception": None, "node": "linalg_det",
                          "frames": [frame(13, "z = torch.linalg.det(y)", file)],
                          "module": module, "module_type": "Model"}]},
        ]
    return out


def page_traces(html: str) -> list[dict]:
    """The traces a page sends its script (lazy.py): each trace's data, in page order."""
    return [orjson.loads(m) for m in re.findall(r'<script type="application/json" class="td">(.*?)</script>', html)]


def page_provs(html: str) -> set:
    """The record ids of the ops of every trace on a page."""
    return {op[2] for trace in page_traces(html) for op in zip(*[iter(trace["o"])] * 3)}


def write(path: Path, items: list[dict | bytes]) -> Path:
    """Records as JSON lines; bytes are written as they are (garbage, a truncated tail)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for item in items:
            f.write(item if isinstance(item, bytes) else orjson.dumps(item) + b"\n")
    return path


# -- profile records (docs/log-schema.md): the ops of the final forward trace (#1) and backward
# trace (#0) above, by position, prov id and index in the trace record's ops.
PROFILED_FORWARD = [[1, "mul", 2, 0], [2, "add", 3, 1], [3, "python_del", 1, 2]]
PROFILED_BACKWARD = [[1, "mul", 4, 0], [2, "add", 5, 1], [3, "python_del", 1, 2]]


def profile(*, compile_id: Any = 1, calls: int = 2, forward: tuple[int, ...] = (3_000_000, 1_000_000, 20_000),
            backward: tuple[int, ...] = (2_000_000, 500_000, 20_000), between: int = 100_000,
            time_ns: int = 1_796_000_000_010_000_000) -> list[dict]:
    """The profile records of compile `compile_id`: every call takes the same op times (ns), plus
    `between` ns outside the ops in each trace."""
    out: list[dict] = []
    for trace, list_name, index, ops in (("forward", "computation", 1, PROFILED_FORWARD),
                                         ("backward", "backward", 0, PROFILED_BACKWARD)):
        out.append({"type": "profile_ops", "compile": compile_id, "trace": trace, "list": list_name, "index": index,
                    "clock": "cpu", "requested": calls, "ops": ops})
    for call in range(1, calls + 1):
        for trace, times in (("forward", forward), ("backward", backward)):
            out.append({"type": "profile_call", "compile": compile_id, "trace": trace, "call": call,
                        "wall_ns": sum(times) + between, "op_ns": list(times), "host_ns": None,
                        "time_ns": time_ns + call * 1000})
    return out


def profiled(**kw: Any) -> list[dict]:
    """records(**kw) with the profile records of its compile where the writer puts them: after
    the compile's end, before the exit's `calls` summary."""
    out = records(**{k: v for k, v in kw.items() if k not in ("calls", "forward", "backward", "between")})
    prof = profile(compile_id=kw.get("compile_id", 1),
                   **{k: v for k, v in kw.items() if k in ("calls", "forward", "backward", "between")})
    return out[:-1] + prof + out[-1:]


# -- a final trace to read (tests/report/test_report_trace_pages.py): as Thunder prints one, with a
# blank line before each of its source comments, a line longer than any screen, and a fusion with
# the ops it fused (schema 1.6), some of them from the same user line and module.
LONG_ARGS = ", ".join(f"t_blocks_{i}_mlp_c_fc_weight" for i in range(24))
READ_FORWARD = f"""\
# Constructed by Delete Last Used (took 3 milliseconds)
import torch
from thunder.executors.torchex import no_autocast

@torch.no_grad()
@no_autocast
def computation(x):
  # x: "cpu f32[2]"

  # {MODEL}:10: \t        y = x * 2
  t0 = torch.mul(x, 2.0)  # t0: "cpu f32[2]"

  # {MODEL}:11: \t        return y + x
  t1 = torch.add(t0, x)  # t1: "cpu f32[2]"
  del t0
  [t9] = TorchCompile0(t1, x)
  t10 = torch.cat([{LONG_ARGS}], t9)  # t10: "cpu f32[48]"
  return {{'output': t10, 'flat_args': [x]}}"""
READ_OPS = [[10, 1, "mul", ["t0"], 2], [13, 1, "add", ["t1"], 3], [14, 1, "python_del", [], 1],
            [15, 1, "TorchCompile0", ["t9"], 14], [16, 1, "cat", ["t10"], 13], [17, 1, "python_return", [], 1]]
# the fusion's ops, in its order: line 20 in blocks.0.ln (two records, three ops) and blocks.1.ln, line 21
READ_FUSED = [[3, "t2 = ltorch.mul(t1, 2.0)  # t2: \"cpu f32[2]\"", 10],
              [3, "t3 = ltorch.add(t2, x, alpha=1)  # t3: \"cpu f32[2]\"", 11],
              [3, "t4 = ltorch.neg(t3)  # t4: \"cpu f32[2]\"", 10],
              [3, "t5 = ltorch.mul(t4, t4)  # t5: \"cpu f32[2]\"", 12],
              [3, "t9 = ltorch.sub(t5, x, alpha=1)  # t9: \"cpu f32[2]\"", 13]]
READ_TIMES = (3_000_000, 1_000_000, 20_000, 2_500_000, 1_500_000)  # the first call's, of ops 0, 1, 2, 3, 4


def reading(*, fused: bool = True, calls: int = 3) -> list[dict]:
    """records() with READ_FORWARD as the final forward trace, its ops timed over `calls` profiled
    calls (call n takes READ_TIMES x (1 + (n - 1) / 10)); `fused`: with the trace record's list of
    the fusion's ops."""
    out = records()
    ln = "Model.forward"
    more = [
        {"type": "prov", "id": 10, "kind": "decomposition", "source": [frame(20, "y = self.ln(x)", MODEL, ln)],
         "module": "blocks.0.ln", "module_type": "LayerNorm", "transforms": [], "role": None, "span": None,
         "derived_from": None, "members": []},
        {"type": "prov", "id": 11, "kind": "op", "source": [frame(20, "y = self.ln(x)", MODEL, ln)],
         "module": "blocks.0.ln", "module_type": "LayerNorm", "transforms": [], "role": None, "span": None,
         "derived_from": None, "members": []},
        {"type": "prov", "id": 12, "kind": "decomposition", "source": [frame(20, "y = self.ln(x)", MODEL, ln)],
         "module": "blocks.1.ln", "module_type": "LayerNorm", "transforms": [], "role": None, "span": None,
         "derived_from": None, "members": []},
        {"type": "prov", "id": 13, "kind": "op", "source": [frame(21, "return self.mlp(y)", MODEL, ln)],
         "module": "blocks.0.mlp", "module_type": "MLP", "transforms": [], "role": None, "span": None,
         "derived_from": None, "members": []},
        {"type": "prov", "id": 14, "kind": "fusion", "source": [], "module": None, "module_type": None,
         "transforms": ["fusion"], "role": None, "span": None, "derived_from": None, "members": [10, 11, 12, 13]},
    ]
    at = next(i for i, r in enumerate(out) if r["type"] == "trace")
    out[at:at] = more
    final = next(r for r in out if r["type"] == "trace" and r["list"] == "computation" and r["index"] == 1)
    final.update(python=READ_FORWARD, ops=READ_OPS)
    if fused:
        final["fused"] = READ_FUSED
    ops = [[i + 1, op[2], op[4], i] for i, op in enumerate(READ_OPS[:5])]
    prof: list[dict] = [{"type": "profile_ops", "compile": 1, "trace": "forward", "list": "computation", "index": 1,
                         "clock": "cpu", "requested": calls, "ops": ops}]
    for call in range(1, calls + 1):
        times = [round(ns * (1 + (call - 1) / 10)) for ns in READ_TIMES]
        prof.append({"type": "profile_call", "compile": 1, "trace": "forward", "call": call,
                     "wall_ns": sum(times) + 100_000, "op_ns": times, "host_ns": None,
                     "time_ns": 1_796_000_000_010_000_000 + call * 1000})
    return out[:-1] + prof + out[-1:]


# -- memory records (docs/log-schema.md): the static timeline of the final traces above, each
# f32 tensor `nbytes` bytes. Forward: mul (line 10) makes t0, saved for the backward; add (line
# 11) makes t1, returned: peak 2 x nbytes. Backward: t0 live at the start, mul's grad t3 freed
# by the del, add's grad t4 returned: peak 3 x nbytes after add.
def memory(*, compile_id: Any = 1, nbytes: int = 8) -> list[dict]:
    n = nbytes
    return [
        {"type": "memory", "compile": compile_id, "trace": "forward", "list": "computation", "index": 1,
         "inputs": n, "start": 0, "ops": [[8, "mul", 2, n, 0, n], [9, "add", 3, n, 0, 2 * n]],
         "blocks": [["t0", n, 2, 8, None], ["t1", n, 3, 9, None]], "saved": [["t0", n, 2, False]], "remat": []},
        {"type": "memory", "compile": compile_id, "trace": "backward", "list": "backward", "index": 0,
         "inputs": n, "start": n, "ops": [[6, "mul", 4, n, 0, 2 * n], [7, "add", 5, n, 0, 3 * n],
                                          [8, "python_del", 1, 0, 2 * n, n]],
         "blocks": [["t0", n, 2, None, 8], ["t3", n, 4, 6, 8], ["t4", n, 5, 7, None]], "saved": [], "remat": []},
    ]


def with_memory(**kw: Any) -> list[dict]:
    """records(**kw) with the memory records of its compile where the writer puts them: before its compile_end."""
    out = records(**{k: v for k, v in kw.items() if k != "nbytes"})
    end = next(i for i, r in enumerate(out) if r["type"] == "compile_end")
    out[end:end] = memory(compile_id=kw.get("compile_id", 1), nbytes=kw.get("nbytes", 8))
    return out

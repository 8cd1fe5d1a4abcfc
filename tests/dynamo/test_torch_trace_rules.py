# ruff: noqa: E501  (torch's own guard text, as it prints it)
"""provenance/dynamo/torch_trace.py, the rules that read torch's structured trace back (issue 46): the
guard tree torch prints, sources in the user's words, a frame compile's artifacts kept by kind and by
attempt, and untrusted records. No torch: torch's own text, as torch 2.9 writes it."""

from __future__ import annotations

from provenance.dynamo import torch_trace
from provenance.dynamo.torch_trace import FrameTrace, decode, guard_tree, root_name, user_name

# a frame compile's guards, as torch 2.9 prints them (dynamo_cpp_guards_str), abridged
TREE = """
TREE_GUARD_MANAGER:
+- RootGuardManager
| +- LAMBDA_GUARD: torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == None  # _dynamo/output_graph.py:688 in init_ambient_guards
| +- GLOBAL_STATE: ___check_global_state()
| +- GuardManager: source=L['n'], accessed_by=FrameLocalsGuardAccessor(key='n', framelocals_idx=1), type=<class 'int'>, tag_safe=(True, False)
| | +- TYPE_MATCH: ___check_type_id(L['n'], 139883666832608)                     # if n > 5: y = y + 1  # mp/exp/probe2.py:10 in f
| +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x', framelocals_idx=0), type=<class 'torch.Tensor'>, tag_safe=(True, False)
| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CPU), torch.float32, device=None, requires_grad=False, size=[None, 3], stride=[3, 1])  # y = torch.sin(x) * 2  # mp/exp/probe2.py:9 in f
| +- GuardManager: source=G, accessed_by=GlobalsGuardAccessor, type=<class 'dict'>, tag_safe=(False, False)
| | +- GuardManager: source=G['torch'], accessed_by=DictGetItemGuardAccessor('torch'), type=<class 'module'>, tag_safe=(False, False)
| | | +- ID_MATCH: ___check_obj_id(G['torch'], 139883656037136)                  # y = torch.sin(x) * 2  # mp/exp/probe2.py:9 in f
| | +- GuardManager: source=G['__import_torch_dot_nn_dot_modules_dot_module'], accessed_by=DictGetItemGuardAccessor('x'), type=<class 'module'>, tag_safe=(False, False)
| | | +- ID_MATCH: ___check_obj_id(G['__import_torch_dot_nn_dot_modules_dot_module'], 1)
+- LAMBDA_GUARD: 2 <= L['x'].size()[0]  # y = torch.sin(x) * 2  # mp/exp/probe2.py:9 in f (user code shown is first use)
+- LAMBDA_GUARD: 6 <= L['n']  # if n > 5: y = y + 1  # mp/exp/probe2.py:10 in f (_dynamo/variables/tensor.py:1435 in evaluate_expr)

Guard latency = 109.48 us
"""


def test_every_check_of_the_guard_tree_is_a_guard_with_the_input_it_reads():
    guards = guard_tree(TREE)
    # every leaf and both epilogue lambda guards; no manager, no header, no latency line
    assert [g.kind for g in guards] == ["LAMBDA_GUARD", "GLOBAL_STATE", "TYPE_MATCH", "TENSOR_MATCH", "ID_MATCH",
                                        "ID_MATCH", "LAMBDA_GUARD", "LAMBDA_GUARD"]
    assert [g.subject for g in guards] == [None, None, "n", "x", "torch", "torch.nn.modules.module", None, None]
    assert [g.local for g in guards] == [False, False, True, True, False, False, False, False]
    assert guards[3].code.startswith("check_tensor(L['x'], Tensor") and guards[3].where.startswith("y = torch.sin")
    assert guards[-1].code == "6 <= L['n']"
    assert guard_tree("no tree here\n+- \n| | +-") == []


def test_sources_read_in_the_users_words():
    assert user_name("L['x']") == "x" and user_name("kwargs['input_ids']") == "input_ids"
    assert user_name("check_tensor(kwargs['input_ids'], Tensor)") == "check_tensor(input_ids, Tensor)"
    assert user_name("L['self']._modules['lm_head']._parameters['weight']") == "self.lm_head.weight"
    assert user_name("__builtins_dict___0['len']") == "builtins.len"
    assert user_name("G['__import_torch_dot_nn_dot_functional']") == "torch.nn.functional"
    assert torch_trace.dim_name("L['x'].size()[1]") == "x dim 1"
    assert root_name("self.lm_head.weight") == "self" and root_name("(odd") == "(odd"


def _artifact(name: str, **fields):
    return decode({"type": "torch_trace", "name": name, "compile_id": "0/0", "attempt": 0, "time_ns": 1,
                   "metadata": {}, **fields})


def test_a_frame_compile_keeps_each_kind_and_the_last_attempt():
    frame = FrameTrace("0/0")
    frame.add(_artifact("dynamo_output_graph", attempt=1, payload="later"))
    frame.add(_artifact("dynamo_output_graph", attempt=0, payload="restarted"))  # an earlier attempt, written late
    frame.add(_artifact("dynamo_cpp_guards_str", payload=TREE))
    frame.add(_artifact("aot_forward_graph", payload="fw"))
    frame.add(_artifact("inductor_output_code", payload="code", payload_chars=10))
    frame.add(_artifact("fx_graph_cache_miss", payload='{"why": 1}'))
    frame.add(_artifact("create_symbol", metadata={"symbol": "s1", "val": "8", "vr": "[2, int_oo]",
                                                   "source": "L['ids'].size()[1]",
                                                   "user_stack": [{"filename": "/m.py", "line": 3, "name": "f",
                                                                   "loc": "y = ids + 1", "user": True},
                                                                  {"filename": "/torch/x.py", "line": 9, "name": "g",
                                                                   "user": False}]}))
    frame.add(_artifact("compilation_metrics", metadata={"guard_count": 7}))
    frame.add(_artifact("something_new"))
    assert frame.output_graph.payload == "later" and len(frame.guard_list()) == 8
    assert [a.name for a in frame.graphs] == ["aot_forward_graph"] and frame.inductor[0].cut
    assert frame.caches == [("fx_graph_cache", "miss", '{"why": 1}')]
    (shape,) = frame.shapes
    assert (shape.kind, shape.subject, shape.symbol) == ("symbol", "ids dim 1", "s1")
    assert torch_trace.user_frame(shape.user_stack).file == "/m.py"
    assert frame.metrics == {"guard_count": 7} and frame.others == {"something_new": 1}


def test_untrusted_records_are_read_or_left_out():
    assert decode({"type": "torch_trace"}) is None and decode({"name": 3}) is None
    odd = decode({"name": "x" * 500, "compile_id": 7, "attempt": "0", "payload": ["no"], "metadata": None})
    assert len(odd.name) == 200 and odd.compile_id is None and odd.attempt is None and odd.payload is None
    frame = FrameTrace("0/0")
    frame.add(decode({"name": "create_symbol", "metadata": "junk"}))
    frame.add(decode({"name": "symbolic_shape_specialization", "metadata": {"sources": [1, "L['x'].size()[0]"],
                                                                            "user_stack": "junk"}}))
    frame.add(decode({"name": "compilation_metrics", "metadata": [1]}))
    assert [s.subject for s in frame.shapes] == [None, "x dim 0"] and frame.metrics is None
    assert torch_trace.stack_of([{"line": "x"}, 5]) == [torch_trace.StackFrame("?", 0, "?", "", False)]

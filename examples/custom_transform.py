"""A user-written Thunder transform that labels the ops it inserts with `provenance.scope`.

`ClampLinearOutputs` clamps the output of every `linear`. It opens a provenance scope around
the ops it adds, so exactly those ops carry the scope and its role, through autograd and
executor claiming into the forward and backward execution traces, while keeping the user line
and module of the layer they belong to.

    python examples/custom_transform.py
"""

from __future__ import annotations

import thunder
import thunder.torch as ltorch
import torch
from thunder.core.trace import TraceProvenance
from thunder.core.trace_interpreter import TraceSubstitutionProcessor
from thunder.core.transform_common import Transform

import provenance


class ClampLinearOutputs(Transform):
    def __init__(self, limit: float = 1.0) -> None:
        self.limit = limit

    def transform_traces_pre_prologue(self, prologue_trc, computation_trc, epilogue_trc, **kwargs):
        limit = self.limit

        class Clamp(TraceSubstitutionProcessor):
            def process_bsym(self, bsym):
                if bsym.sym.name != "linear":
                    self.add_processed_bsyms([bsym.from_bsym()])
                    self.set_result(bsym.output)
                    return

                def linear_then_clamp(*args, **kwargs):
                    out = bsym.sym(*args, **kwargs)
                    with provenance.scope("clamp_linear_outputs", role="activation_clamp", limit=limit):
                        return ltorch.clamp(out, -limit, limit)

                self.add_bsyms_from_function(linear_then_clamp, *bsym.args, **bsym.kwargs)

        new_trace, _ = Clamp(computation_trc)()
        new_trace.set_provenance(TraceProvenance("Clamp linear outputs"))
        return prologue_trc, new_trace, epilogue_trc


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(8, 32)
        self.down = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def main() -> None:
    torch.manual_seed(0)
    provenance.enable()
    jmodel = thunder.jit(Mlp(), transforms=[ClampLinearOutputs(limit=0.5)])
    jmodel(torch.randn(4, 8, requires_grad=True)).sum().backward()
    for title, trace in (("forward", thunder.last_traces(jmodel)[-1]),
                         ("backward", thunder.last_backward_traces(jmodel)[-1])):
        print(f"#### final {title} execution trace")
        print(provenance.annotate(trace, print_depth=1, group=True))


if __name__ == "__main__":
    main()

"""A tiny program for the diff's tests (tests/diff/), run with THUNDER_TRACE (no code change) in
variants chosen by environment variables, each a change a user makes between two runs:

- DIFF_ACT=relu: one line changed (the activation; gelu by default); DIFF_ACT=gelu2: that line does
  twice the work (gelu of gelu: about 2x its time);
- DIFF_WIDE=2: fc1's width doubled;
- DIFF_RECOMPILE=1: a call with another batch size (a recompile);
- DIFF_EXECUTOR=torch_compile: Thunder's torch.compile executor on (fusions);
- DIFF_FX=1: under ThunderFX; DIFF_BREAK=1 adds a graph break (a print);
- under torchrun, every rank runs it (gloo); DIFF_RANK_ACT=relu changes the activation on rank 1 only.

Marker comments name its lines (line_of)."""

import os

import torch
import torch.nn.functional as F

ACT = os.environ.get("DIFF_ACT", "gelu")
if os.environ.get("DIFF_RANK_ACT") and os.environ.get("RANK") == "1":
    ACT = os.environ["DIFF_RANK_ACT"]
WIDE = int(os.environ.get("DIFF_WIDE", "1"))
BREAK = os.environ.get("DIFF_BREAK") == "1"


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 256 * WIDE)
        self.fc2 = torch.nn.Linear(256 * WIDE, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(x)  # <-- fc1
        h = F.relu(h) if ACT == "relu" else F.gelu(F.gelu(h)) if ACT == "gelu2" else F.gelu(h)  # <-- act
        if BREAK:
            print("a graph break")  # <-- break
        h = self.fc2(h)  # <-- fc2
        return torch.tanh(h) * 2  # <-- out


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if "RANK" in os.environ:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    model = MLP()
    if os.environ.get("DIFF_FX") == "1":
        import thunder.dynamo

        jm = thunder.dynamo.thunderfx(model)
    else:
        import thunder

        executors = None
        if os.environ.get("DIFF_EXECUTOR") == "torch_compile":
            from thunder.executors.torch_compile import torch_compile_ex

            executors = [torch_compile_ex, *thunder.get_default_executors()]
        jm = thunder.jit(model, executors=executors) if executors else thunder.jit(model)
    x = torch.randn(512, 64, requires_grad=True)
    for _ in range(int(os.environ.get("DIFF_CALLS", "25"))):
        jm(x).sum().backward()
    if os.environ.get("DIFF_RECOMPILE") == "1":
        jm(torch.randn(256, 64, requires_grad=True)).sum().backward()
    if "RANK" in os.environ:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# <-- {marker}"))


if __name__ == "__main__":
    main()

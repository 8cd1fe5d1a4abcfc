"""A tiny ThunderFX program where the backend fails a frame the way a Mixtral's grouped matmul does
(transformers' `_grouped_mm_fallback`: an expert loop over `offs.tolist()`, a data-dependent op that
AOTAutograd cannot trace with fake tensors: `aten._local_scalar_dense`), so Dynamo compiles the frame
again with a graph break at the call (before it: a Thunder piece and a piece inductor compiles, as in a
real model: its compile time dwarfs the few milliseconds torch spends around a frame compile); and frames
Dynamo gives up on (a graph break inside a context manager, inside a try block: torch's Unsupported, no
restart). Forward and backward, two steps, their wall times measured: the first compiles (inductor's
caches off, so that it compiles whatever ran before), the second is warm (tests/thunder/test_frame_compiles.py)."""

import time

import thunder.dynamo
import torch


@torch.library.custom_op("provenance_test::grouped_mm", mutates_args=())
def grouped_mm(x: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(x.size(0), weight.size(2), dtype=x.dtype)
    start = 0
    for i, end in enumerate(offs.tolist()):
        torch.mm(x[start:end], weight[i], out=out[start:end])
        start = end
    return out


@grouped_mm.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.size(0), weight.size(2))


def _setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.offs = inputs[2]


def _backward(ctx, grad: torch.Tensor):
    x, weight = ctx.saved_tensors
    grad_x, grad_weight, start = torch.zeros_like(x), torch.zeros_like(weight), 0
    for i, end in enumerate(ctx.offs.tolist()):  # <-- data-dependent
        grad_x[start:end] = grad[start:end] @ weight[i].T
        grad_weight[i] = x[start:end].T @ grad[start:end]
        start = end
    return grad_x, grad_weight, None


grouped_mm.register_autograd(_backward, setup_context=_setup)


class Quiet:
    def __enter__(self) -> "Quiet":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


class Experts(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = torch.nn.Linear(8, 8)
        self.weight = torch.nn.Parameter(torch.randn(4, 8, 8) / 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.router(x).relu()
        h = h * torch.linalg.det(h[:4, :4]).abs()  # a piece Thunder leaves to inductor, which compiles it
        offs = torch.tensor([2, 4, 6, 8])
        return grouped_mm(h, self.weight, offs).tanh()  # <-- experts


def scaled(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    with Quiet():
        print("scaled")  # <-- break in a context manager
        y = y + 1
    return y


def guarded(x: torch.Tensor) -> torch.Tensor:
    y = x - 1
    try:
        print("guarded")  # <-- break in a try block
        y = y * 3
    except ValueError:
        pass
    return y


def main() -> list[tuple[int, int]]:
    """Each step's (start, end), time.time_ns(): everything compiles in the first."""
    torch.manual_seed(0)
    model, scale, guard = (thunder.dynamo.thunderfx(f) for f in (Experts(), scaled, guarded))
    x = torch.randn(8, 8, requires_grad=True)
    steps = []
    with torch._inductor.config.patch(fx_graph_cache=False), torch._functorch.config.patch(
            enable_autograd_cache=False):
        for _ in range(2):
            start = time.time_ns()
            loss = guard(scale(model(x))).sum()
            loss.backward()
            steps.append((start, time.time_ns()))
    return steps


def line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# <-- {marker}"))


if __name__ == "__main__":
    main()

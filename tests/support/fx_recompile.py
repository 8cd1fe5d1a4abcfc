"""A tiny ThunderFX program whose second call changes a sequence length, so Dynamo compiles the
frame again ([0/1]); one piece falls back to inductor (det). Forward and backward. Run with
THUNDER_TRACE and no code change (tests/exporters, tests/thunder/test_fx_compile.py)."""

import time

import thunder.dynamo
import torch


class Seq(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(4, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.up(tokens)
        h = h * torch.linalg.det(h[:, :4, :4])[:, None, None]  # a fallback piece, with a backward
        return torch.tanh(h)


def main() -> list[tuple[int, int]]:
    """Each step's (start, end), time.time_ns()."""
    torch.manual_seed(0)
    model = thunder.dynamo.thunderfx(Seq())
    steps = []
    for length in (16, 8):
        start = time.time_ns()
        model(torch.randn(2, length, 4)).sum().backward()  # <-- fxr call
        steps.append((start, time.time_ns()))
    return steps


def line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# <-- {marker}"))


if __name__ == "__main__":
    main()

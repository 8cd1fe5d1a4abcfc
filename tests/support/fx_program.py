"""A tiny ThunderFX program for the tests that run one with THUNDER_TRACE and no code change:
one graph break (a print) and one piece Thunder leaves to torch (det). Marker comments name its
lines (models.line_of reads them the same way)."""

import thunder.dynamo
import torch


class Fx(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)  # <-- fxp up
        h = h * torch.linalg.det(h.detach())  # <-- fxp fallback
        print("graph break")  # <-- fxp print
        return torch.tanh(h)  # <-- fxp tanh


def main() -> None:
    torch.manual_seed(0)
    thunder.dynamo.thunderfx(Fx())(torch.randn(4, 4, requires_grad=True)).sum().backward()


def line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if line.rstrip().endswith(f"# <-- {marker}"))


if __name__ == "__main__":
    main()

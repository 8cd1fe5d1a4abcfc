"""On a CUDA machine: does profiling report kernel time, not launch time? (one short run)

A model whose one line is a large matmul (and its weight gradient in the backward), the others
tiny, on the GPU, profiled for 3 calls. Checks, each printed PASS/FAIL (exit code 1 on a FAIL):
1. the timed ops use the CUDA clock;
2. the big line ranks first and its forward time per call matches the matmul's kernel time
   measured independently (CUDA events around the bare matmul, after a synchronize): 0.7-1.5x;
3. its CPU time (the launch) is far below its device time: < 0.5x;
4. the ops' device times fit in the functions' device wall time (sum <= wall) and cover >= 80%;
5. torch.profiler's CUDA kernel time of one unprofiled call is within 0.7-1.5x of what the
   profile attributes per call (attributed time, forward + backward).

    python bench/cuda_profile_check.py [--n 4096] [--json out.json]
"""

from __future__ import annotations

import json
import sys
import warnings

import harness

warnings.filterwarnings("ignore")


def main() -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--json")
    args = parser.parse_args()

    import thunder
    import torch
    from torch import nn

    import provenance

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    n = args.n

    class OneBigLine(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(n, n) / n)
            self.small = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            a = torch.tanh(self.small(x[:4, :4]))
            b = x @ self.w  # BIG
            return b[:4, :4] * a

    model = OneBigLine().cuda()
    x = torch.randn(n, n, device="cuda")
    big_line = next(i for i, text in enumerate(open(__file__), 1) if text.rstrip().endswith("# BIG"))

    def step(jm) -> None:
        jm(x).sum().backward()

    provenance.enable(profile=3)
    jm = thunder.jit(model)
    for _ in range(4):
        step(jm)
    torch.cuda.synchronize()
    (profile,) = provenance.profiles(jm)
    rows = provenance.cost(jm)
    provenance.print_cost(jm)

    # the bare matmul's kernel time
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        for _ in range(3):
            x @ model.w
        torch.cuda.synchronize()
        start.record()
        for _ in range(10):
            x @ model.w
        end.record()
        torch.cuda.synchronize()
    matmul_ns = start.elapsed_time(end) / 10 * 1e6

    forward = profile.traces["forward"]
    big = [i for i, op in enumerate(forward.ops)
           if op.record is not None and op.record.user_frame is not None and op.record.user_frame.line == big_line]
    device_ns = sum(forward.op_ns[i] for i in big) / forward.calls
    host_ns = sum(forward.host_ns[i] for i in big) / forward.calls if forward.host_ns else float("nan")
    top = rows[0]

    # torch.profiler's view of one unprofiled call (the window is over)
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(jm)
        torch.cuda.synchronize()
    kernels_ns = sum(e.device_time_total for e in prof.events()
                     if e.device_type == torch.autograd.DeviceType.CUDA) * 1e3  # us -> ns
    attributed_per_call = profile.attributed_ns / profile.calls

    checks = {
        "cuda clock": all(t.clock == "cuda" for t in profile.traces.values()),
        "big line first": top.key.endswith(f":{big_line}"),
        "forward time = kernel time (0.7-1.5x)": 0.7 <= device_ns / matmul_ns <= 1.5,
        "launch time << kernel time (< 0.5x)": host_ns < 0.5 * device_ns,
        "ops within wall, coverage >= 80%": profile.attributed_ns <= profile.wall_ns and profile.coverage >= 0.8,
        "attributed ~ torch.profiler kernels (0.7-1.5x)": 0.7 <= attributed_per_call / kernels_ns <= 1.5,
    }
    figures = {"matmul_kernel_ms": matmul_ns / 1e6, "big_line_forward_device_ms": device_ns / 1e6,
               "big_line_forward_host_ms": host_ns / 1e6, "attributed_per_call_ms": attributed_per_call / 1e6,
               "profiler_kernels_per_call_ms": kernels_ns / 1e6, "coverage": profile.coverage,
               "gpu": torch.cuda.get_device_name()}
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    for name, value in figures.items():
        print(f"{name:>30}: {value:.4f}" if isinstance(value, float) else f"{name:>30}: {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"checks": checks, "figures": figures}, f, indent=1)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

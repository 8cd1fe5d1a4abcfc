"""gpu_check.py's first step: what the machine has (Python, torch, CUDA, the GPU, Thunder, nvFuser,
this package) as one JSON line, and whether one nvFuser fusion runs and equals eager. A package that
fails to import is said, not raised: the step reports it.

    python bench/children/gpu_environment.py
"""

import json
import platform
import traceback

import torch

info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
try:
    import thunder

    info["thunder"] = thunder.__version__
except Exception as exc:
    info["thunder"] = f"does not import: {exc!r}"[:300]
try:
    import nvfuser_direct

    info["nvfuser"] = str(nvfuser_direct.version())
except Exception as exc:
    info["nvfuser"] = f"does not import: {exc!r}"[:300]
import provenance  # noqa: E402  (after the optional imports: their failures are reported first)

info["thunder_provenance"] = provenance.__version__


def f(a, b):
    return torch.nn.functional.gelu(a * b + 1).sum(-1)


if info["gpu"] and not info["nvfuser"].startswith("does not import"):
    try:  # one fusion, checked against eager: is this nvFuser build usable with this torch?
        from thunder.executors.nvfuserex import nvfuserex

        a, b = torch.randn(64, 256, device="cuda"), torch.randn(64, 256, device="cuda")
        jf = thunder.jit(f, executors=[nvfuserex])
        torch.testing.assert_close(jf(a, b), f(a, b))
        fused = [s.sym.name for s in thunder.last_traces(jf)[-1].bound_symbols if s.sym.is_fusion]
        info["nvfuser_fusion"] = f"ran, equal to eager: {fused}" if fused else "FAILED: nothing fused"
    except Exception as exc:
        info["nvfuser_fusion"] = f"FAILED: {exc!r} at " + " <- ".join(
            f"{fr.filename.rsplit('/', 2)[-1]}:{fr.lineno}" for fr in traceback.extract_tb(exc.__traceback__)[::-1][:4])
print(json.dumps(info))

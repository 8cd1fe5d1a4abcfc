"""Log bytes per bound symbol (THUNDER_TRACE) vs log bytes per graph node (PyTorch's TORCH_TRACE).

The same model, nanoGPT (thunder.tests.nanogpt_model), N layers, forward + backward:
- THUNDER_TRACE on thunder.jit: bytes of the JSONL log / bound symbols in all logged traces;
- TORCH_TRACE on torch.compile (inductor): bytes of the log / aten nodes in the forward and
  backward graphs it logs (the anchor: what PyTorch users already accept).

    python bench/log_size.py [--layers 4]
"""

from __future__ import annotations

import json
import os
import re
import tempfile

import harness


def thunder_figures(layers: int) -> dict:
    with tempfile.TemporaryDirectory() as logs:
        env = {**os.environ, "THUNDER_TRACE": logs}
        harness.run_child("log_size_child.py", "thunder", layers, env=env, check=True)
        import provenance

        size, bsyms, final = 0, 0, 0
        for record in provenance.load(logs):
            if record.type == "trace" and "ops" in record.data:
                bsyms += len(record["ops"])
            if record.type == "compile_end":
                final = record["final"]["ops"]
        size = sum(os.path.getsize(os.path.join(logs, f)) for f in os.listdir(logs))
    return {"bytes": size, "bound_symbols_logged": bsyms, "final_ops": final}


def torch_figures(layers: int) -> dict:
    with tempfile.TemporaryDirectory() as logs:
        env = {**os.environ, "TORCH_TRACE": logs}
        harness.run_child("log_size_child.py", "torch", layers, env=env, check=True)
        size, nodes, graph = 0, 0, None
        for name in os.listdir(logs):
            path = os.path.join(logs, name)
            size += os.path.getsize(path)
            with open(path, errors="replace") as f:
                for line in f:
                    if not line.startswith("\t"):  # a glog header line with the record's JSON
                        match = re.search(r"(\{.*\})\s*$", line)
                        keys = json.loads(match.group(1)).keys() if match else ()
                        graph = next((k for k in keys if k in ("aot_forward_graph", "aot_backward_graph")), None)
                    elif graph and "torch.ops.aten." in line:
                        nodes += 1
    return {"bytes": size, "aten_nodes_logged": nodes}


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    ours = thunder_figures(args.layers)
    anchor = torch_figures(args.layers)
    print(f"nanoGPT {args.layers} layers fwd+bwd")
    print(f"THUNDER_TRACE: {ours['bytes'] / 1e6:.2f} MB, {ours['bound_symbols_logged']} bound symbols in the logged "
          f"traces ({ours['final_ops']} in the final fwd+bwd): {ours['bytes'] / ours['bound_symbols_logged']:.0f} "
          f"B/bsym")
    print(f"TORCH_TRACE (torch.compile, inductor): {anchor['bytes'] / 1e6:.2f} MB, {anchor['aten_nodes_logged']} aten "
          f"nodes in the fwd/bwd graphs: {anchor['bytes'] / max(anchor['aten_nodes_logged'], 1):.0f} B/node")


if __name__ == "__main__":
    main()

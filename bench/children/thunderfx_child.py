"""thunderfx.py's fresh process: a warm-up compile, then one timed, capture on or off.

    python bench/children/thunderfx_child.py on|off LAYERS THREADS   (prints thunderfx._compile_once's result)
"""

import json
import sys
import warnings
from pathlib import Path

import torch

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import thunderfx  # noqa: E402  (bench/ on the path first)

torch.set_num_threads(int(sys.argv[3]))
thunderfx.join_frame_threads()
if sys.argv[1] == "on":
    import provenance

    provenance.enable()
layers = int(sys.argv[2])
thunderfx._compile_once(layers)  # warm-up
print(json.dumps(thunderfx._compile_once(layers)))

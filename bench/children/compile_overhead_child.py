"""compile_overhead.py's fresh process: one compile, with the package imported (but not enabled) or not.

    python bench/children/compile_overhead_child.py imported|plain LAYERS   (prints [wall, cpu, bound symbols])
"""

import json
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
if sys.argv[1] == "imported":
    import provenance  # noqa: F401  (imported is what is measured)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compile_overhead import compile_once  # noqa: E402  (bench/ on the path first)

print(json.dumps(compile_once(int(sys.argv[2]))))

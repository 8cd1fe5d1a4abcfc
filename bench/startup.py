"""Interpreter start-up with thunder-provenance installed (THUNDER_TRACE unset) vs not installed.

"Installed" differs from "not installed" only by the `thunder_provenance.pth` line site runs at
start-up; "not installed" hides that file for its runs. Runs alternate, N each; medians.

    python bench/startup.py [--runs 40]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import sysconfig
import time

import harness


def run_once() -> float:
    env = {k: v for k, v in os.environ.items() if k != "THUNDER_TRACE"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    pth = os.path.join(sysconfig.get_paths()["purelib"], "thunder_provenance.pth")
    hidden = pth + ".hidden"
    if not os.path.exists(pth):
        sys.exit(f"{pth} not found: install the package first")
    installed, absent = [], []
    try:
        for i in range(args.runs):  # alternate which goes first: order effects cancel out
            if i % 2:
                installed.append(run_once())
            os.rename(pth, hidden)
            absent.append(run_once())
            os.rename(hidden, pth)
            if not i % 2:
                installed.append(run_once())
    finally:
        if os.path.exists(hidden):
            os.rename(hidden, pth)
    a, b = statistics.median(installed), statistics.median(absent)
    ratios = statistics.median(x / y for x, y in zip(installed, absent))
    print(f"python -c pass, {args.runs} runs each, alternating: installed {a * 1e3:.1f} ms, "
          f"not installed {b * 1e3:.1f} ms, median paired ratio {ratios:.3f}")


if __name__ == "__main__":
    main()

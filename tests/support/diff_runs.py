"""Several runs of tests/support/diff_program.py in one process, each logged to a directory of its own
(provenance.enable / disable around a fresh thunder.jit of the program), for the diff's noise test:
comparing the wall times of separate processes tests the machine, not the diff (bench/diff_noise.py
measures that). Run as `python diff_runs.py ROOT ACT [ACT ...]`: run k goes to ROOT/run<k>, with that
activation (gelu, relu, gelu2)."""

import sys
from pathlib import Path

import diff_program

import provenance

PROFILED = 24  # as diff_logs.py's: a per-call spread to judge noise by


def main(root: Path, acts: list[str]) -> None:
    for k, act in enumerate(acts):
        diff_program.ACT = act  # read at trace time: the line the run compiles
        provenance.enable(root / f"run{k}", profile=PROFILED)
        try:
            diff_program.main()
        finally:
            provenance.disable()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])

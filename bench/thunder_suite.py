"""Thunder's own tests, untraced and under THUNDER_TRACE: the same outcome for every test, no warning of
ours, and logs that `thunder-trace report --strict` reads clean. The best check that our hooks change
nothing in the programs Thunder itself tests (its symbolic-values compiles, its transforms, its grads).

Thunder's tests ship in its wheel (thunder/tests/); their conftest needs the `bench` extra's
pytest-benchmark, hypothesis, expecttest, einops and fdm (`pip install -e '.[bench]' -c constraints.txt`).

    python bench/thunder_suite.py [--files test_jit_general test_transforms test_grad] [-k EXPR] [--out DIR]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import harness
import thunder

TESTS = Path(thunder.__file__).parent / "tests"
FILES = ("test_jit_general", "test_transforms", "test_grad")
OURS = re.compile(r"thunder-provenance: .*")


def outcomes(junit: Path) -> dict[str, str]:
    """test id -> passed | failed | error | skipped, from pytest's JUnit XML."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        found[f"{case.get('classname')}::{case.get('name')}"] = kind
    return found


def run(file: str, out: Path, select: str | None, traced: bool) -> tuple[dict[str, str], list[str], float]:
    """One run of a test file: its outcomes, our warnings in its output, its seconds."""
    junit = out / f"{file}.{'traced' if traced else 'plain'}.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "TORCH_TRACE")}
    if traced:
        env["THUNDER_TRACE"] = str(out / "logs" / file)
    command = [sys.executable, "-m", "pytest", str(TESTS / f"{file}.py"), "-q", "-p", "no:cacheprovider",
               "-W", "always::RuntimeWarning", f"--junitxml={junit}", *(["-k", select] if select else [])]
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=out)
    return outcomes(junit), OURS.findall(done.stdout + done.stderr), time.perf_counter() - began


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--files", nargs="+", default=list(FILES))
    parser.add_argument("-k", dest="select", default=None, help="pytest's -k, for every file")
    parser.add_argument("--out", type=Path, default=None, help="where the logs and reports go (a temp dir)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="thunder-suite-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for file in args.files:
        plain, _, plain_s = run(file, out, args.select, traced=False)
        traced, warned, traced_s = run(file, out, args.select, traced=True)
        differ = sorted(t for t in plain.keys() | traced.keys() if plain.get(t) != traced.get(t))
        logs = out / "logs" / file
        report = subprocess.run([sys.executable, "-m", "provenance", "report", str(logs), "-o",
                                 str(out / f"report-{file}"), "--strict", "--no-browser"],
                                capture_output=True, text=True) if logs.is_dir() else None
        counts = {k: sum(1 for v in plain.values() if v == k) for k in ("passed", "failed", "error", "skipped")}
        rows.append((file, len(plain), " ".join(f"{v} {k}" for k, v in counts.items() if v), len(differ),
                     len(warned), "no log" if report is None else report.returncode,
                     f"{plain_s:.0f} / {traced_s:.0f}"))
        for test in differ[:20]:
            print(f"{file}: {test}: untraced {plain.get(test)}, traced {traced.get(test)}", file=sys.stderr)
        for line in sorted(set(warned))[:10]:
            print(f"{file}: {line}", file=sys.stderr)
        if report is not None and report.returncode:
            print(f"{file}: report --strict: {report.stderr.strip()[-2000:]}", file=sys.stderr)
    print(harness.markdown(("file", "tests", "untraced", "outcome differs", "our warnings", "report --strict exit",
                            "seconds untraced / traced"), rows))
    print(f"logs and reports: {out}")


if __name__ == "__main__":
    main()

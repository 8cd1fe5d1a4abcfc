"""Cost of the opt-in wait counters on the hot path: one collective wait, counted vs not.

Calls the torch executor's `torch_wait_prim_impl` as generated code does, on an already
completed handle (so only the overhead is timed), with wait counters installed and not. With
`--log`, tracing also writes a log (to a temporary directory), so the watchdog that writes long
waits to it runs meanwhile (provenance.timing.waits.WaitWatch): the hot path is the same code.

    python bench/wait_counters.py [--calls 200000] [--log]
"""

from __future__ import annotations

import statistics
import tempfile
import time
import warnings

import harness

warnings.filterwarnings("ignore")


class _Done:
    def wait(self) -> bool:
        return True


def per_call_ns(fn, calls: int) -> float:
    arg = (_Done(), None)
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn(arg)
    return (time.perf_counter_ns() - start) / calls


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--log", action="store_true", help="write a log too: the long-wait watchdog runs")
    args = parser.parse_args()
    import provenance
    from provenance.thunder.wait_hooks import WAIT_SYMBOL, call_ctx

    plain_fn = call_ctx()[WAIT_SYMBOL]
    provenance.enable(tempfile.mkdtemp(prefix="wait_counters.") if args.log else None, wait_counters=True)
    counted_fn = call_ctx()[WAIT_SYMBOL]
    assert counted_fn is not plain_fn
    plain, counted = [], []
    for _ in range(7):
        plain.append(per_call_ns(plain_fn, args.calls))
        counted.append(per_call_ns(counted_fn, args.calls))
    p, c = statistics.median(plain), statistics.median(counted)
    print(f"torch_wait_prim_impl on a completed handle: plain {p:.0f} ns, counted {c:.0f} ns per call "
          f"(+{c - p:.0f} ns per wait){', with a log (the watchdog running)' if args.log else ''}")
    provenance.disable()


if __name__ == "__main__":
    main()

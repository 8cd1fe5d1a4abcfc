"""`thunder-trace report`'s worker processes (issues 13, 25): the default count; forked workers
that read the logs themselves, each compile built by the first process to reach it, byte for
byte what -j 1 writes; a worker killed, hung or failing costs its compiles a rebuild in the main
process, never a traceback (issue 22).

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import report_logs
from paths import report_files

from provenance.cli import main
from provenance.report import jobs, workers
from provenance.report.analyze.pending import IsolatedCompile


def report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


MB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("size", "cpus", "count"), [
    (MB // 2, 8, 1),  # a small input: one process
    (100 * MB, 1, 1),  # one CPU
    (100 * MB, 2, 2),  # 2 CPUs, busy or not: each process gets its share of them
    (100 * MB, 16, jobs.MAX_AUTO_JOBS),
    (3 * MB, 16, 3),  # one process per MB
])
def test_default_process_count(size, cpus, count):
    assert jobs.auto_jobs(size, cpus) == count


def test_default_process_count_reads_the_affinity(monkeypatch):
    monkeypatch.setattr(jobs.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert jobs.auto_jobs(100 * MB) == 1  # pinned to one CPU of 64
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert jobs.auto_jobs(100 * MB) == jobs.MAX_AUTO_JOBS


def _log(tmp_path: Path, n: int = 5) -> Path:
    """One process, `n` compiles (every fourth and fifth failed)."""
    items = report_logs.records()
    calls = items.pop()
    for compile_id in range(2, n + 1):
        more = report_logs.records(compile_id=compile_id, error={} if compile_id % 5 > 3 else None)
        items += [r for r in more if r["type"] in ("compile_start", "trace", "compile_end", "compile_error")]
    calls["compiles"] = list(range(1, n + 1))
    return report_logs.write(tmp_path / "log.jsonl", [*items, calls])


def _same(one: Path, two: Path) -> list[Path]:
    files = report_files(one)
    assert files == report_files(two)
    for f in files:
        assert (one / f).read_bytes() == (two / f).read_bytes(), f
    return files


KILL = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"  # as the OOM killer would
HANG = "import time; time.sleep(3600)"
FAIL = "raise RuntimeError('out of luck')"
# its next result stops after a part of its length (the rest would say 16 bytes follow)
MIDWAY = ("import os, time; from provenance.report import workers; "
          "workers._send = lambda fd, value: (os.write(fd, bytes([16, 0, 0])), time.sleep(3600))")


@pytest.mark.parametrize("how", [KILL, HANG, MIDWAY, FAIL], ids=["killed", "hung", "hung midway", "failed"])
def test_a_worker_killed_hung_or_failing_costs_its_compiles_a_rebuild_here(tmp_path, capsys, monkeypatch, how):
    """A worker SIGKILLed as it begins its second compile, one that stops answering (past
    HUNG_S) before a result or in the middle of one, or one that fails: the workers are stopped,
    every compile not delivered is built in the main process, one warning line says why, and the
    report is byte for byte the one -j 1 writes."""
    log = _log(tmp_path, 24)
    code, err = report(capsys, log, "-o", tmp_path / "one", "-j", "1")
    assert code == 0, err
    real, shares = workers.WorkerShare.begin, []

    def begin(self, make, deliver):  # runs in the (forked) worker
        compile_ = real(self, make, deliver)
        self.mine = getattr(self, "mine", 0) + isinstance(compile_, IsolatedCompile)
        if self.mine == 2:
            exec(how)
        return compile_

    def close(self):
        shares.append(self)
        real_close(self)

    real_close = workers.MainShare.close
    monkeypatch.setattr(workers.WorkerShare, "begin", begin)
    monkeypatch.setattr(workers.MainShare, "close", close)
    monkeypatch.setattr(workers, "HUNG_S", 3.0)
    monkeypatch.setattr(workers.Claims, "claim", lambda self, ordinal, process: ordinal % 3)  # every worker gets some
    code, err = report(capsys, log, "-o", tmp_path / "two", "-j", "3")
    assert code == 0 and "Traceback" not in err, err
    assert "worker processes were stopped" in err and "the report is complete" in err, err
    why = {KILL: "(one died, killed by SIGKILL)", HANG: "(hung: no compile delivered in 3 s)",
           MIDWAY: "(hung: no compile delivered in 3 s)", FAIL: "(one failed: RuntimeError: out of luck)"}[how]
    assert why in err, err
    assert len([line for line in err.splitlines() if "warning" in line]) == 1
    assert shares[0].rebuilt >= 1
    pages = [f for f in _same(tmp_path / "one", tmp_path / "two") if f.parts[0] == "compiles"]
    assert len(pages) >= 24
    assert all(p.exitcode is not None for p in shares[0].workers)  # none left behind
    assert not list((tmp_path / "two").rglob("*.tmp"))


def test_each_compile_is_built_once_by_the_first_process_to_reach_it(tmp_path, capsys, monkeypatch):
    """-j 3: two forked workers; each compile is claimed by one process (the first to reach it:
    which one, the scheduler decides), and every process agrees on who; the main process keeps
    the records of at most MAX_AHEAD compiles per worker waiting; every worker is gone after the
    report, which is byte for byte the one -j 1 writes."""
    log = _log(tmp_path, 24)
    report(capsys, log, "-o", tmp_path / "one", "-j", "1")
    claimed, waiting, shares = tmp_path / "claimed", [], []
    claimed.mkdir()
    real_claim, real_wait, real_close = workers.Claims.claim, workers.MainShare.wait_for, workers.MainShare.close

    def claim(self, ordinal, process):  # in every process: what it was told, in a file of its own
        owner = real_claim(self, ordinal, process)
        (claimed / f"{os.getpid()}-{ordinal}-{owner}-{process}").touch()
        return owner

    def wait_for(self, compile_):
        real_wait(self, compile_)
        waiting.append(self._waiting)

    def close(self):
        shares.append(self)
        real_close(self)

    monkeypatch.setattr(workers.Claims, "claim", claim)
    monkeypatch.setattr(workers.MainShare, "wait_for", wait_for)
    monkeypatch.setattr(workers.MainShare, "close", close)
    code, err = report(capsys, log, "-o", tmp_path / "three", "-j", "3")
    assert code == 0 and "(built by 3 worker processes)" in err and "warning" not in err, err
    assert shares[0].rebuilt == 0
    told: dict[int, dict[int, int]] = {}  # ordinal -> pid -> owner
    number: dict[int, int] = {}  # pid -> process number
    for name in os.listdir(claimed):
        pid, ordinal, owner, process = map(int, name.split("-"))
        told.setdefault(ordinal, {})[pid] = owner
        number[pid] = process
    # every compile claimed, by a process that was told it was its own, and no process told otherwise
    # (a worker the scheduler kept back may claim none before the main process is done and stops it)
    assert sorted(told) == list(range(24)) and 0 in number.values() and set(number.values()) <= {0, 1, 2}
    assert all(len(set(by_pid.values())) == 1 for by_pid in told.values()), told
    assert all(any(number[pid] == owner for pid, owner in by_pid.items()) for by_pid in told.values()), told
    assert waiting and max(waiting) <= workers.MAX_AHEAD * 2
    assert all(p.exitcode is not None for p in shares[0].workers)
    _same(tmp_path / "one", tmp_path / "three")


def test_a_worker_passes_over_only_lines_that_cannot_read_otherwise(tmp_path, capsys, monkeypatch):
    """A worker parses no trace or memory record of a compile another process builds (it lists no
    problem), unless the line could parse to another type, compile or list than its start says: a
    repeated "compile" key (the last wins: a compile begun by that record), a "type" spelled with
    a \\u escape (a prov record), a repeated "list" (a prologue, which recompiles diff against).
    The report is the one -j 1 writes either way."""
    log = _log(tmp_path, 12)
    lines = log.read_bytes().splitlines(keepends=True)
    tails = {b'"compile":3,': b',"compile":40}\n', b'"compile":5,': b',"\\u0074ype":"prov","id":999}\n',
             b'"compile":7,': b',"list":"prologue"}\n'}
    for n, line in enumerate(lines):
        for compile_, tail in tails.items():
            if line.startswith(b'{"type":"trace",' + compile_ + b'"list":"computation","index":1'):
                lines[n] = line.rstrip(b"}\n") + tail
    log.write_bytes(b"".join(lines))
    code, err = report(capsys, log, "-o", tmp_path / "one", "-j", "1")
    assert code == 0, err
    seen = tmp_path / "seen"
    seen.mkdir()
    real = workers.WorkerShare.skipper

    def skipper(open_compiles):  # in the worker: each line it passed over, and each it parsed of the crafted ones
        skip = real(open_compiles)

        def recorded(raw):
            passed = skip(raw)
            if passed or raw.endswith(tuple(tails.values())):
                (seen / f"{'skipped' if passed else 'parsed'}-{len(list(seen.iterdir()))}").write_bytes(raw)
            return passed
        return recorded

    monkeypatch.setattr(workers.WorkerShare, "skipper", staticmethod(skipper))
    monkeypatch.setattr(workers.Claims, "claim", lambda self, ordinal, process: ordinal % 2)  # the worker: odd ones
    code, err = report(capsys, log, "-o", tmp_path / "two", "-j", "2")
    assert code == 0 and "worker processes were stopped" not in err and "compile 40 without" in err, err
    _same(tmp_path / "one", tmp_path / "two")
    skipped = [f.read_bytes() for f in seen.glob("skipped-*")]
    parsed = [f.read_bytes() for f in seen.glob("parsed-*")]
    assert skipped and all(b'"list":"prologue"' not in line[:80] for line in skipped)
    assert sorted(next(t for t in tails.values() if line.endswith(t)) for line in parsed) == sorted(tails.values())


def test_the_last_line_says_how_many_processes_read_the_logs(tmp_path, capsys, monkeypatch):
    """-j N says the processes that ran: at most Claims.MAX_PROCESSES, and one (nothing said)
    where fork is not available; the report is -j 1's either way."""
    log = _log(tmp_path, 6)
    report(capsys, log, "-o", tmp_path / "one", "-j", "1")
    monkeypatch.setattr(workers.Claims, "MAX_PROCESSES", 3)
    code, err = report(capsys, log, "-o", tmp_path / "capped", "-j", "40")
    assert code == 0 and "(built by 3 worker processes)" in err, err
    monkeypatch.setattr(workers, "can_fork", lambda: False)
    code, err = report(capsys, log, "-o", tmp_path / "unforked", "-j", "4")
    assert code == 0 and "processes" not in err, err
    _same(tmp_path / "one", tmp_path / "capped")
    _same(tmp_path / "one", tmp_path / "unforked")


def test_a_compile_is_claimed_by_the_first_process_to_reach_it(tmp_path):
    """Claims: the first claim of a compile wins; every later one, by any process, is told the
    winner; a claim made in a forked process is seen by its parent."""
    claims = workers.Claims(tmp_path)
    assert claims.claim(0, 0) == 0 and claims.claim(0, 1) == 0 and claims.claim(0, 0) == 0
    assert claims.claim(5, 2) == 2 and claims.claim(5, 0) == 2 and claims.claim(3, 1) == 1
    pid = os.fork()
    if pid == 0:  # a worker: claims 7, and 0 (taken already: it exits 0 only if told so)
        code = 1
        try:
            code = 0 if claims.claim(7, 1) == 1 and claims.claim(0, 1) == 0 else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert claims.claim(7, 0) == 1 and claims.claim(8, 0) == 0
    assert claims.claim(254, workers.Claims.MAX_PROCESSES - 1) == workers.Claims.MAX_PROCESSES - 1
    claims.close()
    assert not list(tmp_path.iterdir())  # nothing left in OUT


_SLOW_REPORT = """
import sys, time
from provenance.report import workers
from provenance.cli import main
real = workers.Claims.claim
def claim(self, ordinal, process):
    time.sleep(0.05)
    return real(self, ordinal, process)
workers.Claims.claim = claim
main(["report", sys.argv[1], "-o", sys.argv[2], "--no-browser", "-j", "2"])
"""


def _state(pid: int) -> str | None:
    """A process's state (R, S, Z, ...), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_worker_stops_when_the_main_process_is_killed(tmp_path):
    """SIGKILL the main process mid-report (no cleanup runs): its worker notices at its next
    compile and exits, instead of building the rest of the run for nobody."""
    log = _log(tmp_path, 200)
    main_process = subprocess.Popen([sys.executable, "-c", _SLOW_REPORT, str(log), str(tmp_path / "out")],
                                    stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline, worker = time.monotonic() + 60, None
    while worker is None and time.monotonic() < deadline and main_process.poll() is None:
        children = Path(f"/proc/{main_process.pid}/task/{main_process.pid}/children")
        found = children.read_text().split() if children.exists() else []
        worker = int(found[0]) if found else None
        time.sleep(0.02)
    assert worker is not None, main_process.stderr.read() if main_process.poll() is not None else "no worker"
    time.sleep(0.3)  # it has begun compiles
    assert _state(worker) not in (None, "Z")
    main_process.kill()
    main_process.wait()
    deadline = time.monotonic() + 20
    while _state(worker) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(worker) in (None, "Z")  # gone (or a zombie no one reaps: it runs no more)


def test_the_read_ahead_scan_reads_in_chunks_and_finds_the_same(tmp_path, monkeypatch):
    """`read_ahead.scan` reads a log in chunks cut at newlines (its memory does not follow the file):
    chunks smaller than a line, or cutting anywhere, find the same profiles and name the same lines."""
    from provenance.report.analyze.handlers import read_ahead as scan
    from provenance.report.read import read_ahead

    items = report_logs.records()
    calls = items.pop()
    bad = {"type": "profile_call", "compile": 1, "trace": "forward", "call": 9, "ns": "x"}
    good = report_logs.profile()
    items += [*good[:3], bad, b"garbage\n", *good[3:], calls, {**bad, "compile": 7}]
    log = report_logs.write(tmp_path / "log.jsonl", items)
    log.write_bytes(log.read_bytes() + b'{"type": "profile_ops", "compile": 1')  # a truncated last line
    whole, profiles = scan(log)
    assert whole.records == len(good) + 2 and len(whole.problems) == 2 and profiles[1].calls == 2
    lines = log.read_bytes().split(b"\n")
    assert [b'"call":9' in lines[n - 1] and b'"ns":"x"' in lines[n - 1] for n, _ in whole.problems] == [True, True]
    for chunk in (7, 64, 1000, 4096):
        monkeypatch.setattr(read_ahead, "CHUNK", chunk)
        assert scan(log) == (whole, profiles), chunk

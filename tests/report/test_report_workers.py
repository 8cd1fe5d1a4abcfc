"""`thunder-trace report`'s worker processes (issue 13): the default count, and compiles the main
process builds itself when the workers are busy, byte for byte what -j 1 writes; a worker killed
or hung costs its compiles a rebuild in the main process, never a traceback (issue 22).

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import report_logs

from provenance.report import jobs, workers
from provenance.report.cli import main


def report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


MB = 1 << 20


@pytest.mark.parametrize(("size", "cpus", "load", "count"), [
    (10 * MB, 8, 0.0, 1),  # small input: one process
    (100 * MB, 1, 0.0, 1),  # one CPU
    (100 * MB, 2, 0.0, 2),  # an idle 2-CPU machine
    (100 * MB, 2, 0.8, 1),  # another process busy: a worker would share a CPU with it
    (100 * MB, 2, 5.3, 1),  # an overloaded machine
    (100 * MB, 16, 0.0, jobs.MAX_AUTO_JOBS),
    (100 * MB, 16, 13.4, 3),  # 2.6 CPUs idle
    (40 * MB, 16, 0.0, 2),  # one worker per 16 MB
])
def test_default_worker_count(size, cpus, load, count):
    assert jobs.auto_jobs(size, cpus, load) == count


def test_default_worker_count_reads_the_affinity_and_the_load(monkeypatch):
    monkeypatch.setattr(jobs.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(jobs.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert jobs.auto_jobs(100 * MB) == 1  # pinned to one CPU of 64
    monkeypatch.setattr(jobs.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert jobs.auto_jobs(100 * MB) == 3
    monkeypatch.setattr(jobs.os, "getloadavg", lambda: (7.2, 7.0, 7.0))
    assert jobs.auto_jobs(100 * MB) == 1  # 8 CPUs, 7 busy


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
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(two) for p in two.rglob("*") if p.is_file())
    for f in files:
        assert (one / f).read_bytes() == (two / f).read_bytes(), f
    return files


class _Poison:
    """Unpickled in a worker (with the job it rides on), it kills that worker or hangs it."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


KILL = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"  # as the OOM killer would
HANG = "import time; time.sleep(3600)"


@pytest.mark.parametrize("how", [KILL, HANG], ids=["killed", "hung"])
def test_a_worker_killed_or_hung_costs_its_compiles_a_rebuild_here(tmp_path, capsys, monkeypatch, how):
    """A worker SIGKILLed while it holds a compile, or one that stops answering (past HUNG_S): the
    workers are stopped, every compile not delivered is built in the main process, one warning
    line says so, and the report is byte for byte the one -j 1 writes."""
    log = _log(tmp_path, 24)
    code, err = report(capsys, log, "-o", tmp_path / "one", "-j", "1")
    assert code == 0, err
    real, sent, pools = workers.Pool.submit, [], []

    def submit(self, job, deliver):
        sent.append(job)
        if len(sent) == 3:
            job.poison = _Poison(how)  # the third compile's worker
            pools.append(self)
        real(self, job, deliver)

    monkeypatch.setattr(workers.Pool, "submit", submit)
    monkeypatch.setattr(workers, "HUNG_S", 3.0)
    monkeypatch.setattr(workers.Pool, "_busy", lambda self: False)  # every compile to a worker while it can
    code, err = report(capsys, log, "-o", tmp_path / "two", "-j", "2")
    assert code == 0 and "Traceback" not in err, err
    assert "worker processes were stopped" in err and "the report is complete" in err, err
    assert ("(hung: no compile delivered in 3 s)" in err) == (how == HANG), err
    assert ("(one died, as if killed" in err) == (how == KILL), err
    assert len([line for line in err.splitlines() if "warning" in line]) == 1
    assert pools[0].rebuilt >= 1
    pages = [f for f in _same(tmp_path / "one", tmp_path / "two") if f.parts[0] == "compiles"]
    assert len(pages) >= 24
    assert all(p.exitcode is not None for p in pools[0]._workers())  # none left behind
    assert not list((tmp_path / "two").rglob("*.tmp"))


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

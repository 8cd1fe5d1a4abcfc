"""`thunder-trace report`'s worker processes (issue 13): the default count, and compiles the main
process builds itself when the workers are busy, byte for byte what -j 1 writes.

Hand-written logs (tests/support/report_logs.py), the command run in-process: no Thunder, no browser.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import report_logs

from provenance.report import workers
from provenance.report.cli import main


def report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


MB = 1 << 20


@pytest.mark.parametrize(("size", "cpus", "load", "jobs"), [
    (10 * MB, 8, 0.0, 1),  # small input: one process
    (100 * MB, 1, 0.0, 1),  # one CPU
    (100 * MB, 2, 0.0, 2),  # an idle 2-CPU machine
    (100 * MB, 2, 0.8, 1),  # another process busy: a worker would share a CPU with it
    (100 * MB, 2, 5.3, 1),  # an overloaded machine
    (100 * MB, 16, 0.0, workers.MAX_AUTO_JOBS),
    (100 * MB, 16, 13.4, 3),  # 2.6 CPUs idle
    (40 * MB, 16, 0.0, 2),  # one worker per 16 MB
])
def test_default_worker_count(size, cpus, load, jobs):
    assert workers.auto_jobs(size, cpus, load) == jobs


def test_default_worker_count_reads_the_affinity_and_the_load(monkeypatch):
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(workers.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert workers.auto_jobs(100 * MB) == 1  # pinned to one CPU of 64
    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert workers.auto_jobs(100 * MB) == 3
    monkeypatch.setattr(workers.os, "getloadavg", lambda: (7.2, 7.0, 7.0))
    assert workers.auto_jobs(100 * MB) == 1  # 8 CPUs, 7 busy


def _log(tmp_path: Path) -> Path:
    """One process, five compiles (the last two failed)."""
    items = report_logs.records()
    calls = items.pop()
    for compile_id in range(2, 6):
        more = report_logs.records(compile_id=compile_id, error={} if compile_id > 3 else None)
        items += [r for r in more if r["type"] in ("compile_start", "trace", "compile_end", "compile_error")]
    calls["compiles"] = [1, 2, 3, 4, 5]
    return report_logs.write(tmp_path / "log.jsonl", [*items, calls])


def test_compiles_built_here_when_the_workers_are_busy_are_the_same(tmp_path, capsys, monkeypatch):
    log = _log(tmp_path)
    code, err = report(capsys, log, "-o", tmp_path / "one", "-j", "1")
    assert code == 0, err
    asked = []

    def busy(self) -> bool:  # every other compile: built here
        asked.append(len(asked) % 2 == 0)
        return asked[-1]

    monkeypatch.setattr(workers.Pool, "_busy", busy)
    code, err = report(capsys, log, "-o", tmp_path / "two", "-j", "2")
    assert code == 0, err
    assert "(2 worker processes)" in err
    assert len(asked) == 5 and sum(asked) == 3
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two").rglob("*") if p.is_file())
    pages = [f for f in files if f.parts[0] == "compiles" and f.suffix == ".html"]
    assert len(pages) == 10  # a compile page and a source page each
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes(), f


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

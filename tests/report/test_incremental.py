"""Incremental reports (provenance/report/incremental.py): a report of logs that grew, were rewritten,
truncated or replaced, written into the OUT of an earlier report, is byte for byte a fresh build's;
two reports never write one OUT at once; OUT's state is read as untrusted input."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import real_log
import report_logs
from paths import ROOT

from provenance.cli import main
from provenance.report.incremental import STATE_DIR, OutLock, last_start


def report(capsys, *args: object) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


def tree(out: Path) -> dict[str, bytes]:
    """Every file of a report but its state, by path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and STATE_DIR not in p.relative_to(out).parts}


def assert_fresh(capsys, logs: Path, out: Path, tmp_path: Path, *flags: object) -> None:
    """`out` is what a fresh build of `logs` writes, file for file, byte for byte."""
    fresh = tmp_path / f"fresh{len(list(tmp_path.glob('fresh*')))}"
    assert report(capsys, logs, "-o", fresh, *flags)[0] == 0
    mine, theirs = tree(out), tree(fresh)
    assert sorted(mine) == sorted(theirs)
    assert [name for name in theirs if mine[name] != theirs[name]] == []


# A real program's log (ThunderFX included, which fails inside Thunder on torch 2.12): with the pinned
# stack's whole suite (the fast subset runs on the others: .ci/run)
REAL = pytest.mark.slow


@pytest.fixture(scope="module")
def real_lines(tmp_path_factory) -> list[bytes]:
    """A real log (Thunder: scopes, forward and backward, a recompile, a failed compile, ThunderFX)."""
    path = real_log.write(tmp_path_factory.mktemp("real") / "logs", profile=False)
    return path.read_bytes().splitlines(keepends=True)


@REAL
def test_a_growing_real_log_is_taken_up_and_is_a_fresh_build(real_lines, tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    log = logs / "a.jsonl"
    taken_up = 0
    for share in (0.35, 0.6, 0.6, 0.85, 1.0):
        n = int(len(real_lines) * share)
        # the writer mid-record: half a line at the end, finished by the next step
        log.write_bytes(b"".join(real_lines[:n]) + (real_lines[n][: len(real_lines[n]) // 2] if n < len(real_lines)
                                                    else b""))
        code, err = report(capsys, logs, "-o", out)
        assert code == 0, err
        taken_up += "taken up at byte" in err
        if share == 0.6 and "up to date" in err:
            assert "taken up" not in err
        assert_fresh(capsys, logs, out, tmp_path)
    assert taken_up >= 3  # every step after the first but the one where nothing changed
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "is up to date" in err


@REAL
def test_a_log_changed_before_its_kept_state_is_built_whole(real_lines, tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    log = logs / "a.jsonl"
    log.write_bytes(b"".join(real_lines))
    assert report(capsys, logs, "-o", out)[0] == 0
    data = bytearray(log.read_bytes())
    middle = data.index(b'"type":"trace"', len(data) // 4)
    data[middle + 20: middle + 21] = b"#"  # rewritten in place: the same size
    log.write_bytes(bytes(data))
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "built whole: no state was kept before the logs changed" in err
    assert_fresh(capsys, logs, out, tmp_path)
    log.write_bytes(bytes(data[: len(data) // 3]))  # truncated
    assert report(capsys, logs, "-o", out)[0] == 0
    assert_fresh(capsys, logs, out, tmp_path)
    report_logs.write(log, report_logs.records())  # replaced by another process's log
    assert report(capsys, logs, "-o", out)[0] == 0
    assert_fresh(capsys, logs, out, tmp_path)


def test_ranks_that_grow_and_desync_later_are_a_fresh_build(tmp_path, capsys):
    """Rank 1's second compile differs from rank 0's: the banner written into rank 0's page (kept
    before the state taken up) is written again from the page as it was, not over the old one."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    r0 = report_logs.records(rank=0)
    second = [dict(r, compile=2) for r in report_logs.records(rank=0)[1:-1] if "compile" in r]
    r0 = r0[:-1] + second + r0[-1:]
    r1 = [dict(r) for r in r0]
    r1[0] = dict(r1[0], rank=1)
    changed = next(i for i, r in enumerate(r1) if r.get("compile") == 2 and (r.get("list"), r.get("index")) == (
        "computation", 1))
    r1[changed] = orjson.loads(orjson.dumps(r1[changed]))
    r1[changed]["ops"][1][2] = "sub"  # rank 1's final forward trace of compile 2 runs another op
    half = next(i for i, r in enumerate(r1) if r.get("compile") == 2)
    report_logs.write(logs / "r0.jsonl", r0)
    report_logs.write(logs / "r1.jsonl", r1[:half])
    assert report(capsys, logs, "-o", out)[0] == 0
    assert "desync" not in (out / "distributed.html").read_text()
    report_logs.write(logs / "r1.jsonl", r1)
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "taken up" in err
    assert "differs" in (out / "distributed.html").read_text()
    assert_fresh(capsys, logs, out, tmp_path)
    report_logs.write(logs / "r1.jsonl", r1 + r1[half:-1])  # and more (compile 2 again: a recompile)
    assert report(capsys, logs, "-o", out)[0] == 0
    assert_fresh(capsys, logs, out, tmp_path)


def test_profile_records_of_earlier_compiles_are_not_taken_up(tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    records = report_logs.profiled()
    start = next(i for i, r in enumerate(records) if r["type"] == "profile_ops")
    report_logs.write(logs / "a.jsonl", records[:start])
    assert report(capsys, logs, "-o", out)[0] == 0
    report_logs.write(logs / "a.jsonl", records)  # the compile's profile comes after its pages
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "taken up" not in err and "built whole" in err
    assert_fresh(capsys, logs, out, tmp_path)


def test_a_report_holding_out_makes_the_other_refuse_and_write_nothing(tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    assert report(capsys, logs, "-o", out)[0] == 0
    before = tree(out)
    held = OutLock(out)  # what a report holds while it writes
    try:
        for flags in ((), ("--overwrite",)):
            code, err = report(capsys, logs, "-o", out, *flags)
            assert code == 2 and f"another thunder-trace report (pid {os.getpid()}) is writing" in err
            assert tree(out) == before
    finally:
        held.release()
    report_logs.write(logs / "a.jsonl", report_logs.records(fn="other.fn"))
    assert report(capsys, logs, "-o", out)[0] == 0  # free again


@REAL
def test_two_reports_started_at_once_one_wins_nothing_mixed(real_lines, tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(b"".join(real_lines) * 1)
    command = [sys.executable, "-m", "provenance", "report", str(logs), "-o", str(out), "--no-browser", "-j", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [(run.wait(timeout=300), run.stderr.read()) for run in runs]
    codes = sorted(code for code, _ in results)
    refused = [err for code, err in results if code == 2]
    # one wins; the other says so, or (on a machine that ran them one after the other) found it up to date
    assert codes in ([0, 2], [0, 0]), results
    assert all("another thunder-trace report" in err for err in refused)
    if codes == [0, 0]:
        assert any("up to date" in err for _, err in results)
    assert_fresh(capsys, logs, out, tmp_path)


def test_out_state_is_untrusted_input(tmp_path, capsys):
    """A state that names a callable is refused before anything runs; paths in it never reach out of OUT."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    records = report_logs.records()
    report_logs.write(logs / "a.jsonl", records[:-3])
    assert report(capsys, logs, "-o", out)[0] == 0
    state = out / STATE_DIR
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for pickled in state.glob("log-*.pickle"):
        pickled.write_bytes(pickle.dumps({"run": Payload()}))
    kept = orjson.loads((state / "state.json").read_bytes())
    outside = tmp_path / "outside.html"
    outside.write_text("mine")
    kept["pristine"] = ["../outside.html", "/etc/passwd"]
    (state / "state.json").write_bytes(orjson.dumps(kept))
    report_logs.write(logs / "a.jsonl", records)
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "built whole" in err
    assert not marker.exists() and outside.read_text() == "mine"
    assert_fresh(capsys, logs, out, tmp_path)
    (state / "state.json").write_bytes(b"\x00garbage")  # unreadable: OUT is not known to be these logs'
    code, err = report(capsys, logs, "-o", out)
    assert code == 2 and "--overwrite" in err


def test_last_start_is_the_last_compile_no_other_compile_is_open_around(tmp_path):
    records = report_logs.records()
    lines = [orjson.dumps(r) + b"\n" for r in records]
    starts = [sum(map(len, lines[:i])) for i, r in enumerate(records) if r["type"] == "compile_start"]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(lines))
    assert last_start(path, path.stat().st_size) == starts[-1]
    # a compile begun before the last start that ends after it: the last start is no place to resume
    nested = records[:1] + [dict(records[i], compile=9) for i, r in enumerate(records) if r["type"] == "compile_start"]
    nested += records[1:] + [{"type": "compile_end", "compile": 9, "time_ns": 1}]
    lines = [orjson.dumps(r) + b"\n" for r in nested]
    path.write_bytes(b"".join(lines))
    found = last_start(path, path.stat().st_size)
    assert found == len(lines[0])  # compile 9's start: before it, nothing is open


def test_a_run_of_many_logs_keeps_state_in_a_bounded_number_of_them(tmp_path, capsys):
    from provenance.report.incremental import MAX_KEPT_LOGS

    logs, out = tmp_path / "logs", tmp_path / "out"
    count = MAX_KEPT_LOGS + 3
    for rank in range(count):
        report_logs.write(logs / f"r{rank:02}.jsonl", report_logs.records(rank=rank)[:-1])
    assert report(capsys, logs, "-o", out)[0] == 0
    kept = sorted(p.name for p in (out / STATE_DIR).glob("log-*.pickle"))
    assert kept == sorted([f"log-{i}.pickle" for i in range(MAX_KEPT_LOGS)] + [f"log-{count - 1}.pickle"])
    for rank in (count - 2, count - 1):  # a log without state, then the last: each ends, in turn
        report_logs.write(logs / f"r{rank:02}.jsonl", report_logs.records(rank=rank))
        code, err = report(capsys, logs, "-o", out)
        assert code == 0 and "taken up" in err, err
        assert_fresh(capsys, logs, out, tmp_path)


def test_a_report_that_did_not_end_is_built_whole_without_overwrite(tmp_path, capsys, monkeypatch):
    from provenance.report.analyze.run import RunBuilder

    logs, out = tmp_path / "logs", tmp_path / "out"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    assert report(capsys, logs, "-o", out)[0] == 0
    report_logs.write(logs / "a.jsonl", report_logs.records() + report_logs.records(compile_id=2)[1:])

    def stopped(self, files):  # the report is stopped after the pass, before the run's pages
        raise KeyboardInterrupt

    monkeypatch.setattr(RunBuilder, "model", stopped)
    with pytest.raises(KeyboardInterrupt):
        report(capsys, logs, "-o", out)
    monkeypatch.undo()
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "built whole: the report there did not end" in err
    assert_fresh(capsys, logs, out, tmp_path)


def test_a_report_written_again_never_lacks_a_page_nor_shows_half_of_one(tmp_path, capsys, monkeypatch):
    """A page open in a browser (a live report's reload) finds, at every moment of a rebuild over an
    earlier report (taken up, built whole, or a compile gone), every file that report had, and each
    page whole; what the new report no longer has is gone at its end."""
    import provenance.report.render.files as files

    logs, out = tmp_path / "logs", tmp_path / "out"
    two = report_logs.records() + report_logs.records(compile_id=2)[1:]
    report_logs.write(logs / "r0.jsonl", two[:-1])
    assert report(capsys, logs, "-o", out)[0] == 0
    replace, seen = os.replace, []

    def checked(src, dst):  # each file of the report written, at the moment it is put in place
        for name in () if STATE_DIR in Path(dst).parts else before:
            page = out / name
            assert page.is_file(), f"{name} is missing while {dst} is written"
            if name.endswith(".html"):
                assert page.read_bytes().rstrip().endswith(b"</html>"), f"{name} is half written"
        seen.append(dst)
        replace(src, dst)

    steps = [("taken up", lambda: report_logs.write(logs / "r0.jsonl", two)),
             # compile 2 gone, another in its place: its pages deleted at the end
             ("taken up", lambda: report_logs.write(logs / "r0.jsonl", report_logs.records()
                                                    + report_logs.records(compile_id=3)[1:])),
             ("built whole", lambda: report_logs.write(logs / "q.jsonl", report_logs.records(rank=1))),  # before r0
             ("built whole", lambda: (logs / "q.jsonl").unlink())]
    for said, step in steps:
        before = tree(out)
        step()
        monkeypatch.setattr(files.os, "replace", checked)
        code, err = report(capsys, logs, "-o", out)
        monkeypatch.undo()
        assert code == 0 and said in err, err
        assert any(str(d).endswith("index.html") for d in seen)
        assert_fresh(capsys, logs, out, tmp_path)

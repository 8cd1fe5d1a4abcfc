"""Incremental reports (provenance/report/incremental.py): a report of logs that grew, were rewritten,
truncated or replaced, written into the OUT of an earlier report, is byte for byte a fresh build's;
two reports never write one OUT at once; OUT's state is read as untrusted input."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
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
    return code, capsys.readouterr().err if capsys is not None else ""


def tree(out: Path) -> dict[str, bytes]:
    """Every file of a report but its state, by path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and STATE_DIR not in p.relative_to(out).parts}


def assert_fresh(capsys, logs: Path, out: Path, tmp_path: Path, *flags: object) -> None:
    """`out` is what a fresh build of `logs` (and `flags`: a TORCH_TRACE directory) writes, byte for byte."""
    fresh = tmp_path / f"fresh{len(list(tmp_path.glob('fresh*')))}"
    assert report(capsys, logs, *flags, "-o", fresh)[0] == 0
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
        taken_up += "1 of 1 log taken up" in err
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


def test_a_profiled_log_is_taken_up_and_a_late_profile_reads_its_log_whole(tmp_path, capsys):
    """The last compile's profile records come after its end: the log is taken up at that compile's start.
    Profile records of a compile before the kept state (a compile id profiled late) change a page the state
    holds: that log is read whole, and says so."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    records = report_logs.profiled()
    start = next(i for i, r in enumerate(records) if r["type"] == "profile_ops")
    report_logs.write(logs / "a.jsonl", records[:start])
    assert report(capsys, logs, "-o", out)[0] == 0
    report_logs.write(logs / "a.jsonl", records)  # the compile's profile comes after its pages
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "1 of 1 log taken up" in err, err
    assert_fresh(capsys, logs, out, tmp_path)
    second = [r for r in report_logs.records(compile_id=2)[1:-1]]
    late = report_logs.profile(compile_id=1, calls=3)[-2:]  # compile 1's third call, after compile 2 began
    report_logs.write(logs / "a.jsonl", records[:-1] + second + records[-1:])
    assert report(capsys, logs, "-o", out)[0] == 0
    report_logs.write(logs / "a.jsonl", records[:-1] + second + late + records[-1:])
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "a.jsonl is read whole: profile records of a compile before its kept state" in err, err
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


def _forge(out: Path, state: dict) -> None:
    """state.json rewritten as the user's own thunder-trace would write it (the key outside OUT): what
    only this user's own processes can do."""
    from provenance.report.incremental import _key, _mac, key_path

    data = orjson.dumps(state)
    (out / STATE_DIR / "state.json").write_bytes(data)
    (out / STATE_DIR / "state.mac").write_text(_mac(_key(key_path()), out, data))


def test_out_state_is_data_not_trust(tmp_path, capsys):
    """Whatever bytes OUT's state holds, written by anyone, at worst make the report read a log whole (or
    build whole) and say why: never run code, read a file the command line did not name, allocate without
    bound, or report less than the logs hold."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    records = report_logs.records() + report_logs.records(compile_id=2)[1:]
    report_logs.write(logs / "a.jsonl", records[:-3])
    assert report(capsys, logs, "-o", out)[0] == 0
    state = out / STATE_DIR
    marker, secret = tmp_path / "ran", tmp_path / "secret.jsonl"
    report_logs.write(secret, report_logs.records(fn="secret.Thing"))

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    def tamper(what: str) -> None:
        for pickled in state.glob("log-0.*.pickle"):  # its start's and its end's
            if what == "a pickle that runs code":
                pickled.write_bytes(pickle.dumps({"part": Payload()}))
            elif what == "a pickle of 30 bytes that asks for 625 MB":
                pickled.write_bytes(pickle.dumps(bytearray(1)).replace(b"\x01", b"\xff\xff\xff\x25"))
            elif what == "a pickle naming another log":
                pickled.write_bytes(pickled.read_bytes().replace(os.fsencode(logs / "a.jsonl"), os.fsencode(secret)))
        if what == "a state whose offset is past the end":
            kept = orjson.loads((state / "state.json").read_bytes())
            for checkpoint in kept["logs"][0]["checkpoints"]:
                checkpoint["offset"] = 10**9
            (state / "state.json").write_bytes(orjson.dumps(kept))
        elif what == "a state of another OUT":
            shutil.copytree(state, tmp_path / "elsewhere" / STATE_DIR)

    for what in ("a pickle that runs code", "a pickle of 30 bytes that asks for 625 MB", "a pickle naming another log",
                 "a state whose offset is past the end", "a state of another OUT"):
        tamper(what)
        report_logs.write(logs / "a.jsonl", records[:-2] if "offset" in what else records)
        code, err = report(capsys, logs, "-o", out)
        assert code == 0, (what, err)
        assert not marker.exists(), what
        assert "secret" not in (out / "index.html").read_text(), what
        assert "2 compiles" in err, (what, err)
        assert_fresh(capsys, logs, out, tmp_path)
        report_logs.write(logs / "a.jsonl", records[:-3])
        shutil.rmtree(out)
        assert report(capsys, logs, "-o", out)[0] == 0
    kept = orjson.loads((state / "state.json").read_bytes())
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(out, elsewhere, dirs_exist_ok=True)  # a state copied beside another report: not its own
    code, err = report(capsys, logs, "-o", elsewhere)
    assert code == 0 and "built whole: its state cannot be checked" in err, err
    # a state that unpickles to another shape, MAC'd as this user's code would: the log is read whole
    import hashlib

    data = pickle.dumps({"part": [1], "file": {}})
    for checkpoint in kept["logs"][0]["checkpoints"]:
        (state / f"log-0.{checkpoint['kind']}.pickle").write_bytes(data)
        checkpoint["digest"] = hashlib.sha256(data).hexdigest()
    _forge(out, kept)
    report_logs.write(logs / "a.jsonl", records)
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "built whole: no state was kept before the logs changed" not in err
    assert "a.jsonl" in err and "2 compiles" in err, err
    assert_fresh(capsys, logs, out, tmp_path)
    (state / "state.json").write_bytes(b"\x00garbage")  # unreadable: OUT is not known to be these logs'
    code, err = report(capsys, logs, "-o", out)
    assert code == 2 and "--overwrite" in err


def test_state_files_are_never_followed_and_never_hang(tmp_path):
    """A FIFO, a symbolic link or a directory where the state's files are: the report neither hangs on
    them nor reads through them (it runs in a process of its own, with a deadline)."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    records = report_logs.records() + report_logs.records(compile_id=2)[1:]
    report_logs.write(logs / "a.jsonl", records[:-3])
    command = [sys.executable, "-m", "provenance", "report", str(logs), "-o", str(out), "--no-browser"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert subprocess.run(command, env=env, timeout=120, capture_output=True).returncode == 0
    state = out / STATE_DIR
    secret = tmp_path / "secret.txt"
    secret.write_text("secret " * 100)
    link = lambda p: p.symlink_to(secret)  # noqa: E731
    for name, make in [("log-0.start.pickle", os.mkfifo), ("log-0.perfetto", os.mkfifo), ("state.json", os.mkfifo),
                       ("state.mac", link), ("log-0.start.pickle", link),
                       ("log-0.directory", lambda p: p.mkdir())]:
        target = state / name
        saved = target.read_bytes()
        target.unlink()
        make(target)
        report_logs.write(logs / "a.jsonl", records)
        run = subprocess.run(command, env=env, timeout=120, capture_output=True, text=True)
        assert run.returncode in (0, 2), (name, run.stderr)
        assert secret.read_text() == "secret " * 100
        assert "secret" not in (out / "index.html").read_text()
        shutil.rmtree(out)
        report_logs.write(logs / "a.jsonl", records[:-3])
        assert subprocess.run(command, env=env, timeout=120, capture_output=True).returncode == 0
        assert saved


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


def test_every_log_of_a_run_is_taken_up_on_its_own(tmp_path, capsys):
    """Every rank's log grows: each is taken up where its own state was kept (none read again from its
    start), whichever grew; one rewritten before its state is read whole, the others still taken up."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    count = 12
    full = {rank: report_logs.records(rank=rank) + report_logs.records(rank=rank, compile_id=2)[1:]
            for rank in range(count)}
    for rank in range(count):
        report_logs.write(logs / f"r{rank:02}.jsonl", full[rank][:-4])
    assert report(capsys, logs, "-o", out)[0] == 0
    kept = sorted(p.name for p in (out / STATE_DIR).glob("log-*.pickle"))  # each log's own (a compile is
    assert kept == sorted(f"log-{i}.start.pickle" for i in range(count))  # open at each end: no state there)
    for rank in range(count):  # every log grows by a compile
        report_logs.write(logs / f"r{rank:02}.jsonl", full[rank][:-1])
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and f"{count} of {count} logs taken up" in err, err
    assert_fresh(capsys, logs, out, tmp_path)
    for rank in range(count):
        report_logs.write(logs / f"r{rank:02}.jsonl", full[rank])
    changed = report_logs.records(rank=3, fn="other.fn") + report_logs.records(rank=3, compile_id=2)[1:]
    report_logs.write(logs / "r03.jsonl", changed)  # rewritten from its start
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and f"{count - 1} of {count} logs taken up" in err, err
    assert "r03.jsonl is read whole: it changed before its kept state" in err
    assert_fresh(capsys, logs, out, tmp_path)


def test_out_is_the_users_a_report_deletes_only_what_it_wrote(tmp_path, capsys):
    """Files of the user's in OUT, at its top and in the report's own folders, stay in every mode (taken
    up, built whole, --overwrite); what an earlier report wrote that the new one does not is deleted."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    report_logs.write(logs / "a.jsonl", report_logs.records() + report_logs.records(compile_id=2)[1:])
    assert report(capsys, logs, "-o", out)[0] == 0
    mine = {"notes.txt": b"mine", "compiles/my-page.html": b"<p>mine</p>", "static/mine.css": b"a{}",
            "graphs/x.html": b"mine", "data/run.csv": b"1,2", "compiles/r0-c9.html": b"not the report's"}
    for name, data in mine.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    steps = [((), lambda: report_logs.write(logs / "a.jsonl", report_logs.records() + report_logs.records(
                  compile_id=3)[1:])),  # compile 2 gone: its pages deleted
             (("--overwrite",), lambda: None),
             ((), lambda: report_logs.write(logs / "b.jsonl", report_logs.records(rank=1))),  # built whole
             (("--overwrite",), lambda: report_logs.write(logs / "a.jsonl", report_logs.records(fn="other.fn")))]
    for flags, step in steps:
        step()
        code, err = report(capsys, logs, "-o", out, *flags)
        assert code == 0, err
        for name, data in mine.items():
            assert (out / name).read_bytes() == data, (flags, name)
        fresh = tmp_path / "fresh"
        shutil.rmtree(fresh, ignore_errors=True)
        assert report(capsys, logs, "-o", fresh)[0] == 0
        assert sorted(set(tree(out)) - set(mine)) == sorted(tree(fresh)), flags


def test_a_refused_out_is_left_as_it_was(tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "out"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    for flags in ((), ("--overwrite",)):
        code, err = report(capsys, logs, "-o", out, *flags)
        assert code == 2 and "not empty" in err
        assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]


def test_a_folder_of_out_that_is_a_link_is_refused(tmp_path, capsys):
    """`OUT/compiles` linking elsewhere would have the pages written outside OUT: refused, nothing written."""
    logs, out, elsewhere = tmp_path / "logs", tmp_path / "out", tmp_path / "elsewhere"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    assert report(capsys, logs, "-o", out)[0] == 0
    elsewhere.mkdir()
    shutil.rmtree(out / "compiles")
    (out / "compiles").symlink_to(elsewhere)
    for flags in ((), ("--overwrite",)):
        code, err = report(capsys, logs, "-o", out, *flags)
        assert code == 2 and "is a symbolic link" in err, err
        assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("earlier", ["none", "a report of the logs before"])
def test_a_report_that_did_not_end_is_built_whole_without_overwrite(earlier, tmp_path, capsys, monkeypatch):
    """Stopped midway (Ctrl-C, kill, a crash), a build whole into an empty OUT or one taking up an earlier
    report: the next report of the same logs is built whole, without --overwrite."""
    from provenance.report.analyze.run import RunBuilder

    logs, out = tmp_path / "logs", tmp_path / "out"
    report_logs.write(logs / "a.jsonl", report_logs.records())
    if earlier != "none":
        assert report(capsys, logs, "-o", out)[0] == 0
        report_logs.write(logs / "a.jsonl", report_logs.records() + report_logs.records(compile_id=2)[1:])

    def stopped(self, files):  # the report is stopped after the pass, before the run's pages
        raise KeyboardInterrupt

    monkeypatch.setattr(RunBuilder, "model", stopped)
    with pytest.raises(KeyboardInterrupt):
        report(capsys, logs, "-o", out)
    monkeypatch.undo()
    code, err = report(capsys, logs, "-o", out)
    assert code == 0 and "built whole: the report there did not end" in err, err
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


def _torch_dir(folder: Path, pid: int) -> Path:
    """A TORCH_TRACE directory of one process: its frame [0/0]'s output graph."""
    meta = {"dynamo_output_graph": {"sizes": {}}, "has_payload": "1", "frame_id": 0, "frame_compile_id": 0,
            "attempt": 0}
    line = (f"V1207 02:18:29.123456 {pid} torch/_dynamo/output_graph.py:1567] {orjson.dumps(meta).decode()}\n"
            "\tclass GraphModule(torch.nn.Module):\n\t    def forward(self, L_x_):\n")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dedicated_log_torch_trace_abc.log").write_text(line)
    return folder


def test_a_report_with_a_torch_trace_directory_is_taken_up(tmp_path, capsys):
    """`report THUNDER_DIR TORCH_DIR` again into its OUT: the logs read are merged copies made for each
    report; the one given is what is checked and read, never the earlier report's copy (gone with it)."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    records = report_logs.records(fx=True)
    pid = records[0]["pid"]
    torch_dir = _torch_dir(tmp_path / "torch_trace", pid)
    report_logs.write(logs / "a.jsonl", records[:-4])
    assert report(capsys, logs, torch_dir, "-o", out)[0] == 0
    for step in (records[:-1], records):
        report_logs.write(logs / "a.jsonl", step)
        code, err = report(capsys, logs, torch_dir, "-o", out)
        assert code == 0 and "error" not in err, err
        assert_fresh(capsys, logs, out, tmp_path, torch_dir)


def test_a_watch_ends_in_a_batch_report_whatever_ends_it(tmp_path):
    """Started before the job's first log, the watch waits quietly; SIGTERM during a rebuild of a report
    with a TORCH_TRACE directory (whose spool catches the signal for itself) still ends in the batch build;
    logs gone at the end: it says so and the pages stop polling."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    records = report_logs.records(fx=True)
    torch_dir = _torch_dir(tmp_path / "torch_trace", records[0]["pid"])
    done = 'self.thunderTraceLive = {"live":false};\n'
    for end in ("SIGTERM", "logs gone"):
        shutil.rmtree(logs, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        said = tmp_path / f"stderr-{end}"
        with open(said, "w") as stderr:
            watch = subprocess.Popen([sys.executable, "-m", "provenance", "report", str(logs), str(torch_dir), "-o",
                                      str(out), "--watch", "0.2", "--no-browser"], env=env, stderr=stderr,
                                     stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while "watching" not in said.read_text():  # started (a loaded machine imports slowly), and waiting
                assert time.monotonic() < deadline and watch.poll() is None, said.read_text()
                time.sleep(0.2)
            report_logs.write(logs / "a.jsonl", records[:-4])
            while not (out / "index.html").exists():
                assert time.monotonic() < deadline and watch.poll() is None, said.read_text()
                time.sleep(0.2)
            if end == "SIGTERM":
                report_logs.write(logs / "a.jsonl", records)
                time.sleep(0.3)  # the next look, then a rebuild
                watch.send_signal(signal.SIGTERM)
            else:
                shutil.rmtree(logs)
                time.sleep(1)
                watch.send_signal(signal.SIGINT)
            code = watch.wait(timeout=120)
        finally:
            watch.kill() if watch.poll() is None else None
        err = said.read_text()
        assert err.startswith(f"thunder-trace: watching {logs} for logs (Ctrl-C ends it)\n"), err
        assert "no THUNDER_TRACE log" not in err, err
        assert (out / "live.js").read_text() == done, (end, err)
        if end == "SIGTERM":
            assert code == 0, err
            assert_fresh(None, logs, out, tmp_path, torch_dir)
        else:
            assert code == 1 and "the logs are gone" in err, err

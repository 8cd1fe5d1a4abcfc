"""A live report (`thunder-trace report DIR --watch`) of a real 2-rank job (torchrun, gloo): rank 1 is held in
a long compile while rank 0 waits in the row-parallel all-reduce. The index, open in Chromium from file://,
reloads itself and says so while it happens; once the job ends and the watch is stopped, the report is the
one a batch build of the same logs writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from paths import ROOT, SUPPORT, report_files

pytestmark = pytest.mark.slow  # a torchrun job held for HOLD seconds

HOLD = 30  # rank 1's compile, in seconds: rank 0 compiles and blocks well within it on a loaded machine
ROWS = """() => Array.from(document.querySelectorAll('#now tbody tr')).map(r => ({
  state: r.className, text: r.textContent.replace(/\\s+/g, ' ').trim(),
  label: r.cells[0].textContent.trim(), took: r.querySelector('.now-for').textContent.trim()}))"""


def _rows(page) -> dict[str, dict]:
    """The index's rows by rank, [] while the page is between two loads."""
    try:
        return {row["label"]: row for row in page.evaluate(ROWS)}
    except Exception:  # the page reloaded (live.js said the report was rebuilt) as we read it
        return {}


def _seconds(took: str) -> float:
    number, unit = took.split()
    return float(number) * {"s": 1, "min": 60, "h": 3600}[unit]


def _the_batch_build(out, logs, tmp_path, env) -> None:
    """`out`, the watch's final report, is file for file what a batch build of `logs` writes, and says so."""
    assert (out / "live.js").read_text() == 'self.thunderTraceLive = {"live":false};\n'
    batch = tmp_path / "batch"
    done = subprocess.run([sys.executable, "-m", "provenance", "report", str(logs), "-o", str(batch), "--no-browser"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert report_files(out) == report_files(batch)
    assert [f for f in report_files(out) if (out / f).read_bytes() != (batch / f).read_bytes()] == []


def test_the_live_index_says_rank_1_compiles_while_rank_0_waits(tmp_path, browser):
    logs, out = tmp_path / "logs", tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "CI")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                            str(SUPPORT / "live_worker.py")],
                           env={**env, "THUNDER_TRACE": str(logs), "THUNDER_TRACE_WAIT_COUNTERS": "1",
                                "LIVE_HOLD": str(HOLD)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watch = subprocess.Popen([sys.executable, "-m", "provenance", "report", str(logs), "-o", str(out), "--watch", "0.5",
                              "--no-browser"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (out / "index.html").exists():
            assert job.poll() is None and watch.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        page = browser.open(out / "index.html")
        seen: list[dict] = []
        while True:  # the page reloads itself as the logs grow: nothing here reloads it
            rows = _rows(page)
            seen.append(rows)
            if "now-waiting" in rows.get("rank 0", {}).get("state", "") and "now-compiling" in rows.get(
                    "rank 1", {}).get("state", ""):
                break
            assert job.poll() is None, f"the job ended before the index said so: {seen[-3:]}"
            assert time.monotonic() < deadline, seen[-3:]
            page.wait_for_timeout(300)
        waiting, compiling = rows["rank 0"]["text"], rows["rank 1"]["text"]
        assert "waiting in torch_all_reduce_prim_impl (row_parallel.post \u00b7 net2)" in waiting, waiting
        assert "while rank 1 compiles" in waiting, waiting
        assert "compiling __main__.HeldModel (compile 1)" in compiling, compiling
        assert page.is_visible(".live-badge")
        browser.shot(page, "live-index")
        # how long: counted up by the page itself between two rebuilds, from the log's times
        first = _seconds(rows["rank 1"]["took"])
        page.wait_for_timeout(2500)
        later = _rows(page).get("rank 1")
        assert later is None or "now-compiling" not in later["state"] or _seconds(later["took"]) >= first + 1.5
        assert job.wait(timeout=300) == 0, job.stderr.read()[-3000:]
        time.sleep(2)  # a last rebuild with the logs' ends
    finally:
        job.kill() if job.poll() is None else None
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=120)
    assert code == 0, watch.stderr.read()[-3000:]
    _the_batch_build(out, logs, tmp_path, env)
    index = (out / "index.html").read_text()
    # done: no live marks, and no row per rank that exited (both wrote their exit's summaries)
    assert 'id="now"' not in index and "live-badge" not in index and "now-exited" not in index
    assert not browser.errors, browser.errors


def test_a_4_rank_job_watched_to_its_end_is_taken_up_at_every_rebuild(tmp_path):
    """A real 4-rank torchrun job (gloo) whose logs grow by a recompile on every rank, twice, a few seconds
    apart, watched to its end: once every rank's log is there, each rebuild takes up all four where they
    were kept (none is read again from its start), and the watch's final report is the batch build's."""
    logs, out = tmp_path / "logs", tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("THUNDER_TRACE", "CI")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    said = tmp_path / "watch-stderr"  # a file, not a pipe: a rebuild's lines never wait for a reader
    with open(said, "w") as stderr:
        watch = subprocess.Popen([sys.executable, "-m", "provenance", "report", str(logs), "-o", str(out), "--watch",
                                  "0.5", "--no-browser"], env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    job = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                          str(SUPPORT / "live_worker.py")],
                         env={**env, "THUNDER_TRACE": str(logs), "LIVE_HOLD": "0", "LIVE_SHAPES": "4,6,8",
                              "LIVE_PAUSE": "4"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]
    time.sleep(3)  # a last rebuild with the logs' ends
    watch.send_signal(signal.SIGINT)
    code = watch.wait(timeout=300)
    err = said.read_text()
    assert code == 0, err[-3000:]
    assert "error" not in err, err
    lines = err.splitlines()
    rebuilds = [line for line in lines if " from 4 logs -> " in line]
    assert len(rebuilds) >= 3, err
    # (a rank's log created but not written yet is a file passed over: a rebuild before all four are there
    # may be built whole)
    assert not any("built whole" in line for line in lines[lines.index(rebuilds[0]) + 1:]), err
    assert all("4 of 4 logs taken up where they were kept" in line for line in rebuilds[1:]), err
    _the_batch_build(out, logs, tmp_path, env)

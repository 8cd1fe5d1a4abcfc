"""Long collective waits into the log: the watchdog (provenance.timing.waits.WaitWatch, started by
enable() with wait counters and a log, stopped by disable()) writes a wait that blocked a second
once as blocked, while it blocks, and once as done, with its exact duration. The waits are driven
through the counters directly (the generated code's wrapper calls begin and end); a real collective
held back on 2 ranks is tests/thunder/test_distributed.py's."""

from __future__ import annotations

import os
import threading
import time
import warnings

import orjson
import pytest

import provenance
from provenance.log import schema
from provenance.thunder import capture, wait_hooks
from provenance.timing.waits import MAX_FINISHED, WAIT_NOTICE_S, WAITS, WaitCounters, WaitWatch

ROW = ("row_parallel.post", "net2")
SITE = (ROW, "torch_all_reduce_prim_impl")
WATCH_THREAD = "thunder-provenance wait watch"


def _watch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == WATCH_THREAD]


def _records(logs) -> list[dict]:
    """The log's records (none while nothing was written: the file is made with the first)."""
    return [orjson.loads(line) for log in logs.glob("*.jsonl") for line in log.read_bytes().splitlines()]


def _waits(logs) -> list[dict]:
    return [r for r in _records(logs) if r["type"] == "wait"]


def _hold(site, seconds: float) -> None:
    token = WAITS.begin(site)
    time.sleep(seconds)
    WAITS.end(token)


def test_a_wait_held_past_a_second_is_written_blocked_then_done_and_a_short_one_not_at_all(tmp_path):
    logs = tmp_path / "logs"
    before = WAITS.snapshot().get(ROW, (0.0, 0))[0]
    provenance.enable(logs, wait_counters=True)
    try:
        assert len(_watch_threads()) == 1
        _hold(((None, "fc"), None), 0.1)  # short: counted, not written
        began = time.time_ns()
        token = WAITS.begin(SITE)
        time.sleep(1.5)
        blocked = _waits(logs)  # written while it still blocks
        WAITS.end(token)
        ended = time.time_ns()
        time.sleep(0.6)  # the watchdog's next look writes it done
        written = _waits(logs)
    finally:
        provenance.disable()
    assert _watch_threads() == [] and wait_hooks._watch is None  # stopped and joined
    assert [w["state"] for w in blocked] == ["blocked"]
    assert [w["state"] for w in written] == ["blocked", "done"]
    first, done = written
    for record in written:
        assert schema.problems(record) == [], schema.problems(record)
        assert (record["role"], record["module"], record["op"]) == (*ROW, "torch_all_reduce_prim_impl")
    assert first["start_ns"] == done["start_ns"] and abs(first["start_ns"] - began) < 50_000_000
    assert began + WAIT_NOTICE_S * 1e9 <= first["time_ns"] <= began + 1.5e9  # announced while it blocked
    assert 1.5 <= done["seconds"] < 1.5 + 0.3  # its exact duration, from the counters
    assert ended <= done["time_ns"] <= ended + 0.6e9
    assert WAITS.snapshot()[ROW][0] - before >= done["seconds"]  # the counters count it as before
    assert _waits(logs) == written  # nothing more at disable()


def test_a_wait_that_returns_after_disable_is_left_blocked_and_nothing_grows(tmp_path):
    logs = tmp_path / "logs"
    provenance.enable(logs, wait_counters=True)
    token = WAITS.begin(SITE)
    try:
        time.sleep(1.4)
    finally:
        provenance.disable()
    WAITS.end(token)  # no watchdog any more: handed to nobody
    assert [w["state"] for w in _waits(logs)] == ["blocked"]
    assert WAITS._announced == {} and WAITS._finished == [] and _watch_threads() == []


def test_a_wait_returning_just_before_disable_is_written_done(tmp_path):
    logs = tmp_path / "logs"
    provenance.enable(logs, wait_counters=True)
    try:
        token = WAITS.begin(SITE)
        time.sleep(1.3)
        while not _waits(logs):  # announced (a loaded machine may look late)
            time.sleep(0.05)
        WAITS.end(token)
    finally:
        provenance.disable()  # at once: the watchdog's last records are written before the log closes
    assert [w["state"] for w in _waits(logs)] == ["blocked", "done"]


def test_no_watchdog_without_a_log_or_without_wait_counters(tmp_path):
    provenance.enable(wait_counters=True)  # counting only: no log to write to
    try:
        assert _watch_threads() == []
    finally:
        provenance.disable()
    provenance.enable(tmp_path / "logs")  # a log, no wait counters
    try:
        assert _watch_threads() == []
    finally:
        provenance.disable()


def test_an_internal_error_in_the_watchdog_warns_once_and_counting_goes_on(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    provenance.enable(logs, wait_counters=True)
    try:
        monkeypatch.setattr(capture.ACTIVE, "fault_injection", "wait_watch")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            before = WAITS.snapshot().get(ROW, (0.0, 0))[0]
            _hold(SITE, 1.3)
        ours = [str(w.message) for w in caught if "thunder-provenance" in str(w.message)]
        assert len(ours) == 1 and "'wait_watch'" in ours[0] and "InjectedFault" in ours[0]
        assert WAITS.snapshot()[ROW][0] - before >= 1.3
        assert _watch_threads() == []  # ended itself
    finally:
        provenance.disable()
    assert _waits(logs) == [] and WAITS._announced == {}


def test_the_watchdog_alone_announces_each_wait_once_and_hands_back_exact_durations():
    """WaitCounters and WaitWatch without Thunder: several waits at once, on threads, some long."""
    counters, written = WaitCounters(), []
    watch = WaitWatch(counters, written.append, lambda: True, pytest.fail, notice_s=0.3, poll_s=0.05)
    watch.start()
    holds = {"a": 0.05, "b": 0.5, "c": 0.8}
    threads = []
    for name, seconds in holds.items():
        def hold(name=name, seconds=seconds):
            token = counters.begin(((name, None), None))
            time.sleep(seconds)
            counters.end(token)
        threads.append(threading.Thread(target=hold))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.2)
    watch.stop()
    assert not watch.alive
    by_role: dict[str, list[dict]] = {}
    for record in written:
        by_role.setdefault(record["role"], []).append(record)
    assert sorted(by_role) == ["b", "c"]
    for role, records in by_role.items():
        assert [r["state"] for r in records] == ["blocked", "done"]
        assert holds[role] <= records[1]["seconds"] < holds[role] + 0.2
        assert records[0]["start_ns"] == records[1]["start_ns"]
    assert counters._announced == {} and counters._finished == [] and counters._active == {}
    assert counters.snapshot()[("c", None)][0] >= 0.8


def test_announced_waits_that_return_unread_are_bounded():
    counters = WaitCounters()
    tokens = [counters.begin(((None, None), None)) for _ in range(MAX_FINISHED + 5)]
    finished, new = counters.announce(0.0, lambda site, start: start)
    assert finished == [] and len(new) == MAX_FINISHED + 5
    for token in tokens:
        counters.end(token)
    assert len(counters._finished) == MAX_FINISHED and counters.finished_dropped == 5
    assert counters._announced == {} and counters._active == {}
    finished, new = counters.announce(0.0, lambda site, start: start)
    assert len(finished) == MAX_FINISHED and new == [] and counters._finished == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_has_no_watchdog_and_its_waits_start_afresh(tmp_path):
    logs = tmp_path / "logs"
    provenance.enable(logs, wait_counters=True)
    try:
        token = WAITS.begin(SITE)  # in progress at the fork
        with WAITS._lock:  # and the counters' lock held by this thread at the fork
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: disable() must not wait on the parent's thread, nor end() on its lock
                try:
                    os.close(read)
                    ok = wait_hooks._watch is None and WAITS._active == {}
                    WAITS.end(WAITS.begin(SITE))
                    provenance.disable()
                    os.write(write, b"ok" if ok else b"no")
                finally:
                    os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        assert os.read(read, 2) == b"ok" and status == 0
        os.close(read)
        WAITS.end(token)
        assert len(_watch_threads()) == 1  # the parent's goes on
    finally:
        provenance.disable()

"""A log's numbers (issue 22): ints and floats of any size, sums past 2**64 and non-finite
results never crash the report nor drop a compile; an odd field is unknown on the pages and
named among the problems (provenance/report/numbers.py). Hand-written logs, no torch."""

from __future__ import annotations

import math

import orjson
import pytest
import report_logs

from provenance.cli import main
from provenance.report import numbers

M = numbers.MAX_INT  # each value in range; their sums are not


def report(capsys, *args) -> tuple[int, str]:
    code = main(["report", *map(str, args), "--no-browser"])
    return code, capsys.readouterr().err


def built(tmp_path, capsys, records, *args) -> tuple[dict, str]:
    out = tmp_path / "out"
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", out, *args)
    assert code == 0 and "Traceback" not in err, err
    orjson.loads((out / "perfetto_trace.json").read_bytes())  # complete, valid JSON
    for page in ("index.html", "failures.html", "distributed.html"):
        assert (out / page).is_file()
    return orjson.loads((out / "compile_directory.json").read_bytes()), err


def test_numbers_are_made_safe_in_one_place():
    assert numbers.as_int(2**64 - 1) is None and numbers.as_int(M) == M and numbers.as_int(True) is None
    assert numbers.as_count(-1) is None and numbers.as_float(1e300) is None and numbers.as_float(2) == 2.0
    assert numbers.as_float(math.nan) is None
    assert numbers.total([M, M, None, "x", 3]) == M  # saturates
    assert numbers.ns_of_seconds(1e300) == M and numbers.ns_of_seconds(math.inf) == M
    assert numbers.ns_of_seconds(math.nan) == 0 and numbers.ns_of_seconds(-1.0) == 0
    assert numbers.ns_of_ms(1.5) == 1_500_000 and numbers.duration_ns(5, 2) == 0
    assert numbers.duration_ns(-M, M) == M
    assert numbers.int_of_text("9" * 5000) is None and numbers.int_of_text("12") == 12
    assert numbers.int_of_text("\u0663") is None  # not ASCII digits
    made = orjson.loads(numbers.dumps({"a": [2**70, 10**400, math.inf, M], "b": (1, 2)}))
    assert made == {"a": [M, M, None, M], "b": [1, 2]}  # past 64 bits: saturated (a float would be inexact)
    assert orjson.loads(numbers.dumps([-(2**70)])) == [-M - 1]
    assert numbers.dumps([1, 2]) == orjson.dumps([1, 2])


def test_seconds_of_1e300_is_an_unknown_field_not_a_crash(tmp_path, capsys):
    records = report_logs.records()
    records[-2]["seconds"] = 1e300
    found, err = built(tmp_path, capsys, records)
    (entry,) = found["compiles"]
    assert entry["status"] == "ok" and entry["seconds"] == pytest.approx(0.004999, rel=1e-3)  # from its times
    assert "compile_end.seconds: float 1e+300 out of range" in err


def test_a_traceback_line_number_of_5000_digits_keeps_its_failed_compile(tmp_path, capsys):
    traceback = ('Traceback (most recent call last):\n  File "/home/me/train.py", line ' + "9" * 5000
                 + ', in forward\n    y = x @ w\nRuntimeError: boom\n')
    records = [r for r in report_logs.records(error={"traceback": traceback}) if r["type"] != "trace"]
    found, err = built(tmp_path, capsys, records)
    (entry,) = found["compiles"]
    assert entry["status"] == "failed" and entry["error"]["message"] == "boom"
    failures = (tmp_path / "out" / "failures.html").read_text()
    assert "train.py" in failures and "y = x @ w" in failures


def test_sums_past_2_64_of_fields_in_range_keep_every_compile(tmp_path, capsys):
    """Four compiles whose counts, cache figures and seconds are each in range and sum past 2**64."""
    records = report_logs.records()
    items = records[:-1]
    for cid in range(2, 6):
        more = report_logs.records(compile_id=cid)[1:-1]
        more[0]["time_ns"] = M - 10
        more[-1].update(time_ns=M, seconds=numbers.MAX_SECONDS, log_seconds=numbers.MAX_SECONDS,
                        final=dict.fromkeys(("ops", "with_provenance", "compute", "compute_with_user_source",
                                             "fusions"), M), cache={"hits": M, "misses": M, "calls": M})
        items += [r for r in more if r["type"] != "prov"]
    items += [{**records[-1], "calls": M, "cache_hits": M, "cache_misses": M, "compiles": [1, 2, 3, 4, 5]},
              {**records[-1], "fn": "other", "calls": M, "cache_hits": M, "cache_misses": M, "compiles": []}]
    found, err = built(tmp_path, capsys, items, "--strict")
    assert [c["compile"] for c in found["compiles"]] == [1, 2, 3, 4, 5]
    totals = found["totals"]
    assert totals["ops"] == totals["calls"] == totals["cache_hits"] == M  # saturated
    assert totals["seconds"] == pytest.approx(4 * numbers.MAX_SECONDS, rel=1e-6)
    index = (tmp_path / "out" / "index.html").read_text()
    assert str(M) in index or f"{M:,}" in index


def test_profile_times_summed_past_2_64_keep_the_compile_and_its_time(tmp_path, capsys):
    records = report_logs.profiled(calls=4)
    for r in records:
        if r["type"] == "profile_call":
            r["wall_ns"], r["op_ns"] = M, [M, M, M]
    found, err = built(tmp_path, capsys, records, "--strict")
    (entry,) = found["compiles"]
    assert entry["time"] is not None and entry["time"]["calls"] == 4
    assert entry["time"]["wall_ns"] == M  # the sum saturates, as every sum of the report does
    assert 'id="time"' in (tmp_path / "out" / entry["pages"]["compile"]).read_text()
    assert (tmp_path / "out" / "time.html").is_file()


def test_phases_and_executor_compiles_at_the_int64_bound(tmp_path, capsys):
    records = report_logs.records(why=True)
    phases = next(r for r in records if r["type"] == "phases")
    phases.update(start_ns=0, end_ns=M, phases=[["a", 0, M, 0, None], ["b", 0, M, 0, None], ["c", 1, M, 1, "x"]])
    compiled = next(r for r in records if r["type"] == "executor_compile")
    compiled.update(start_ns=0, end_ns=M)
    records.insert(records.index(compiled) + 1, dict(compiled))
    found, err = built(tmp_path, capsys, records)
    (entry,) = found["compiles"]
    assert entry["window"] == [0, M] and len(entry["executor_compiles"]) == 2
    trace = orjson.loads((tmp_path / "out" / "perfetto_trace.json").read_bytes())["traceEvents"]
    assert all(e["dur"] <= M / 1000 for e in trace if "dur" in e)


def test_integers_past_int64_are_unknown_fields(tmp_path, capsys):
    records = report_logs.records()
    records[1]["time_ns"] = 2**64 - 1
    records[-2]["cache"]["hits"] = 2**64 - 1
    records[-1]["calls"] = 2**64 - 1
    found, err = built(tmp_path, capsys, records)
    (entry,) = found["compiles"]
    assert entry["start_ns"] is None and entry["cache"] is None and entry["calls"] == 0
    assert "compile_start.time_ns: int 18446744073709551615 out of range" in err


def test_a_schema_version_of_5000_digits_is_not_a_header(tmp_path, capsys):
    records = report_logs.records(schema="1." + "9" * 5000)
    code, err = report(capsys, report_logs.write(tmp_path / "a.jsonl", records), "-o", tmp_path / "out")
    assert code == 2 and "not a THUNDER_TRACE log" in err and "Traceback" not in err


def test_an_output_that_cannot_take_a_compile_does_not_cost_it_the_others(tmp_path, capsys, monkeypatch):
    from provenance.report.render.perfetto import PerfettoWriter

    def odd(self, pid, summary):
        raise TypeError("Integer exceeds 64-bit range")

    monkeypatch.setattr(PerfettoWriter, "compile", odd)
    found, err = built(tmp_path, capsys, report_logs.records())
    assert [c["status"] for c in found["compiles"]] == ["ok"]  # still in compile_directory.json
    assert "its Perfetto events: TypeError" in err

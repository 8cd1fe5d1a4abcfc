"""`thunder-trace diff` on real Thunder runs of tests/support/diff_program.py: the same program
three times (no significant change), one line changed, a layer widened, a recompile added; the
gate's exit codes; the JSON's shape. The logs are made once per session (conftest.py)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest
from diff_program import line_of

from provenance.cli import main
from provenance.diff.compare import compare
from provenance.diff.read import read_side
from provenance.diff.render import FORMAT

pytestmark = pytest.mark.slow  # real Thunder runs in subprocesses (made once per session)

NAMES = ("base1", "relu", "wide", "recompile")  # each made once per session (conftest.py)


def _diff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "provenance.report", "diff", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def sides(diff_logs):
    return {name: read_side(str(path)) for name, path in zip(NAMES, diff_logs(*NAMES))}


def _act() -> str:
    return f"diff_program.py:{line_of('act')}"


@pytest.fixture(scope="module")
def thirds(diff_logs, tmp_path_factory):
    """Three runs of one noisy profile: base1's log with its profiled calls dealt out in turn
    (calls 1, 4, 7, ... to the first). Not three processes: this machine's pace drifts by up to
    half between processes (compile and every call 45% slower in one of three identical runs,
    one after the other): comparing separate processes' times would test the machine."""
    (log,) = diff_logs("base1").glob("*.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    out = []
    for k in range(3):
        directory = tmp_path_factory.mktemp(f"third{k}")
        (directory / log.name).write_bytes(b"".join(
            line for line in lines
            if not line.startswith(b'{"type":"profile_call"') or json.loads(line)["call"] % 3 == k))
        out.append(directory)
    return out


def test_the_same_program_three_times_has_no_significant_change(thirds):
    runs = [read_side(str(d)) for d in thirds]
    assert all(r.compiles and r.compiles[0].wall.calls >= 6 for r in runs)  # profiled calls: a spread
    for a, b in itertools.permutations(runs, 2):
        diff = compare(a, b)
        assert len(diff.matched) == 1 and not diff.added and not diff.removed
        assert [c.title for c in diff.significant] == []
        # what it did compare, and found within the noise (the thirds share one compile: its time is no change)
        titles = {c.title for c in diff.changes}
        assert "run time per call (forward + backward)" in titles and "compile time" not in titles


@pytest.fixture(scope="module")
def busy():
    """A loaded machine: one pure-Python spinner (on 2 cores: the program shares with it and pytest)."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def test_one_program_run_ten_times_on_a_loaded_machine_has_no_significant_change_in_five_pairs(busy, tmp_path):
    """Issue 47: five pairs of runs of one program, one after the other, with the machine loaded,
    compile time (one sample a side) included: no significant change. Then a real 2x slowdown of one
    line (gelu of gelu) is found, and named first. The runs share one process (tests/support/diff_runs.py):
    two processes' paces differ by more than any rule here can know, and a test that compares them tests
    the machine; bench/diff_noise.py measures real process pairs (bench/README.md: 0 of 5 flagged)."""
    from paths import ROOT, SUPPORT

    env = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_TRACE") and k != "CI"}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(SUPPORT), env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(SUPPORT / "diff_runs.py"), str(tmp_path), *["gelu"] * 10, "gelu2"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [read_side(str(tmp_path / f"run{k}")) for k in range(11)]
    for k in range(5):
        diff = compare(runs[2 * k], runs[2 * k + 1])
        assert len(diff.matched) == 1 and [c.title for c in diff.significant] == [], [
            (c.title, c.before, c.after, c.details) for c in diff.significant]
        assert "compile time" in {c.title for c in diff.changes}  # compared, and judged noise
    diff = compare(runs[9], runs[10])
    first = diff.significant[0]
    assert first.level == "line" and _act() in first.title, [c.title for c in diff.significant[:4]]
    timed = next(c for c in diff.significant if c.metric == "run_time" and c.level == "line" and _act() in c.title)
    assert timed.after > 1.5 * timed.before  # about twice the time


def test_the_same_logs_give_the_same_diff_in_any_process(thirds):
    """Ties (the same compile phases on both sides) are ordered by name, not by the process's
    string hashing: two processes with different hash seeds print the same JSON."""
    printed = {subprocess.run([sys.executable, "-m", "provenance", "diff", str(thirds[0]), str(thirds[1]), "--json",
                               "--all"], capture_output=True, text=True, timeout=300, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(printed) == 1 and json.loads(printed.pop())["changes"]


def test_one_line_changed_is_named_first_with_its_ops_and_time(sides):
    diff = compare(sides["base1"], sides["relu"])
    # the first line named (two processes' paces may differ here: a whole-call time change may come first)
    first = next(c for c in diff.significant if c.kind == "line")
    assert first.title.startswith(_act()), [c.title for c in diff.significant]
    assert "computation:erf" in first.ops["removed"] and "computation:where" in first.ops["added"]
    assert any(d.startswith("time: median") for d in first.details)  # its time, A -> B
    lines = [c for c in diff.changes if c.kind == "line" and (c.ops["added"] or c.ops["removed"])]
    assert [c.title.split(": ")[0] for c in lines] == [_act()]  # no other line's ops changed
    assert first.links["a_source"].endswith(f"-{line_of('act')}") and first.links["b_source"]


def test_a_widened_layer_is_a_memory_and_time_regression_of_its_lines(sides):
    diff = compare(sides["base1"], sides["wide"])
    regressions = [c for c in diff.significant if c.group == 0]
    assert regressions and regressions[0].after > regressions[0].before
    fc1 = [c for c in regressions if c.kind == "line" and c.title.startswith(f"diff_program.py:{line_of('fc1')}")]
    assert fc1 and fc1[0].metric in ("memory", "run_time")
    assert not [c for c in diff.changes if c.kind == "line" and (c.ops["added"] or c.ops["removed"])]  # same ops
    memory = [c for c in regressions if c.kind == "memory" and c.level == "compile"]
    assert memory and all(c.after > c.before for c in memory)


def test_a_recompile_added_is_listed_with_its_reason(sides):
    diff = compare(sides["base1"], sides["recompile"])
    (added,) = diff.added
    assert added.index == 1
    (change,) = [c for c in diff.changes if c.kind == "recompile"]
    assert change.title.startswith("recompile added: __main__.MLP")
    assert any("why:" in d and ("shape" in d or "256" in d) for d in change.details), change.details
    assert change.links == {"b": added.page, "b_source": added.source}


def test_the_gate_exits_0_1_and_2(diff_logs, sides, thirds, tmp_path, capsys):
    base, relu, wide, recompile = diff_logs("base1", "relu", "wide", "recompile")

    def gate(*args: object) -> tuple[int, str, str]:  # the CLI in this process (its subprocess: the tests below)
        code = main(["diff", *map(str, args)])
        out, err = capsys.readouterr()
        return code, out, err

    strict = ["--fail-on", "compile_time=+10%", "--fail-on", "run_time=+5%", "--fail-on", "memory=+0"]
    code, out, err = gate(thirds[0], thirds[1], *strict)  # the same run's calls dealt in two
    assert code == 0, out + err
    again = thirds[1]
    code, out, err = gate(base, wide, *strict)  # wider: more memory
    assert code == 1 and "FAIL memory=+0" in out, out + err
    assert gate(base, relu, "--fail-on", "memory=+0")[0] == 0  # less memory never fails
    assert gate(relu, base, "--fail-on", "memory=+0")[0] == 1
    assert gate(relu, base, "--fail-on", "memory=+10M")[0] == 0  # under the limit
    code, out, _ = gate(base, recompile, "--fail-on", "recompiles=+0")
    assert code == 1 and "recompile added" in out
    bad = tmp_path / "not_a_log.jsonl"
    bad.write_text("hello\n")
    for args in ([base, tmp_path / "missing"], [bad, base], [base, again, "--fail-on", "speed=+5%"],
                 [base, again, "--fail-on", "run_time=5 percent"]):
        code, _, err = gate(*args)
        assert code == 2 and "error:" in err and "Traceback" not in err, err


def test_a_one_line_edit_in_a_copied_script_is_one_change_at_that_line(diff_logs):
    """train_b.py beside the original, its activation edited: every other line matched by its statement
    (none added or removed), the edited one by its place, first; the diff says the files differ."""
    base, copy = diff_logs("base1", "copy_relu")
    data = json.loads(_diff(base, copy, "--json", "--all").stdout)
    lines = [c for c in data["changes"] if c["kind"] == "line"]
    assert lines and not [c["title"] for c in lines if c["title"].startswith(("line added", "line removed"))]
    act = line_of("act")
    assert lines[0]["title"].startswith(f"train_b.py:{act} (A: diff_program.py:{act}): h = F.relu(h)"), lines[0]
    # one line's ops changed (the others' changes are its effects: fc1's output no longer saved for gelu)
    assert [c["title"] for c in lines if c["ops"].get("added") or c["ops"].get("removed")] == [lines[0]["title"]]
    assert any("diff_program.py is B's" in n and "train_b.py" in n and "the two files differ" in n
               for n in data["notes"]), data["notes"]


def test_a_run_against_itself_lists_nothing_even_with_all(diff_logs, tmp_path):
    """Nothing changed: no regression or improvement, not even among the changes within the noise; and -o
    takes --no-browser, as report does."""
    base = diff_logs("base1")
    data = json.loads(_diff(base, base, "--json", "--all").stdout)
    assert data["changes"] == [] and data["significant"] == 0
    done = _diff(base, base, "--all", "-o", tmp_path / "d", "--no-browser")
    assert done.returncode == 0 and "improvement" not in done.stdout and "regression" not in done.stdout, done.stdout
    assert (tmp_path / "d" / "index.html").is_file()


def test_the_json_has_its_documented_shape(diff_logs):
    base, relu = diff_logs("base1", "relu")
    done = _diff(base, relu, "--json", "--fail-on", "run_time=+1000%")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["format"] == FORMAT and set(data) == {"format", "a", "b", "compiles", "significant", "changes",
                                                      "more", "notes", "gate"}
    assert set(data["a"]) == {"path", "logs", "ranks", "compiles", "problems", "report"}
    assert data["a"]["report"] is None  # no -o: no reports written
    assert [m["label"] for m in data["compiles"]["matched"]] == ["__main__.MLP"]
    # the first line named (two processes' paces may differ: a whole-call time change may come first)
    change = next(c for c in data["changes"] if c["kind"] == "line")
    assert set(change) == {"kind", "title", "compile", "details", "metric", "before", "after", "unit", "significant",
                           "group", "ops", "links", "level", "delta", "ratio"}
    assert change["title"].startswith(_act()) and change["group"] in ("regression", "improvement", "structure")
    assert data["significant"] == sum(c["significant"] for c in data["changes"])
    assert data["gate"] == {"rules": ["run_time=+1000%"], "failed": [], "status": 0}


def test_the_terminal_summary_is_plain_text_off_a_terminal(diff_logs):
    base, relu = diff_logs("base1", "relu")
    done = _diff(base, relu)
    assert done.returncode == 0
    items = [line for line in done.stdout.splitlines() if line[:5].strip().rstrip(".").isdigit()]
    assert items and items[0].startswith("  1. ")
    first = next(line for line in items if "diff_program.py:" in line)  # the first line named (see above)
    assert _act() in first and "\x1b[" not in done.stdout


_DIFF_ONLY = """
import sys
from provenance.cli import main
code = main(["diff", sys.argv[1], sys.argv[2], "--json"])
loaded = sorted(m for m in ("torch", "thunder", "provenance.log.session", "provenance.thunder") if m in sys.modules)
print("RESULT", code, loaded, file=sys.stderr)
"""


def test_the_diff_reads_bad_input_as_the_report_does_and_imports_no_torch(diff_logs, tmp_path):
    base, relu = diff_logs("base1", "relu")
    (log,) = relu.glob("*.jsonl")
    lines = log.read_bytes().splitlines(keepends=True)
    hostile = tmp_path / "hostile.jsonl"  # bad lines, a record of an odd shape, a cut-off last line
    hostile.write_bytes(b"".join(lines[:3]) + b"not json\n" + b'{"type": "trace", "compile": [1]}\n'
                        + b"".join(lines[3:]) + lines[-1][:40])
    done = subprocess.run([sys.executable, "-c", _DIFF_ONLY, str(base), str(hostile)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "RESULT 0 []" in done.stderr, done.stderr[-3000:]
    assert "warning: B" in done.stderr and "Traceback" not in done.stderr
    data = json.loads(done.stdout)
    assert data["b"]["problems"] >= 2
    assert next(c for c in data["changes"] if c["kind"] == "line")["title"].startswith(_act())


def test_on_a_terminal_the_summary_is_a_rich_table(diff_logs):
    import pty

    base, relu = diff_logs("base1", "relu")
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a terminal (never back into pytest)
        try:
            os.execv(sys.executable, [sys.executable, "-m", "provenance.report", "diff", str(base), str(relu)])
        finally:
            os._exit(127)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "┏" in text and "\x1b[" in text and "A → B" in text  # a table, coloured
    assert text.index(_act()) < text.index("saved for backward")

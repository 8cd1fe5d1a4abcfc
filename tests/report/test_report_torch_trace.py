"""torch's structured trace on a Dynamo graph's page (issue 46), from hand-written records
(tests/support/report_logs.py's ThunderFX log, with `torch_trace` records as torch 2.9 writes them):
each section, the failed guard marked, records of other frame compiles counted, hostile records
read or left out. No torch, no browser."""

from __future__ import annotations

from pathlib import Path

import orjson
import report_logs

from provenance.cli import main

TREE = ("\nTREE_GUARD_MANAGER:\n+- RootGuardManager\n| +- GLOBAL_STATE: ___check_global_state()\n"
        "| +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x'), type=<class 'Tensor'>\n"
        "| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, torch.float32, size=[2, 3])  # y = x * 2  # m.py:10 in f\n"
        "| +- GuardManager: source=L['self'], accessed_by=FrameLocalsGuardAccessor(key='self'), type=<class 'M'>\n"
        "| | +- ID_MATCH: ___check_obj_id(L['self']._modules['lin'], 1)  # y = x * 2  # m.py:10 in f\n"
        "+- LAMBDA_GUARD: 2 <= L['x'].size()[0]  # y = x * 2  # m.py:10 in f\n")


def _torch(name: str, compile_id: str = "0/0", **fields) -> dict:
    return {"type": "torch_trace", "name": name, "compile_id": compile_id, "attempt": 0, "time_ns": 1,
            "metadata": {}, **fields}


def _records() -> list[dict]:
    records = report_logs.records(fx=True)
    graph = next(r for r in records if r["type"] == "dynamo_graph")
    recompiled = dict(graph, graph=2, compile_id="0/1", recompile={
        "reason": "x: dim 0 size 2 \u2192 4", "function": report_logs.frame(9, "def f(x):", fn="f"), "call": None,
        "more": 0,
        "failures": [{"entry": "0/0", "subject": "x", "changes": [["dim 0 size", "2", "4"]],
                      "reason": "x: dim 0 size 2 \u2192 4", "guard": "tensor 'x' size mismatch at index 0"}]})
    end = records.index(graph) + 1
    records[end:end] = [
        _torch("dynamo_output_graph", payload="class GraphModule(torch.nn.Module):\n    def forward(self, L_x_):"),
        _torch("dynamo_cpp_guards_str", payload=TREE),
        _torch("inductor_output_code", payload="# inductor's kernel\n" + "x" * 50, payload_chars=9000),
        _torch("aot_backward_graph", payload="def backward(): ..."),
        _torch("fx_graph_cache_miss", payload='{"key": "abc", "why": "not cached"}'),
        _torch("compilation_metrics", metadata={"guard_count": 5, "graph_op_count": 2,
                                                "restart_reasons": ["a break\nmore"]}),
        _torch("create_symbol", "0/1", metadata={
            "symbol": "s0", "val": "4", "vr": "[2, int_oo]", "source": "L['x'].size()[0]",
            "user_stack": [{"filename": "/m.py", "line": 10, "name": "f", "loc": "y = x * 2", "user": True}]}),
        _torch("made_up_artifact"),
        _torch("dynamo_output_graph", "7/0", payload="another frame's graph"),  # no ThunderFX graph: counted
        recompiled,
    ]
    return records


def _page(tmp_path, capsys, records, compile_id: str) -> tuple[str, str]:
    out = tmp_path / "out"
    code = main(["report", str(report_logs.write(tmp_path / "a.jsonl", records)), "-o", str(out), "--no-browser"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    graphs = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    return next((out / g["page"]).read_text() for g in graphs if g["compile_id"] == compile_id), err


def test_the_graph_page_shows_torchs_trace_of_its_frame_compile(tmp_path, capsys):
    page, err = _page(tmp_path, capsys, _records(), "0/0")
    assert "malformed" not in err, err
    torch_part = page.split('id="torch"')[1]
    assert "Guards: 4 checks (Dynamo's 5 guards), 1 failed by a later call" in torch_part
    # grouped by the input each reads, the failed one first, in the user's names
    assert torch_part.index("<b>x</b>") < torch_part.index("<b>self</b>") < torch_part.index("(global state)")
    assert '<tr class="guard-failed"><td>TENSOR_MATCH</td><td><code>check_tensor(x, Tensor' in torch_part
    assert "___check_obj_id(self.lin, 1)" in torch_part
    assert "Dynamo&#39;s output graph" in torch_part and "class GraphModule" in torch_part
    assert "inductor&#39;s code</b> (the log kept 70 of 9000 characters)" in torch_part
    assert "AOT backward graph" in torch_part and "fx_graph_cache" in torch_part and "not cached" in torch_part
    assert "<th>restarts</th><td>a break</td>" in torch_part and "made_up_artifact &times;1" in torch_part
    assert "another frame" not in page


def test_a_dynamic_dim_is_named_by_the_users_input_and_line(tmp_path, capsys):
    page, _ = _page(tmp_path, capsys, _records(), "0/1")
    shapes = page.split('id="shapes"')[1].split("</table>")[0]
    assert "made dynamic</td><td><code>x dim 0</code>" in shapes and "m.py:10" in shapes and "y = x * 2" in shapes


def test_a_dynamic_dim_of_a_graph_with_thunder_pieces_is_said_to_be_fixed_there(tmp_path, capsys):
    records = _records()
    symbol = next(r for r in records if r.get("name") == "create_symbol")
    records.insert(records.index(symbol), dict(symbol, compile_id="0/0"))  # graph [0/0] has a Thunder piece compile
    page, _ = _page(tmp_path, capsys, records, "0/0")
    assert ("Dynamo made <code>x dim 0 (s0)</code> dynamic, but Thunder compiles each piece for the sizes it is given"
            in page)
    graphs = orjson.loads((tmp_path / "out" / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    found = {g["compile_id"]: g["torch"] for g in graphs}
    assert found["0/0"]["guards"] == 4 and found["0/0"]["dynamo_guards"] == 5 and found["0/0"]["failed_guards"] == 1
    assert found["0/0"]["fixed_by_thunder"] == ["x dim 0 (s0)"] and found["0/1"]["fixed_by_thunder"] == []
    assert found["0/1"]["dynamic"] == ["x dim 0"] and found["0/0"]["caches"] == [["fx_graph_cache", "miss"]]


def test_a_symbol_torchs_compile_made_is_not_shown_as_an_input(tmp_path, capsys):
    """A symbol inductor or AOTAutograd made compiling a piece (`sym_2`, `args[0].stride()[0]`) is internal:
    no user input named, not among the dims Dynamo made dynamic."""
    records = _records()
    symbol = next(r for r in records if r.get("name") == "create_symbol")
    internal = [dict(symbol, compile_id="0/0", metadata=dict(symbol["metadata"], symbol=name, source=source))
                for name, source in (("s49", "sym_2"), ("s7", "args[0].stride()[0]"))]
    records[records.index(symbol):records.index(symbol)] = internal
    page, _ = _page(tmp_path, capsys, records, "0/0")
    shapes = page.split('id="shapes"')[1].split("</table>")[0]
    assert "internal to torch&#39;s compile, not an input of yours (its source: sym_2)" in shapes
    assert "(its source: args[0].stride()[0])" in shapes
    assert "made dynamic</td><td></td>" in shapes and "Dynamo made" not in page
    graphs = orjson.loads((tmp_path / "out" / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    torch_part = next(g for g in graphs if g["compile_id"] == "0/0")["torch"]
    assert (torch_part["dynamic"], torch_part["internal_symbols"]) == ([], ["s49", "s7"])


def _with_runnable(records: list[dict]) -> list[dict]:
    graph = next(r for r in records if r["type"] == "dynamo_graph" and r["compile_id"] == "0/0")
    start = graph["start_ns"]
    graph["phases"] = [["split", start, start + 10, 0, None],
                       ["inductor_compile", start + 10, start + 100, 0, "inductor_1"]]
    at = records.index(graph) + 1
    records[at:at] = [_torch("fx_graph_runnable", payload="import torch\nrepro()", time_ns=start + 50),
                      _torch("fx_graph_runnable", payload="import torch\nrepro()", time_ns=start + 60),
                      _torch("inductor_post_grad_graph", payload="def forward(): lowered", time_ns=start + 70),
                      _torch("aot_forward_graph_fw_metadata", payload="ViewAndMutationMeta(...)", time_ns=start + 500)]
    return records


def test_the_artifacts_a_user_opens_are_rendered_once_with_their_piece(tmp_path, capsys):
    """fx_graph_runnable (the repro, with a copy button), the post-grad graph and the forward metadata,
    labelled with the fallback piece whose inductor compile wrote them (by time), each shown once."""
    page, _ = _page(tmp_path, capsys, _with_runnable(_records()), "0/0")
    torch_part = page.split('id="torch"')[1]
    runnable = torch_part.split("fx_graph_runnable: a program that reproduces this compile")
    assert len(runnable) == 2 and "piece <code>inductor_1</code>" in runnable[1].split("</summary>")[0]
    assert "(written 2 times, the same)" in runnable[1].split("</summary>")[0]
    assert '<button type="button" class="copy" data-copy' in runnable[1] and "repro()" in runnable[1]
    post_grad = torch_part.split("post-grad graph (what inductor lowered)")[1].split("</summary>")[0]
    assert "piece <code>inductor_1</code>" in post_grad
    metadata = torch_part.split("forward metadata")[1].split("</summary>")[0]
    assert "piece" not in metadata  # written outside every piece's compile: no piece claimed
    assert "fx_graph_runnable &times;" not in torch_part  # rendered, not only counted


def test_the_repros_copy_button_copies_it_whole(tmp_path, capsys, browser):
    _page(tmp_path, capsys, _with_runnable(_records()), "0/0")
    graphs = orjson.loads((tmp_path / "out" / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    page = browser.open(tmp_path / "out" / next(g["page"] for g in graphs if g["compile_id"] == "0/0"))
    # the clipboard, recorded (a file:// page gets no clipboard permission)
    page.evaluate("""() => { window.copied = [];
      const writeText = t => { copied.push(t); return Promise.resolve(); };
      Object.defineProperty(navigator, 'clipboard', {value: {writeText}}); }""")
    runnable = page.locator("details.torch-code", has_text="fx_graph_runnable")
    runnable.locator("summary").click()
    runnable.locator("button[data-copy]").click()
    page.wait_for_function("() => window.copied.length === 1")
    assert page.evaluate("() => window.copied") == ["import torch\nrepro()"]
    assert runnable.locator("button[data-copy]").inner_text() == "copied" and browser.errors == []


def test_a_recompile_on_grad_mode_also_names_the_size_that_changed(tmp_path, capsys):
    """An eval under no_grad at another length: torch's reason stops at the first failed guard (grad mode),
    the new length shows in the two graphs' tensor guards."""
    records = _records()
    recompiled = next(r for r in records if r["type"] == "dynamo_graph" and r["compile_id"] == "0/1")
    recompiled["recompile"] = dict(recompiled["recompile"], reason="grad mode: on \u2192 off", failures=[
        {"entry": "0/0", "subject": None, "changes": [["grad mode", "on", "off"]], "reason": "grad mode: on \u2192 off",
         "guard": "GLOBAL_STATE changed: grad_mode"}])
    records.insert(records.index(recompiled) + 1, _torch("dynamo_cpp_guards_str", "0/1",
                                                         payload=TREE.replace("size=[2, 3]", "size=[4, 3]")))
    page, _ = _page(tmp_path, capsys, records, "0/1")
    why = page.split('id="why"')[1].split("</section>")[0]
    assert '<p class="reason">grad mode: on \u2192 off</p>' in why
    assert "Changed too" in why and "<code>x: size [2, 3] \u2192 [4, 3]</code>" in why
    graphs = orjson.loads((tmp_path / "out" / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    assert next(g for g in graphs if g["compile_id"] == "0/1")["recompile_also"] == ["x: size [2, 3] \u2192 [4, 3]"]


def test_hostile_torch_records_are_read_or_left_out(tmp_path, capsys):
    records = _records()
    records[-1:-1] = [_torch(name, **junk) for name in ("dynamo_cpp_guards_str", "create_symbol", "compilation_metrics")
                      for junk in ({"payload": 5}, {"metadata": [None]}, {"compile_id": 3}, {"attempt": "x"},
                                   {"payload": "+- " * 10000}, {"metadata": {"user_stack": [{"line": "x"}] * 5}})]
    records[-1:-1] = [{"type": "torch_trace"}, {"type": "torch_trace", "name": None, "compile_id": "0/0"}]
    page, err = _page(tmp_path, capsys, records, "0/0")
    assert 'id="torch"' in page


def _glog(pid: int, metadata: dict, payload: str | None = None, frame: tuple[int, int] | None = (0, 0)) -> str:
    """A line of a TORCH_TRACE log, as torch's TorchLogsFormatter writes it (and its payload's lines)."""
    if frame is not None:
        metadata = {**metadata, "frame_id": frame[0], "frame_compile_id": frame[1], "attempt": 0}
    line = f"V1207 02:18:29.123456 {pid} torch/_dynamo/output_graph.py:1567] {orjson.dumps(metadata).decode()}"
    return line + "".join(f"\n\t{part}" for part in payload.split("\n")) if payload is not None else line


def _torch_dir(tmp_path, pid: int = 4242, extra: tuple[str, ...] = ()) -> str:
    lines = [
        _glog(pid, {"str": ["/m.py", 0]}, frame=None),
        _glog(pid, {"dynamo_output_graph": {"sizes": {}}, "has_payload": "1"},
              "class GraphModule(torch.nn.Module):\n    def forward(self, L_x_):"),
        _glog(pid, {"dynamo_cpp_guards_str": {}, "has_payload": "2"}, TREE),
        _glog(pid, {"create_symbol": {"symbol": "s0", "val": "4", "vr": "[2, int_oo]", "source": "L['x'].size()[0]",
                                      "user_stack": [{"filename": 0, "line": 10, "name": "f", "loc": "y = x * 2"}]}}),
        _glog(pid, {"chromium_event": {}}),
        _glog(pid, {"dynamo_output_graph": {}}, "a frame with no ThunderFX graph", frame=(7, 0)),
        *extra,
    ]
    folder = tmp_path / "torch_trace"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_abc.log").write_text("\n".join(lines) + "\n")
    return str(folder)


def test_a_torch_trace_directory_is_merged_by_process_and_compile_id(tmp_path, capsys):
    """`thunder-trace report DIR TORCH_DIR`: a run logged with TORCH_TRACE instead of our capture of
    torch's trace gets the same sections, from torch's own log; the log given is named, not its copy."""
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True))
    out = tmp_path / "out"
    assert main(["report", str(log), _torch_dir(tmp_path), "-o", str(out), "--strict", "--no-browser"]) == 0
    err = capsys.readouterr().err
    assert ("3 artifacts of torch's trace merged into a.jsonl (left out: 1 artifact of frame compiles that were "
            "not ThunderFX's)") in err
    (graph,) = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    page = (out / graph["page"]).read_text()
    assert "Guards: 4 checks" in page and "class GraphModule" in page
    assert "<code>x dim 0</code>" in page and "m.py:10" in page  # the interned file name resolved
    assert "a frame with no ThunderFX graph" not in page
    for shown in ("index.html", "compile_directory.json", "perfetto_trace.json"):  # the log given, not its copy
        assert "a.jsonl" in (out / shown).read_text() and "thunder-trace-otlp" not in (out / shown).read_text()
    assert log.read_bytes() == report_logs.write(tmp_path / "b.jsonl", report_logs.records(fx=True)).read_bytes()


def test_a_torch_trace_directory_whose_artifacts_the_log_holds_says_so(tmp_path, capsys):
    """The log already has torch's trace (THUNDER_TRACE captured it): merging TORCH_TRACE's adds nothing,
    and says why in words."""
    records = report_logs.records(fx=True)
    graph = next(r for r in records if r["type"] == "dynamo_graph")
    records.insert(records.index(graph) + 1, _torch("dynamo_output_graph", payload="class GraphModule: ..."))
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", records)
    assert main(["report", str(log), _torch_dir(tmp_path), "-o", str(tmp_path / "out"), "--no-browser"]) == 0
    err = capsys.readouterr().err
    assert ("0 artifacts of torch's trace merged into a.jsonl (left out: 3 artifacts the log already holds "
            "(THUNDER_TRACE captured torch's trace); 1 artifact of frame compiles that were not ThunderFX's)") in err


def test_a_torch_trace_directory_in_the_wrong_place_is_named_so(tmp_path, capsys):
    """Given first (the arguments swapped), or to diff: what it is, and what to run."""
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True))
    torch_dir = _torch_dir(tmp_path)
    assert main(["report", torch_dir, str(log.parent), "-o", str(tmp_path / "out"), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "this looks like a TORCH_TRACE directory" in err
    assert f"the two look swapped: thunder-trace report {log.parent} {torch_dir}" in err
    assert main(["diff", str(log.parent), torch_dir]) == 2
    err = capsys.readouterr().err
    assert f"no THUNDER_TRACE log in {torch_dir!r}: this looks like a TORCH_TRACE directory" in err


def test_a_torch_trace_logs_bad_lines_are_counted_and_other_processes_left_alone(tmp_path, capsys):
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True))
    torch_dir = _torch_dir(tmp_path, extra=("garbage that is no glog line",
                                            "V1207 02:18:29.123456 4242 x.py:1] {not json", "V9999 99:99:99.000000 "
                                            "4242 x.py:1] {\"dynamo_output_graph\": {}, \"frame_id\": 0, "
                                            "\"frame_compile_id\": 0}", _glog(5, {"compilation_metrics": {}})))
    (Path(torch_dir) / "dedicated_log_torch_trace_rank_3_x.log").write_text(_glog(99, {"compilation_metrics": {}}))
    (Path(torch_dir) / "leading.log").write_text("\tpayload before any record\n")  # not a TORCH_TRACE log
    out = tmp_path / "out"
    assert main(["report", str(log), torch_dir, "-o", str(out), "--strict", "--no-browser"]) == 1
    err = capsys.readouterr().err
    assert "no THUNDER_TRACE log of pid 99: not merged" in err and "Traceback" not in err
    assert "not a line of torch's structured trace" in err and "its JSON does not parse" in err
    assert "a record of pid 5 in pid 4242's log" in err
    (graph,) = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    assert "Guards: 4 checks" in (out / graph["page"]).read_text()  # the good lines merged all the same



def test_a_torch_trace_record_nested_hundreds_deep_is_a_bad_line(tmp_path, capsys):
    """Metadata nested 300 levels deep (orjson reads 1024, writes 255) and 254 (written alone, not inside
    its record): each a listed bad line, never a crash of the merge; the lines around them merged."""
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True))

    def deep(levels: int) -> str:  # by hand: orjson.dumps refuses it
        nested = '{"a": ' * levels + "1" + "}" * levels
        return (f'V1207 02:18:29.123456 4242 torch/_dynamo/output_graph.py:1567] {{"some_artifact": {nested}, '
                f'"frame_id": 0, "frame_compile_id": 0, "attempt": 0}}')

    after = _glog(4242, {"dynamo_cpp_guards_str": {}, "has_payload": "3"}, TREE.replace("LAMBDA_GUARD", "GUARD_X"))
    torch_dir = _torch_dir(tmp_path, extra=(deep(300), deep(254), after))
    out = tmp_path / "out"
    assert main(["report", str(log), torch_dir, "-o", str(out), "--no-browser"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "its JSON nests deeper than 64 levels" in err, err
    lines = (Path(torch_dir) / "dedicated_log_torch_trace_abc.log").read_text().splitlines()
    problems = orjson.loads((out / "compile_directory.json").read_bytes())["problems"]["entries"]
    assert [p["line"] for p in problems if "its JSON nests deeper than 64 levels" in p["reason"]] == \
        [i for i, line in enumerate(lines, 1) if "some_artifact" in line], problems
    (graph,) = orjson.loads((out / "compile_directory.json").read_bytes())["dynamo_graphs"]["graphs"]
    assert "GUARD_X" in (out / graph["page"]).read_text()  # the line after them merged
    from provenance.dynamo.torch_trace import MAX_NESTING, Encoder

    metadata = orjson.loads(deep(254).partition("] ")[2])  # the capture's records: their encoder keeps its bound
    assert Encoder(lambda path: True).encode(metadata, None, 1)["metadata"] == {"nested_past": MAX_NESTING}


def test_a_torch_trace_directory_alone_says_how_to_give_it(tmp_path, capsys):
    assert main(["report", _torch_dir(tmp_path), "-o", str(tmp_path / "out"), "--no-browser"]) == 2
    assert "thunder-trace report THUNDER_DIR TORCH_DIR" in capsys.readouterr().err
    log = report_logs.write(tmp_path / "a.jsonl", report_logs.records(fx=True))
    assert main(["report", str(log), str(tmp_path / "nothing"), "-o", str(tmp_path / "o2"), "--no-browser"]) == 2
    assert "no TORCH_TRACE log at" in capsys.readouterr().err


def test_mutated_torch_trace_logs_never_stop_the_report(tmp_path, capsys):
    """Bytes flipped, cut and inserted at random (seeded), and a line past MAX_LINE: the report is made
    (exit 0, or 1 with --strict's bad lines), the good lines merged, nothing raised."""
    import random

    from provenance.report.read.torch_trace_logs import MAX_LINE

    rng = random.Random(20261207)
    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True))
    good = (_glog(4242, {"dynamo_cpp_guards_str": {}, "has_payload": "2"}, TREE) + "\n").encode()
    for k in range(12):
        data = bytearray(good * 3)
        for _ in range(rng.randint(1, 12)):
            at = rng.randrange(len(data))
            choice = rng.random()
            if choice < 0.4:
                data[at] = rng.randrange(256)
            elif choice < 0.7:
                del data[at:at + rng.randint(1, 30)]
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 30)))
        if k == 0:
            data += b"V1207 02:18:29.123456 4242 x.py:1] {" + b"x" * MAX_LINE + b"\n" + good
        folder = tmp_path / f"tt{k}"
        folder.mkdir()
        (folder / "dedicated_log_torch_trace_x.log").write_bytes(bytes(data))
        code = main(["report", str(log), str(folder), "-o", str(tmp_path / f"out{k}"), "--no-browser", "--strict"])
        err = capsys.readouterr().err
        assert code in (0, 1, 2) and "Traceback" not in err, err
        if code == 2:  # only when no line of it is glog's any more: said so
            assert "no TORCH_TRACE log" in err, err
        if k == 0:
            assert code == 1 and f"a line longer than {MAX_LINE} bytes" in err


def test_a_huge_payload_is_held_only_as_far_as_it_is_kept(tmp_path):
    """A record's payload of 6 MiB (inductor code, or a hostile log): the merge holds its start only
    (read/torch_trace_logs.MAX_PAYLOAD_BYTES), the record keeps MAX_PAYLOAD characters and says the
    whole length."""
    from provenance.dynamo.torch_trace import MAX_PAYLOAD
    from provenance.report.read.torch_trace_logs import merge

    log = report_logs.write(tmp_path / "logs" / "a.jsonl", report_logs.records(fx=True))
    line = "x" * 1023
    payload = "\n".join([line] * 6144)  # 6 MiB
    folder = tmp_path / "tt"
    folder.mkdir()
    (folder / "dedicated_log_torch_trace_x.log").write_text(
        _glog(4242, {"dynamo_output_graph": {}, "has_payload": "1"}, payload) + "\n")
    spool = tmp_path / "spool"
    spool.mkdir()
    found = merge(folder, [log], [orjson.loads(log.read_bytes().splitlines()[0])], lambda: spool)
    (record,) = [orjson.loads(r) for r in found.files[log].read_bytes().splitlines()
                 if b'"type":"torch_trace"' in r]
    assert len(record["payload"]) == MAX_PAYLOAD and record["payload_chars"] == len(payload)

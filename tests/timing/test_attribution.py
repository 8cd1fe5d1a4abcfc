"""One attribution rule (provenance.core.attribution): the cost roll-up and the OpenTelemetry exporter
charge the same ops to the same lines, modules and roles — on a real profiled compile read back
from its log, and on the fusion cases a small model does not make."""

from __future__ import annotations

from collections import Counter

import models
import thunder
import torch

import provenance
from exporters.otel import ProfileTables
from provenance.core import attribution
from provenance.core.record import Frame, Kind, Provenance, intern
from provenance.timing.profile import FORWARD, CompileProfile, Op, ProfiledCall, TraceProfile
from provenance.timing.rollup import rollup


def _tables(events: list[dict]) -> ProfileTables:
    """The exporter's tables after these events (what OtelExporter feeds them)."""
    tables = ProfileTables()
    for event in events:
        if event["type"] == "prov":
            tables.prov(event)
        elif event["type"] == "compile_start":
            tables.fns[event["compile"]] = event["fn"]
        elif event["type"] == "profile_ops":
            tables.table(event, {})
    return tables


def _otel_by(tables: ProfileTables, calls: list[dict], label: str | None) -> Counter:
    """Time per line (label None) or per label of thunder.op.duration, over the profiled runs."""
    total: Counter = Counter()
    for call in calls:
        table, sums, lines = tables.run(call)
        if label is None:
            total.update(lines)
        else:
            for attributes, ns in zip(table.attributes, sums):
                total[attributes[label]] += ns
    return total


def test_rollup_and_the_otel_tables_charge_a_real_profile_alike(tmp_path):
    """nanoGPT (1 layer): bookkeeping, ops with and without a module, backward ops derived from
    forward ones; the exporter reads the records from the log's prov events."""
    model, x = models.nanogpt()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    provenance.enable(tmp_path / "logs", profile=2)
    try:
        jm = thunder.jit(model)
        for _ in range(3):
            models.forward_backward(jm, x)
        (profile,) = provenance.profiles(jm)
    finally:
        provenance.disable()
        torch.set_num_threads(threads)
    events = [r.data for r in provenance.load(tmp_path / "logs")]
    tables = _tables(events)
    calls = [e for e in events if e["type"] == "profile_call"]

    for name, timed in profile.traces.items():  # op by op: the live record's keys are the logged one's
        table = tables.tables[(profile.compile_id, name)]
        assert table.lines == [attribution.line_key(op.record) for op in timed.ops]
        modules = [table.attributes[i]["thunder.module"] for i in table.labels]
        assert modules == [attribution.common_module(attribution.modules(op.record)) or "<root>"
                           if attribution.modules(op.record) else "" for op in timed.ops]

    lines = tables.tables[(profile.compile_id, "backward")].lines
    backward = [op for op in profile.traces["backward"].ops if op.record is not None and op.record.derived_from]
    assert len(backward) > 10 and "(bookkeeping)" in lines

    by_line = _otel_by(tables, calls, None)
    rows = {r.key: r.sum_ns for r in rollup([profile], "line") if r.kind == "key"}
    assert rows and {k: by_line[k] for k in rows} == rows and set(by_line) == set(rows)
    by_role = _otel_by(tables, calls, "thunder.role")
    assert {r.key.replace("(no role)", ""): r.sum_ns for r in rollup([profile], "role")
            if r.kind == "key"} == dict(by_role)


# -- fusions and edge cases, on records made by hand -------------------------------------------------------
def _frame(line: int) -> Frame:
    return Frame("/home/u/model.py", line, "forward", f"line {line}")


def _ops(*records: Provenance | None) -> tuple[list[dict], CompileProfile]:
    """prov events for `records` (and what they reference) and a one-call forward profile of them."""
    ids: dict[Provenance, int] = {}
    events: list[dict] = []

    def write(record: Provenance) -> int:
        if record not in ids:
            derived = write(record.derived_from) if record.derived_from is not None else None
            members = [write(m) for m in record.members]
            ids[record] = len(ids) + 1
            events.append({"type": "prov", "id": ids[record], "kind": record.kind, "module": record.module,
                           "role": record.role, "derived_from": derived, "members": members,
                           "source": [[f.file, f.line, f.function, f.text, f.user] for f in record.source]})
        return ids[record]

    ops = [[i, f"op{i}", write(r) if r is not None else None, i] for i, r in enumerate(records)]
    events += [{"type": "compile_start", "compile": 1, "fn": "f"},
               {"type": "profile_ops", "compile": 1, "trace": FORWARD, "clock": "cpu", "ops": ops}]
    timed = TraceProfile(FORWARD, tuple(Op(i, f"op{i}", r, i) for i, r in enumerate(records)))
    timed.add(ProfiledCall(1, 1, FORWARD, "cpu", 100 * len(records), tuple(10 for _ in records)))
    return events, CompileProfile(1, "f", 1, {FORWARD: timed})


def test_fusions_and_ops_without_a_line_get_the_same_keys_from_both():
    a = intern(Provenance(source=(_frame(1),), module="h.0.attn", role="row_parallel.post"))
    b = intern(Provenance(source=(_frame(2),), module="h.0.mlp"))
    grad_a = intern(Provenance(derived_from=a, transforms=("grad",), kind=Kind.BACKWARD, role=a.role))
    bare = intern(Provenance(kind=Kind.PASS))
    dele = intern(Provenance(transforms=("del_last_used",), kind=Kind.BOOKKEEPING))
    fusions = [intern(Provenance(members=members, kind=Kind.FUSION)) for members in
               [(a, grad_a), (a, b), (a, bare), (bare, dele), (dele,), ()]]
    records = [a, b, grad_a, bare, dele, None, *fusions]
    events, profile = _ops(*records)
    table = _tables(events).tables[(1, FORWARD)]

    line = {r.key: r for r in rollup([profile], "line")}
    for op, key in zip(profile.traces[FORWARD].ops, table.lines):
        members = attribution.keys(op.record, attribution.line_key)
        if len(members) == 1:  # one line: the same key
            assert key == members[0] and key in line
        else:  # several: its own row in the roll-up, a fusion label in OTel, naming as many lines
            (row,) = [r for r in line.values() if r.key.startswith(f"{op.name} (")]
            assert row.members == tuple(members) and key == f"{op.name} (fusion of {len(members)} lines)"
    assert table.lines == ["/home/u/model.py:1", "/home/u/model.py:2", "/home/u/model.py:1", "(no user line)",
                           "(bookkeeping)", "(no user line)", "/home/u/model.py:1", "op7 (fusion of 2 lines)",
                           "op8 (fusion of 2 lines)", "op9 (fusion of 2 lines)", "(bookkeeping)", "(no user line)"]
    labels = [table.attributes[i] for i in table.labels]
    assert [a["thunder.module"] for a in labels] == ["h.0.attn", "h.0.mlp", "h.0.attn", "", "", "", "h.0.attn",
                                                    "h.0", "h.0.attn", "", "", ""]
    assert [a["thunder.role"] for a in labels][6:8] == ["row_parallel.post", "(mixed)"]
    assert {r.key for r in rollup([profile], "module")} >= {"h.0.attn", "h.0", "<root>", "(no module)"}


def test_a_fusion_is_named_by_its_members_lines():
    """The memory panel's peak op, a fusion, was '(no user line)': it is its members' lines."""
    def at(line: int, file: str = "/src/model.py") -> Provenance:
        return intern(Provenance(source=(Frame(file, line, "forward", f"line {line}"),), module="m", module_type="M"))

    fused = intern(Provenance(members=(at(12), at(13), at(12), at(20, "/src/other.py")), kind=Kind.FUSION,
                              transforms=("fusion",)))
    assert attribution.short_place(fused) == "model.py:12, model.py:13, other.py:20"
    many = intern(Provenance(members=tuple(at(n) for n in range(1, 8)), kind=Kind.FUSION, transforms=("fusion",)))
    assert attribution.short_place(many) == "model.py:1, model.py:2, model.py:3, model.py:4 and 3 more"
    assert attribution.short_place(at(5)) == "model.py:5"
    book = intern(Provenance(transforms=("del_last_used",), kind=Kind.BOOKKEEPING))
    assert attribution.short_place(book) == attribution.BOOKKEEPING
    assert attribution.short_place(None) == attribution.NO_LINE

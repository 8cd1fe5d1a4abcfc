"""The event schema as code: docs/log-schema.md matches provenance/log/events.py, and what the writers
emit for real compiles matches its definitions."""

from __future__ import annotations

import json
import re
import typing
import warnings

import pytest
import thunder
import torch
from collecting import Collect
from paths import DOCS

import provenance
from provenance.log import events, schema
from provenance.thunder import capture

DOC = DOCS / "log-schema.md"


def _sections() -> dict[str, str]:
    """Event sections of the doc: "## `type` — ..." up to the next "## "."""
    text = DOC.read_text()
    found: dict[str, str] = {}
    for match in re.finditer(r"^## `(\w+)`.*?(?=^## |\Z)", text, re.M | re.S):
        assert match.group(1) not in found, f"two sections for {match.group(1)!r}"
        found[match.group(1)] = match.group(0)
    return found


def _documented_fields(section: str) -> dict[str, str]:
    """The field table of a section: {field: its type cell}."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w.]+)` \| ([^|]*) \|", section, re.M)}


def _declared_fields(event_type: str) -> dict[str, bool]:
    """Every field of the type's forms (nested objects as `outer.inner`): {field: optional}."""
    fields: dict[str, bool] = {}
    for form in events.forms(event_type):
        hints = typing.get_type_hints(form)
        for key, hint in hints.items():
            if key == "type":
                continue
            fields[key] = fields.get(key, False) or key in form.__optional_keys__
            for inner in (a for a in (typing.get_args(hint) or (hint,)) if typing.is_typeddict(a)):
                fields.update((f"{key}.{k}", k in inner.__optional_keys__) for k in typing.get_type_hints(inner))
    return fields


def test_the_doc_documents_every_event_type_and_field_and_nothing_else():
    sections = _sections()
    assert set(sections) == events.KNOWN_TYPES
    assert DOC.read_text().splitlines()[0].endswith(f"version {events.SCHEMA_VERSION}")
    assert f"[{', '.join(events.FRAME_FIELDS)}]" in DOC.read_text()
    for event_type, section in sections.items():
        documented, declared = _documented_fields(section), _declared_fields(event_type)
        assert set(documented) == set(declared), (event_type, set(documented) ^ set(declared))
        for field, optional in declared.items():
            assert ("optional" in documented[field]) == optional, (event_type, field, documented[field])
        assert f"[{', '.join(events.OP_FIELDS)}]" in section or event_type != "trace"


def test_events_and_the_event_union_agree():
    declared = [form for event_type in events.EVENTS for form in events.forms(event_type)]
    assert set(typing.get_args(events.Event)) == set(declared) and len(declared) == len(set(declared))
    for event_type in events.EVENTS:
        for form in events.forms(event_type):
            assert typing.get_type_hints(form)["type"] == typing.Literal[event_type]


def test_the_doc_examples_are_valid_events_and_show_every_form():
    for event_type, section in _sections().items():
        examples = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]
        assert examples, event_type
        for example in examples:
            assert example["type"] == event_type
            assert schema.problems(example) == [], (event_type, schema.problems(example))
        for form in schema.forms(event_type):  # each form (trace and its repeat) has an example
            assert any(not form.explain(e, event_type) for e in examples), (event_type, form.hint)


def test_problems_names_what_is_wrong():
    good = {"type": "span_end", "id": 3, "end_ns": 5}
    assert schema.problems(good) == []
    assert schema.problems({**good, "extra": 1}) == ["span_end: unexpected 'extra'"]
    assert schema.problems({"type": "span_end", "id": 3}) == ["span_end: missing 'end_ns'"]
    assert schema.problems({**good, "id": True}) == ["span_end.id: bool True, not int"]
    assert schema.problems({"type": "nope"}) == ["unknown event type 'nope'"]
    assert schema.problems([1]) and schema.problems({"type": 3})
    repeat = {"type": "trace", "compile": 1, "list": "computation", "index": 2, "same_as": 1}
    assert schema.problems(repeat) == []
    assert schema.problems({**repeat, "same_as": "1"}) == ["trace.same_as: str '1', not int"]
    frame = ["/m.py", 3, "f", "x = 1", True]
    start = {"type": "compile_start", "compile": 1, "fn": "f", "index": 0, "is_module": False, "time_ns": 1,
             "jit_stack": [frame], "call_stack": [frame[:4]]}
    assert schema.problems(start) == ["compile_start.call_stack[0]: 4 items, not 5"]
    end = {"type": "compile_end", "compile": 1, "status": "ok", "time_ns": 1, "seconds": 1, "log_seconds": 0.5,
           "cache": None, "final": {"ops": 1, "with_provenance": 1, "compute": 1, "compute_with_user_source": 1}}
    assert schema.problems(end) == ["compile_end.final: missing 'fusions'"]




def test_what_the_writers_emit_is_what_events_declares():
    collect = Collect()
    provenance.enable(profile=1)  # the second call of each compile is profiled
    try:
        provenance.add_exporter(collect)
        with provenance.scope("step", role="training", step=1, weights=torch.ones(1)):
            jf = thunder.jit(lambda x: torch.sin(x) * 2)
            jf(torch.ones(3))
            jf(torch.ones(3))
            x = torch.ones(3, requires_grad=True)
            jg = thunder.jit(lambda x: torch.cos(x) * 3)  # with a backward
            jg(x).sum().backward()
            jg(x).sum().backward()
            jf(torch.ones(4))  # a recompile (whose ops table is written too)
        with pytest.raises(Exception) as raised, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            thunder.jit(lambda x: torch.nn.functional.conv2d(x, x, stride=(1, 2, 3)))(torch.ones(1, 1, 3, 3))
        with warnings.catch_warnings():  # an internal fault: capture stops, and the log says so
            warnings.simplefilter("ignore")
            capture.ACTIVE.fault_injection = "processor"
            try:
                thunder.jit(lambda x: torch.cos(x) * 2)(torch.ones(3))
            finally:
                capture.ACTIVE.fault_injection = None
    finally:
        provenance.disable()
    (error,) = [e for e in collect.events if e["type"] == "compile_error"]
    assert error["message"] == str(raised.value)
    seen = {e["type"] for e in collect.events}
    # executor_compile needs the torch.compile executor (an inductor build): tests/thunder/test_phases.py;
    # ThunderFX's records: tests/thunder/test_thunderfx.py, tests/thunder/test_frame_compiles.py; library (model
    # code in site-packages): tests/report/test_report_hf.py; torch_trace (torch's compiler ran):
    # tests/thunder/test_torch_trace.py;
    # wait (wait counters, a wait blocked a second): tests/timing/test_wait_watch.py, tests/thunder/test_distributed.py
    assert seen == events.KNOWN_TYPES - {"executor_compile", "dynamo_graph", "graph_break", "graph_phases",
                                         "frame_compile", "library", "torch_trace", "wait"}
    assert any("same_as" in e for e in collect.events)  # both forms of "trace"
    profiled = [(e["type"], e["trace"]) for e in collect.events if e["type"].startswith("profile_")]
    assert profiled == [("profile_ops", "forward"), ("profile_call", "forward"), ("profile_ops", "forward"),
                        ("profile_ops", "backward"), ("profile_call", "forward"), ("profile_call", "backward"),
                        ("profile_ops", "forward")]
    for event in collect.events:
        assert schema.problems(event) == [], (event["type"], schema.problems(event))


def _tuple_arrays():
    """Every array-of-tuples field of every event type: (type, field, its node)."""
    for event_type in events.TYPES:
        for form in schema.forms(event_type):
            for name, _required, field in form.fields:
                if field.element is not None and typing.get_origin(field.element.hint) is tuple:
                    yield event_type, name, field


def _examples() -> list[dict]:
    """The doc's example events."""
    return [json.loads(block) for section in _sections().values()
            for block in re.findall(r"```json\n(.*?)```", section, re.S)]


def _mutants(entry: list) -> list:
    """An entry with one position changed to a value of another kind (or of a bad size)."""
    out = []
    for i, value in enumerate(entry):
        for bad in (None, True, -1, 2**63, 1.5, float("nan"), "x", [], {}, "not one of them"):
            if bad is not value and type(bad) is not type(value):
                out.append([*entry[:i], bad, *entry[i + 1:]])
    return [*out, entry[:-1], [*entry, 0], tuple(entry)]


def test_column_checks_agree_with_each_value_checked():
    """A log reader checks an array of tuples a column at a time (schema.Node.column: C loops);
    the answer is the one checking each entry gives, for a valid array and for every array with
    one entry changed (a wrong kind, out of range, a NaN, a bad size, a tuple)."""
    checked = 0
    for event_type, name, field in _tuple_arrays():
        example = next((e[name] for e in _examples() if e.get("type") == event_type and e.get(name)), None)
        if not example:
            continue
        assert field.check(example) and all(map(field.element.check, example)), (event_type, name)
        for mutant in _mutants(list(example[0])):
            array = [*example, mutant]
            assert field.check(array) == all(map(field.element.check, array)), (event_type, name, mutant)
            checked += 1
    assert {(t, n) for t, n, _ in _tuple_arrays()} >= {("memory", "ops"), ("memory", "blocks"), ("phases", "phases")}
    assert checked > 100

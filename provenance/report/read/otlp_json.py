"""OTLP/JSON exports read back as THUNDER_TRACE logs: `thunder-trace report` on what a collector kept.

An OTLP/JSON file (the OpenTelemetry Collector's file exporter, most backends' exports) holds one
`ExportTraceServiceRequest` per line in protobuf's JSON mapping, gzip-compressed or not; told
apart by content (`is_otlp`, read/exports.py). Each line is parsed by opentelemetry-proto's generated classes with
google.protobuf.json_format (ids in hex, as the Collector writes them, or base64, as
json_format does, are only compared), never by hand. Spans are grouped by the process that made
them (resource `service.name`, `host.name`, `process.pid`, `thunder.rank`; a span's own
`process.pid` or `thunder.rank` wins: a forked child's, an application's own resource) and turned
into the events the JSONL reader reads (provenance/log/events.py, docs/otel-schema.md), one log per
process written into a spool directory: the report's reader, analysis and pages are the logs' own.

What spans do not carry is absent from those logs, and the pages say so (the header's `otlp`):
trace text after each pass, per-op provenance, the source view, memory, ThunderFX graphs. A
profiled run's span names its top lines only: its profile is those lines and "(other ops)".

Untrusted input, as a log is: a line that is not a trace request, too long, or of spans without
what they need is counted with its reason (the first MAX_KEPT kept, with their line numbers) and
skipped; one line at a time (memory: the longest line, MAX_LINE_BYTES at most, plus the compact
tuples kept per span), linear in the file; a compressed file that ends early is a truncated tail.
"""

from __future__ import annotations

import functools
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from provenance.core.attribution import BOOKKEEPING
from provenance.core.record import Kind
from provenance.log.events import SCHEMA_VERSION
from provenance.report.numbers import int_of_text, path_text
from provenance.report.read.exports import SIGNAL, TooExpanded, is_otlp, open_export, otlp_files
from provenance.timing.waits import WAIT_NOTICE_S, wait_record

__all__ = ["MAX_LINE_BYTES", "OtlpExport", "OtlpProcess", "is_otlp", "otlp_files"]

MAX_LINE_BYTES = 64 << 20  # an export request of a batch processor is a few MB at most
MAX_KEPT = 200  # bad lines and spans kept per file, to list; the rest are counted
MAX_PROCESSES = 4096  # distinct resources kept; spans of more are counted, not read
MAX_STRING = 1 << 16  # characters kept of an attribute's string
INSTRUMENTATION = "thunder-provenance"  # the instrumentation scope of our spans (exporters/otel.py)
_PHASE, _COMPILE, _EXECUTOR, _PROFILED = "thunder.phase ", "thunder.compile ", "thunder.executor_compile ", \
    "thunder.profiled "
_FX = ("thunder.dynamo_graph ", "thunder.piece ", "thunder.dynamo_phase ")  # ThunderFX's: not rebuilt
_WAIT = "thunder.wait "  # a collective wait that blocked at least WAIT_NOTICE_S: its blocked and done records
_NOTICE_NS = int(WAIT_NOTICE_S * 1e9)
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Problem:
    category: str  # "bad line", "malformed span"
    file: str
    line: int | None
    reason: str
    text: str = ""


def _value(value: Any, depth: int = 0) -> Any:
    """An AnyValue as JSON: scalars, arrays of them (nested values as their JSON text)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value[:MAX_STRING]
    if kind in ("bool_value", "int_value", "double_value"):
        return getattr(value, kind)
    if kind == "array_value" and depth == 0:
        return [_value(v, 1) for v in value.array_value.values[:4096]]
    if kind is None:
        return None
    return f"({kind})"  # a kvlist, bytes or a nested array: no attribute of ours is one


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key[:256]: _value(kv.value) for kv in pairs[:1024]}


@dataclass
class OtlpProcess:
    """One process's spans, as much as the report uses of each (compact, no protobuf objects)."""

    service: str | None
    host: str | None
    pid: int | None
    rank: int | None
    world_size: int | None
    files: set[str] = field(default_factory=set)
    version: str | None = None  # thunder-provenance's, from the instrumentation scope
    sdk: str | None = None
    spans: int = 0
    compiles: dict[int, dict] = field(default_factory=dict)
    phases: dict[int, dict[bytes, tuple]] = field(default_factory=dict)  # compile -> span id -> phase
    executors: dict[bytes, tuple] = field(default_factory=dict)
    profiled: dict[bytes, dict] = field(default_factory=dict)
    scopes: dict[bytes, tuple] = field(default_factory=dict)
    waits: dict[bytes, tuple] = field(default_factory=dict)  # span id -> (start, end, role, module, op)
    other: int = 0  # spans of ThunderFX's graphs and pieces, not rebuilt
    start_ns: int | None = None

    @property
    def label(self) -> str:
        rank = f"rank {self.rank}" if self.rank is not None else "no rank"
        return f"{self.service or '?'} on {self.host or '?'}, pid {self.pid if self.pid is not None else '?'}, {rank}"


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class OtlpExport:
    """The spans of OTLP/JSON files, by process. `read(path)` each file, then `logs(spool)`."""

    def __init__(self) -> None:
        self.processes: dict[tuple, OtlpProcess] = {}
        self.problems: list[Problem] = []
        self.problem_count = 0
        self.lines = 0
        self.bytes = 0
        self.foreign = 0  # spans of other instrumentation (the application's own)
        self.dropped_processes = 0
        self.other_signals = 0  # lines of metrics or logs
        self.orphans = 0  # phase, executor compile and profiled spans of a compile whose span is missing

    # -- reading -----------------------------------------------------------------------------
    def read(self, path: str | os.PathLike[str]) -> None:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        name = path_text(path)
        for number, raw in self._lines(path, name):
            if not raw.strip():
                continue
            bad = functools.partial(self._bad, name, number, raw)
            found = SIGNAL.match(raw)
            if found is None:
                bad("not an OTLP/JSON export request (a JSON object with \"resourceSpans\")")
                continue
            if b"pans" not in found.group(1):
                self.other_signals += 1
                continue
            try:  # orjson first: fast, strict UTF-8, bounded nesting (json_format.Parse would json.loads it)
                data = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                bad(f"not JSON ({str(exc)[:200]})")
                continue
            if not (isinstance(data, dict) and isinstance(data.get("resourceSpans", data.get("resource_spans")), list)):
                bad("not an OTLP/JSON trace request (\"resourceSpans\" is not an array)")
                continue
            request = ExportTraceServiceRequest()
            try:
                json_format.ParseDict(data, request, ignore_unknown_fields=True, max_recursion_depth=32)
            except Exception as exc:  # untrusted input: whatever the parser raises, the line is bad
                bad(f"not an OTLP/JSON trace request ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            self._request(request, name, number)

    def _lines(self, path: str | os.PathLike[str], name: str) -> Iterator[tuple[int, bytes]]:
        number = 0
        try:
            with open_export(path) as f:
                while True:
                    blank, size = f.skip_blank()  # in bulk: a few KB of gzip may expand to millions of newlines
                    number += blank
                    self.bytes += size
                    raw = f.readline(MAX_LINE_BYTES + 1)
                    if not raw:
                        return
                    number += 1
                    self.lines = number
                    self.bytes += len(raw)
                    if len(raw) > MAX_LINE_BYTES:
                        self._problem("bad line", name, number, f"longer than {MAX_LINE_BYTES >> 20} MB: skipped",
                                      raw[:200])
                        while raw and not raw.endswith(b"\n"):  # the rest of the line, a chunk at a time
                            raw = f.readline(1 << 20)
                            self.bytes += len(raw)
                        continue
                    yield number, raw  # a last line without its newline too: whole if it parses (read's _bad)
        except (EOFError, zlib.error) as exc:  # the lines before it read; the line it cut is this problem
            self._problem("bad line", name, number + 1, f"the compressed file ends early or is corrupt ({exc})")
        except TooExpanded as exc:
            self._problem("bad line", name, number + 1, f"the compressed file is cut: {exc}")
        except OSError as exc:
            self._problem("bad line", name, number + 1, f"cannot be read ({exc.strerror or exc})")

    def _bad(self, name: str, number: int, raw: bytes, reason: str) -> None:
        if not raw.endswith(b"\n"):  # the last line, unfinished (a whole one without its newline is read)
            reason = "truncated last line (the writer stopped while writing it)"
        self._problem("bad line", name, number, reason, raw)

    def _problem(self, category: str, file: str, line: int | None, reason: str, raw: bytes = b"") -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_KEPT:
            self.problems.append(Problem(category, file, line, reason, raw[:200].decode("utf-8", "replace")))

    def _request(self, request: Any, name: str, number: int) -> None:
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                if scope_spans.scope.name != INSTRUMENTATION:
                    self.foreign += len(scope_spans.spans)
                    continue
                for span in scope_spans.spans:
                    self._span(span, resource, scope_spans.scope.version, name, number)

    def _process(self, resource: dict, attributes: dict) -> OtlpProcess | None:
        pid = _int(attributes.get("process.pid", resource.get("process.pid")))
        rank = _int(attributes.get("thunder.rank", resource.get("thunder.rank")))
        service, host = _str(resource.get("service.name")), _str(resource.get("host.name"))
        key = (service, host, pid, rank)
        found = self.processes.get(key)
        if found is None:
            if len(self.processes) >= MAX_PROCESSES:
                self.dropped_processes += 1
                return None
            found = self.processes[key] = OtlpProcess(service, host, pid, rank,
                                                      _int(resource.get("thunder.world_size")))
            found.sdk = _str(resource.get("telemetry.sdk.version"))
        return found

    def _span(self, span: Any, resource: dict, version: str, name: str, number: int) -> None:
        attributes = _attributes(span.attributes)
        process = self._process(resource, attributes)
        if process is None:
            return
        start, end, title = span.start_time_unix_nano, span.end_time_unix_nano, span.name[:1000]
        if not (0 < start <= end < 1 << 63):
            self._problem("malformed span", name, number, f"span {title[:100]!r}: its start and end are not "
                                                          "times in order")
            return
        process.files.add(name)
        process.version = process.version or (version[:100] or None)
        process.spans += 1
        process.start_ns = start if process.start_ns is None else min(process.start_ns, start)
        span_id, parent = bytes(span.span_id), bytes(span.parent_span_id)
        compile_id = attributes.get("thunder.compile_id")
        if title.startswith((_COMPILE, _PHASE, _EXECUTOR, _PROFILED)) and (type(compile_id) is not int
                                                                           or compile_id < 0):
            self._problem("malformed span", name, number, f"span {title[:100]!r} without an integer thunder.compile_id")
            return
        if title.startswith(_COMPILE):
            if compile_id in process.compiles:
                return  # sent twice (an exporter's retry): the first is kept
            events = [(e.name, _attributes(e.attributes), e.time_unix_nano) for e in span.events[:16]]
            process.compiles[compile_id] = {"id": span_id, "start": start, "end": end, "attributes": attributes,
                                            "error": span.status.code == 2, "message": span.status.message[:2000],
                                            "events": events}
        elif title.startswith(_PHASE):
            process.phases.setdefault(compile_id, {}).setdefault(span_id, (
                span_id, parent, str(attributes.get("thunder.phase") or title[len(_PHASE):]), start, end,
                _str(attributes.get("thunder.phase.detail"))))
        elif title.startswith(_EXECUTOR):
            process.executors.setdefault(span_id, (
                compile_id, str(attributes.get("thunder.executor") or "?"),
                str(attributes.get("thunder.fusion") or "?"), _str(attributes.get("thunder.trace_list")) or None,
                start, end))
        elif title.startswith(_PROFILED):
            process.profiled.setdefault(span_id, {"compile": compile_id, "start": start, "end": end, **attributes})
        elif title.startswith(_WAIT):
            process.waits.setdefault(span_id, (start, end, _str(attributes.get("thunder.role")) or None,
                                               _str(attributes.get("thunder.module")) or None,
                                               _str(attributes.get("thunder.wait.op")) or None))
        elif title.startswith(_FX):
            process.other += 1
        else:  # a provenance.scope span
            process.scopes.setdefault(span_id, (span_id, parent, title, start, end, attributes))

    # -- merging -------------------------------------------------------------------------------
    def covered_by(self, headers: list[dict | None]) -> list[OtlpProcess]:
        """Drop the processes whose own JSONL log is given (same host and pid; rank if both say):
        the log holds all their spans do, and more. The processes dropped."""
        logged = {(h.get("host"), h.get("pid")): h.get("rank") for h in headers
                  if isinstance(h, dict) and isinstance(h.get("pid"), int) and not h.get("otlp")}
        dropped = []
        for key, process in list(self.processes.items()):
            if process.pid is not None and (process.host, process.pid) in logged:
                rank = logged[(process.host, process.pid)]
                if rank is None or process.rank is None or rank == process.rank:
                    dropped.append(self.processes.pop(key))
        return dropped

    # -- writing -------------------------------------------------------------------------------
    def logs(self, spool: Path) -> list[tuple[Path, dict]]:
        """One THUNDER_TRACE log per process, written into `spool`: (its path, its header)."""
        out = []
        for process in self.processes.values():  # spans whose compile's span is not in the export
            self.orphans += sum(len(p) for c, p in process.phases.items() if c not in process.compiles)
            self.orphans += sum(e[0] not in process.compiles for e in process.executors.values())
            self.orphans += sum(r["compile"] not in process.compiles for r in process.profiled.values())
        for n, process in enumerate(sorted(self.processes.values(), key=_order)):
            files = "+".join(sorted(process.files))[:80]
            rank = f"rank{process.rank}" if process.rank is not None else "norank"
            path = spool / _NAME_SAFE.sub("_", f"{files}.{process.host or 'host'}.pid{process.pid}.{rank}.{n}.jsonl")
            header = _header(process)
            with open(path, "wb") as f:
                for event in [header, *_events(process)]:
                    f.write(orjson.dumps(event) + b"\n")
            out.append((path, header))
        return out


def _order(process: OtlpProcess) -> tuple:
    return (process.rank if process.rank is not None else 1 << 62, process.host or "", process.pid or 0,
            process.service or "")


def _header(process: OtlpProcess) -> dict:
    versions = {"thunder_provenance": process.version}
    if process.sdk:
        versions["opentelemetry-sdk"] = process.sdk
    return {"type": "header", "schema": SCHEMA_VERSION, "time_ns": process.start_ns or 0, "versions": versions,
            "argv": [], "pid": process.pid, "host": process.host or "?", "rank": process.rank,
            "world_size": process.world_size,
            "otlp": {"file": "+".join(sorted(process.files))[:1000], "service": process.service,
                     "spans": process.spans}}


def _frame(attributes: dict) -> list | None:
    file, line, function = (attributes.get("code.file.path"), attributes.get("code.line.number"),
                            attributes.get("code.function.name"))
    if isinstance(file, str) and type(line) is int:
        return [file, line, function if isinstance(function, str) else "?", "", True]
    return None


def _events(process: OtlpProcess) -> Iterator[dict]:
    """The process's events, in the order its log would have them (by time; a compile's own
    records from its start to its end, its executor compiles and profiled runs after)."""
    timed: list[tuple[int, int, list[dict]]] = []
    seq = 0
    ids: dict[bytes, int] = {}  # scope span id -> its id in the log
    for span_id, _parent, *_ in sorted(process.scopes.values(), key=lambda s: s[3]):
        ids[span_id] = len(ids) + 1
    for span_id, parent, title, start, end, attributes in sorted(process.scopes.values(), key=lambda s: s[3]):
        scope_attributes = {k.removeprefix("thunder.scope."): v for k, v in attributes.items()
                            if k.startswith("thunder.scope.")}
        parent_id = ids.get(parent)
        timed.append((start, seq, [{"type": "span", "id": ids[span_id], "name": title,
                                    "parent": parent_id if parent_id is not None and parent_id < ids[span_id] else None,
                                    "attributes": scope_attributes, "role": _str(attributes.get("thunder.role")),
                                    "start_ns": start}]))
        timed.append((end, seq + 1, [{"type": "span_end", "id": ids[span_id], "end_ns": end}]))
        seq += 2
    profiled: dict[int, list[dict]] = {}
    for run in process.profiled.values():
        profiled.setdefault(run["compile"], []).append(run)
    next_prov = 1
    for compile_id, span in sorted(process.compiles.items(), key=lambda item: item[1]["start"]):
        records, next_prov = _compile(compile_id, span, process.phases.get(compile_id, {}),
                                      profiled.pop(compile_id, []), next_prov)
        timed.append((span["start"], seq, records))
        seq += 1
    for compile_id, executor, fusion, trace, start, end in process.executors.values():
        if compile_id in process.compiles:
            timed.append((max(start, process.compiles[compile_id]["end"]), seq, [{
                "type": "executor_compile", "compile": compile_id, "executor": executor, "fusion": fusion,
                "trace": trace, "start_ns": start, "end_ns": end}]))
            seq += 1
    for start, end, role, module, op in process.waits.values():  # written as blocked a second in, done at its end
        blocked = min(start + _NOTICE_NS, end)
        timed.append((blocked, seq, [wait_record("blocked", role, module, op, start, blocked)]))
        timed.append((end, seq + 1, [wait_record("done", role, module, op, start, end, (end - start) / 1e9)]))
        seq += 2
    timed.sort(key=lambda t: (t[0], t[1]))
    for _time, _seq, records in timed:
        yield from records


def _compile(compile_id: int, span: dict, phases: dict[bytes, tuple], runs: list[dict],
             next_prov: int) -> tuple[list[dict], int]:
    """A compile span's records: its start, recompile, phases, end or error, then its profile."""
    a = span["attributes"]
    start, end = span["start"], span["end"]
    call = _frame(a)
    out: list[dict] = [{"type": "compile_start", "compile": compile_id, "fn": str(a.get("thunder.function") or "?"),
                        "index": _int(a.get("thunder.compile_index")) or 0,
                        "is_module": bool(a.get("thunder.is_module")), "time_ns": start, "jit_stack": [],
                        "call_stack": [call] if call else []}]
    reason = a.get("thunder.recompile.reason")
    if isinstance(reason, str):
        reasons = [r for r in a.get("thunder.recompile.reasons") or () if isinstance(r, str)] or [reason]
        diverged = _int(a.get("thunder.recompile.diverged_from"))
        out.append({"type": "recompile", "compile": compile_id, "time_ns": start, "call": call, "reason": reason,
                    "rejected": [{"compile": diverged if i == 0 else None, "reason": r, "subject": None, "changes": [],
                                  "check": None, "error": ""} for i, r in enumerate(reasons)], "more": 0})
    if phases:
        out.append({"type": "phases", "compile": compile_id, "start_ns": start, "end_ns": end,
                    "phases": _phase_rows(phases, span["id"])})
    seconds = (end - start) / 1e9
    exception = next((e for e in span["events"] if e[0] == "exception"), None)
    if "thunder.capture_disabled" in a:
        out.append({"type": "capture_disabled", "compile": compile_id, "time_ns": end,
                    "hook": str(a["thunder.capture_disabled"]), "error": str(a.get("thunder.capture_disabled.error")
                                                                             or "")})
    elif span["error"] or exception is not None:
        info = exception[1] if exception is not None else {}
        out.append({"type": "compile_error", "compile": compile_id, "time_ns": end, "seconds": seconds,
                    "error_type": str(info.get("exception.type") or "?"),
                    "message": str(info.get("exception.message") or span["message"]),
                    "traceback": str(info.get("exception.stacktrace") or ""), "last_prov": None})
    else:
        final = {"ops": a.get("thunder.ops"), "with_provenance": a.get("thunder.coverage.with_provenance"),
                 "compute": a.get("thunder.coverage.compute"),
                 "compute_with_user_source": a.get("thunder.coverage.compute_with_user_source"),
                 "fusions": a.get("thunder.fusions")}
        if "thunder.coverage.compute_at_module_file" in a:  # schema 1.9's, where the exporter had it
            final["compute_at_module_file"] = a["thunder.coverage.compute_at_module_file"]
        log_seconds = a.get("thunder.log_seconds")
        out.append({"type": "compile_end", "compile": compile_id, "status": "ok", "time_ns": end, "seconds": seconds,
                    "log_seconds": log_seconds if type(log_seconds) is float else None, "cache": None,
                    "final": {k: v for k, v in final.items() if type(v) is int}})  # a count spans lack: malformed
    provs, profile, next_prov = _profile(compile_id, runs, next_prov)
    return [*provs, *out, *profile], next_prov  # its lines' records before its start, its profile after its end


def _phase_rows(phases: dict[bytes, tuple], root: bytes) -> list[list]:
    """[name, start, end, depth, detail] by start; depth from the parent chain of phase spans."""
    rows = []
    for span_id, parent, name, start, end, detail in phases.values():
        depth, seen = 0, {span_id}
        while parent in phases and parent not in seen and parent != root and depth < 64:
            seen.add(parent)
            parent = phases[parent][1]
            depth += 1
        rows.append([name, start, end, depth, detail])
    rows.sort(key=lambda r: (r[1], r[3]))
    return rows[:4096]


def _profile(compile_id: int, runs: list[dict], next_prov: int) -> tuple[list[dict], list[dict], int]:
    """A compile's profiled runs as profile records: per trace, one "op" per top line any of its
    runs named (with a prov record whose source is that line: a backward line's is a backward op,
    its recompute time counted as backward) and one for the rest of each run's ops. (prov records,
    profile records, the next prov id)."""
    provs: list[dict] = []
    records: list[dict] = []
    for trace in ("forward", "backward"):
        # a run that read the CUDA allocator is no measured run, and its span has no per-op readings: left out
        mine = sorted((r for r in runs if r.get("thunder.trace") == trace
                       and r.get("thunder.profile.excluded") != "memory"), key=lambda r: r["start"])[:1024]
        if not mine:
            continue
        lines: dict[str, tuple[int, int | None]] = {}  # line key -> its op's position, its prov id
        for run in mine:
            keys, texts = _list(run.get("thunder.top_lines")), _list(run.get("thunder.top_lines.text"))
            for i, key in enumerate(keys[:64]):
                if not isinstance(key, str) or key in lines:
                    continue
                file, _, line = key.rpartition(":")
                prov = None
                if key == BOOKKEEPING:  # del, return, unpack: a record of their kind, without a line
                    prov, next_prov = next_prov, next_prov + 1
                    provs.append({"type": "prov", "id": prov, "kind": Kind.BOOKKEEPING, "source": [], "module": None,
                                  "module_type": None, "transforms": [], "role": None, "span": None,
                                  "derived_from": None, "members": []})
                elif file and (number := int_of_text(line)) is not None and len(line) < 10:
                    text = texts[i] if i < len(texts) and isinstance(texts[i], str) else ""
                    function = run.get("code.function.name") if i == 0 else None
                    prov, next_prov = next_prov, next_prov + 1
                    provs.append({"type": "prov", "id": prov, "kind": Kind.OP if trace == "forward" else Kind.BACKWARD,
                                  "source": [[file, number, function if isinstance(function, str) else "?", text,
                                              True]], "module": None, "module_type": None, "transforms": [],
                                  "role": None, "span": None, "derived_from": None, "members": []})
                lines[key] = (len(lines), prov)
        ops = [[position, "(top line)" if prov is not None else key[:200], prov, None]
               for key, (position, prov) in lines.items()]
        ops.append([len(ops), "(other ops)", None, None])
        clock = mine[0].get("thunder.clock")
        records.append({"type": "profile_ops", "compile": compile_id, "trace": trace,
                        "list": "computation" if trace == "forward" else "backward", "index": None,
                        "clock": clock if clock in ("cpu", "cuda") else "cpu", "requested": len(mine), "ops": ops})
        for run in mine:
            wall = run["end"] - run["start"]
            op_ns = [0] * len(ops)
            for key, ms in zip(_list(run.get("thunder.top_lines")), _list(run.get("thunder.top_lines.ms"))):
                if isinstance(key, str) and key in lines and type(ms) in (int, float) and 0 <= ms < 1e12:
                    op_ns[lines[key][0]] = int(ms * 1e6)
            coverage = run.get("thunder.coverage")
            timed = int(wall * coverage) if type(coverage) in (int, float) and 0 <= coverage <= 1 else wall
            op_ns[-1] = max(0, timed - sum(op_ns[:-1]))
            call = _int(run.get("thunder.call"))
            compiled = [str(c)[:200] for c in _list(run.get("thunder.profile.compiled"))[:16]]
            records.append({"type": "profile_call", "compile": compile_id, "trace": trace,
                            "call": call if call is not None else 0, "wall_ns": wall, "op_ns": op_ns,
                            "host_ns": None, "time_ns": run["end"],
                            **({"compiled": [[c, "?", 0] for c in compiled]} if compiled else {})})
    return provs, records, next_prov


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


@dataclass
class Rebuilt:
    """What `rebuild` made of the exports among a report's inputs."""

    files: list[Path] = field(default_factory=list)  # the logs rebuilt, one per process
    headers: list[dict] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # the input's files passed over, exports left out
    exports: list[Path] = field(default_factory=list)
    covered: list[OtlpProcess] = field(default_factory=list)  # processes whose own JSONL log is given
    problems: list[tuple[str, str, int | None, str, str, int]] = field(default_factory=list)  # for Problems.add
    notes: list[str] = field(default_factory=list)  # for stderr


def rebuild(path: str | os.PathLike[str], skipped: list[tuple[Path, str]], headers: list[dict | None],
            spool: Callable[[], Path], logs: Iterable[Path] = (), exports: list[Path] | None = None) -> Rebuilt:
    """The OTLP/JSON exports at `path` (a file, or the files of a directory, told by content) read
    and written into `spool()` (called only if there are any) as one log per process, less the
    processes whose JSONL log is among `headers` (merged: the log holds all their spans do);
    `skipped`: the files the log reader passed over, of which the exports are taken out; `logs`:
    the logs `headers` are of; `exports`: `otlp_files(path, logs)`, if the caller has looked already."""
    if exports is None:
        exports = otlp_files(path, logs)
    found = Rebuilt(skipped=[(p, r) for p, r in skipped if p not in exports], exports=exports)
    if not exports:
        return found
    export = OtlpExport()
    for file in exports:
        export.read(file)
    found.covered = export.covered_by(headers)
    for file, header in export.logs(spool()):
        found.files.append(file)
        found.headers.append(header)
    if not export.processes and not found.covered:
        found.skipped += [(p, "an OTLP/JSON export without thunder-provenance spans") for p in exports]
    found.problems = [(p.category, p.file, p.line, p.reason, p.text, 1) for p in export.problems]
    if export.problem_count > len(export.problems):
        more = export.problem_count - len(export.problems)
        found.problems.append(("bad line", "+".join(p.name for p in exports)[:200], None,
                               f"{more} more bad lines or spans not listed", "", more))
    if export.dropped_processes:
        found.problems.append(("bad line", "+".join(p.name for p in exports)[:200], None,
                               f"spans of more than {MAX_PROCESSES} processes: those of the rest not read", "",
                               export.dropped_processes))
    if export.orphans:
        found.problems.append(("malformed span", "+".join(p.name for p in exports)[:200], None,
                               f"{export.orphans} phase, executor compile or profiled span(s) of compiles whose "
                               "thunder.compile span is not in the export: left out", "", export.orphans))
    if found.covered:
        found.notes.append(f"{len(found.covered)} process(es) of the OTel export merged with their JSONL log "
                           f"(the log holds all their spans do): " + "; ".join(p.label for p in found.covered[:4]))
    fx = sum(p.other for p in export.processes.values())
    if fx:
        found.notes.append(f"{fx} ThunderFX graph, piece and phase span(s) not rebuilt (their page needs the log)")
    if export.foreign:
        found.notes.append(f"{export.foreign} span(s) of other instrumentation in the OTel export left out")
    return found

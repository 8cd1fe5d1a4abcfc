"""A TORCH_TRACE directory given beside THUNDER_TRACE's logs (`thunder-trace report DIR TORCH_DIR`):
torch's structured trace of the same processes, merged into their logs as `torch_trace` records.

A run made with `TORCH_TRACE=dir` (tlparse's input) and THUNDER_TRACE, but without our own capture
of torch's trace (THUNDER_TRACE_TORCH=0, or a log written before schema 1.9), still gets each Dynamo
graph's guards, output graph, AOT graphs, inductor code, symbolic shapes, cache outcomes and metrics
on its page. A TORCH_TRACE log is glog lines, `V1206 02:18:29.123456 4242 torch/_dynamo/x.py:12] {json}`,
each artifact's payload on the lines after it, each line of it after a tab. Its process is the pid
every line names; it is merged into the THUNDER_TRACE log of that pid (and of that rank, where the
file name says one: `dedicated_log_torch_trace_rank_1_*.log`). Each line becomes a record by the
record's own encoder (provenance.dynamo.torch_trace.Encoder, as the capture makes them), and only the
frame compiles that made a ThunderFX graph in that log are kept (as the capture keeps them), less any
whose torch_trace records the log already has.

The merged log is a copy of the log with those records after it, written into the report's spool (the
logs given are never written to). Untrusted input: a line that is not glog's, a record whose JSON does
not parse or nests deeper than the encoder's MAX_NESTING levels, a payload line before any record, a
line past MAX_LINE bytes are counted as bad lines; a record's payload is held to MAX_PAYLOAD_BYTES (the
rest counted), and what is kept is bounded by the encoder (MAX_PAYLOAD characters a record, MAX_TOTAL
per process).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from provenance.core import usercode
from provenance.dynamo.torch_trace import MAX_NESTING, MAX_PAYLOAD, Encoder, nests_past
from provenance.report.plural import plural

__all__ = ["MAX_LINE", "Merged", "merge", "torch_logs"]

MAX_LINE = 16 << 20  # bytes of one line of a TORCH_TRACE log (torch's metadata is "less than 1 MB")
MAX_FILES = 4096  # TORCH_TRACE logs looked at in a directory
MAX_LISTED = 20  # bad lines listed per file; the rest are counted
MAX_PAYLOAD_BYTES = 4 * MAX_PAYLOAD + 4  # of a record's payload held: enough for the encoder's cut (UTF-8)
# glog's prefix (torch's TorchLogsFormatter for its trace), then the record's JSON
_LINE = re.compile(rb"^(?:\[rank\d+\]:)?[VIWEFC](?P<month>\d\d)(?P<day>\d\d) (?P<clock>\d\d:\d\d:\d\d)\.(?P<us>\d{6})"
                   rb" +(?P<pid>\d{1,10}) \S+:\d+\](?: \[[^\]\n]*\])* (?P<json>\{.*)$")
_RANK = re.compile(r"^dedicated_log_torch_trace_rank_(\d{1,9})_")


@dataclass
class Merged:
    """What `merge` made of a TORCH_TRACE directory."""

    files: dict[Path, Path] = field(default_factory=dict)  # a log given -> its merged copy
    problems: list[tuple[str, str, int | None, str, str, int]] = field(default_factory=list)  # for Problems.add
    notes: list[str] = field(default_factory=list)  # for stderr


def torch_logs(path: str | os.PathLike[str]) -> list[Path]:
    """The TORCH_TRACE logs at `path` (a file, or a directory's *.log files, links not followed),
    told by their first line."""
    path = Path(path)
    if path.is_file():
        candidates = [path]
    elif path.is_dir():
        candidates = [p for p in sorted(path.glob("*.log"))[:MAX_FILES] if p.is_file() and not p.is_symlink()]
    else:
        raise FileNotFoundError(f"no TORCH_TRACE log at {str(path)!r}")
    found = []
    for candidate in candidates:
        try:
            with open(candidate, "rb") as f:
                if _LINE.match(f.readline(MAX_LINE).rstrip(b"\n")):
                    found.append(candidate)
        except OSError:
            continue
    return found


@dataclass
class _Line:
    pid: int
    time_ns: int
    metadata: object
    payload: str | None
    number: int  # the record's line in its file
    whole: int | None = None  # the payload's length where only its start was held


class _TorchLog:
    """One TORCH_TRACE log, read as its records (each with its payload), its bad lines counted."""

    def __init__(self, path: Path, year: int) -> None:
        self.path, self.year = path, year
        self.bad: list[tuple[int, str, str]] = []  # the first MAX_LISTED: (line, reason, text)
        self.bad_count = 0
        self.pid: int | None = None

    def bad_line(self, number: int, reason: str, text: bytes) -> None:
        self.bad_count += 1
        if len(self.bad) < MAX_LISTED:
            self.bad.append((number, reason, text[:200].decode("utf-8", "replace")))

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        with open(self.path, "rb") as f:
            number = 0
            while True:
                line = f.readline(MAX_LINE)
                if not line:
                    return
                number += 1
                if not line.endswith(b"\n") and len(line) == MAX_LINE:
                    while (rest := f.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                        pass
                    self.bad_line(number, f"a line longer than {MAX_LINE} bytes", line)
                    continue
                yield number, line.rstrip(b"\n")

    def records(self) -> Iterator[_Line]:
        """Each record with its payload: at most MAX_PAYLOAD_BYTES of it held (the rest only counted)."""
        head: re.Match[bytes] | None = None
        start, payload, size = 0, [], -1  # size: the payload's bytes, its newlines included
        for number, line in self._lines():
            if line.startswith(b"\t"):
                if head is None:
                    self.bad_line(number, "a payload line before any record", line)
                else:
                    if size + len(line) <= MAX_PAYLOAD_BYTES:
                        payload.append(line[1:])
                    size += len(line)
                continue
            if head is not None:
                found = self._record(head, start, payload, size)
                if found is not None:
                    yield found
            head, start, payload, size = _LINE.match(line), number, [], -1
            if head is None and line.strip():
                self.bad_line(number, "not a line of torch's structured trace", line)
        if head is not None:
            found = self._record(head, start, payload, size)
            if found is not None:
                yield found

    def _record(self, head: re.Match[bytes], number: int, payload: list[bytes], size: int) -> _Line | None:
        try:
            metadata = orjson.loads(head["json"])
        except orjson.JSONDecodeError:
            self.bad_line(number, "its JSON does not parse", head["json"])
            return None
        if nests_past(metadata, MAX_NESTING):  # more than the record's encoder keeps (or orjson writes)
            self.bad_line(number, f"its JSON nests deeper than {MAX_NESTING} levels", head["json"])
            return None
        pid = int(head["pid"])
        if self.pid is None:
            self.pid = pid
        try:  # glog's local time, without its year: the log's
            when = time.strptime(f"{self.year} {head['month'].decode()}{head['day'].decode()} "
                                 f"{head['clock'].decode()}", "%Y %m%d %H:%M:%S")
            time_ns = (int(time.mktime(when)) * 1_000_000 + int(head["us"])) * 1000
        except (ValueError, OverflowError):
            time_ns = 0
        kept = b"\n".join(payload)
        text = kept.decode("utf-8", "replace") if payload else None
        # past what was held, the rest counted in bytes: the whole length, as near as it can be known
        whole = len(text) + size - len(kept) if text is not None and size > len(kept) else None
        return _Line(pid, time_ns, metadata, text, number, whole)


def _known(log: Path) -> tuple[set[str], set[str]]:
    """The compile ids of the log's ThunderFX frame compiles (its Dynamo graphs', and since schema 1.11 those
    that made none), and those it already has torch_trace records of."""
    graphs: set[str] = set()
    traced: set[str] = set()
    with open(log, "rb") as f:
        for line in f:
            if b'"dynamo_graph"' not in line and b'"torch_trace"' not in line and b'"frame_compile"' not in line:
                continue
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(data, dict) and isinstance(data.get("compile_id"), str):
                if data.get("type") in ("dynamo_graph", "frame_compile"):
                    graphs.add(data["compile_id"])
                elif data.get("type") == "torch_trace":
                    traced.add(data["compile_id"])
    return graphs, traced


def _year(header: dict | None, log: Path) -> int:
    stamp = header.get("time_ns") if isinstance(header, dict) else None
    seconds = stamp / 1e9 if type(stamp) is int and 0 < stamp < 1 << 62 else log.stat().st_mtime
    return time.localtime(seconds).tm_year


def _is_user(path: str) -> bool:
    return not usercode.is_library_path(path)


def _target(file: Path, pid: int | None, logs: list[Path], headers: list[dict | None]) -> Path | str:
    """The THUNDER_TRACE log of the TORCH_TRACE log's process, or why there is none."""
    if pid is None:
        return "no record"
    same = [(f, h) for f, h in zip(logs, headers) if isinstance(h, dict) and h.get("pid") == pid]
    rank = _RANK.match(file.name)
    if rank is not None and len(same) > 1:
        same = [(f, h) for f, h in same if h is not None and h.get("rank") == int(rank[1])]
    if len(same) == 1:
        return same[0][0]
    return f"no THUNDER_TRACE log of pid {pid}" if not same else f"{len(same)} THUNDER_TRACE logs of pid {pid}"


def merge(path: str | os.PathLike[str], logs: list[Path], headers: list[dict | None],
          spool: Callable[[], Path]) -> Merged:
    """The TORCH_TRACE logs at `path` merged into the THUNDER_TRACE logs of their processes: a copy of
    each such log, in `spool()`, with the records of its ThunderFX graphs after it."""
    found = Merged()
    files = torch_logs(path)
    if not files:
        raise FileNotFoundError(f"no TORCH_TRACE log (glog lines of torch's structured trace) in {str(path)!r}")
    for file in files:
        with open(file, "rb") as f:
            first = _LINE.match(f.readline(MAX_LINE).rstrip(b"\n"))
        target = _target(file, int(first["pid"]) if first else None, logs, headers)
        if isinstance(target, str):
            found.notes.append(f"{file.name}: {target}: not merged (tlparse reads it)")
            continue
        if target in found.files:
            found.notes.append(f"{file.name}: a second TORCH_TRACE log of {target.name}'s process: not merged")
            continue
        header = headers[logs.index(target)]
        graphs, traced = _known(target)
        directory = spool() / f"torch-{len(found.files)}"
        directory.mkdir()
        merged = directory / target.name
        reader = _TorchLog(file, _year(header, target))
        encoder = Encoder(_is_user)
        kept = other = already = 0
        with open(target, "rb") as source, open(merged, "wb") as out:
            shutil.copyfileobj(source, out)
            if out.tell() and not _ends_with_newline(target):
                out.write(b"\n")  # the log's truncated tail stays a line of its own
            for record in reader.records():
                if record.pid != reader.pid:
                    reader.bad_line(record.number, f"a record of pid {record.pid} in pid {reader.pid}'s log", b"")
                    continue
                event = encoder.encode(record.metadata, record.payload, record.time_ns, record.whole)
                if event is None:
                    continue
                if event["compile_id"] in traced:
                    already += 1
                    continue
                if event["compile_id"] not in graphs:
                    other += 1
                    continue
                out.write(orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS) + b"\n")
                kept += 1
        found.files[target] = merged
        for number, reason, text in reader.bad:
            found.problems.append(("bad line", file.name, number, reason, text, 1))
        if reader.bad_count > len(reader.bad):
            more = reader.bad_count - len(reader.bad)
            found.problems.append(("bad line", file.name, None, f"{more} more bad lines not listed", "", more))
        left = [f"{plural(already, 'artifact')} the log already holds (THUNDER_TRACE captured torch's trace)"] \
            if already else []
        left += [f"{plural(other, 'artifact')} of frame compiles that were not ThunderFX's"] if other else []
        skipped = f" (left out: {'; '.join(left)})" if left else ""
        found.notes.append(f"{file.name}: {plural(kept, 'artifact')} of torch's trace merged into "
                           f"{target.name}{skipped}")
    return found


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


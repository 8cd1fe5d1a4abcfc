"""An incremental report: a report's OUT keeps what it needs to take up the logs where they grew.

A report reads each log once, in order; its state is all in memory. So while it reads, it keeps that
state (`OUT/.thunder-trace-state/`) at one place of each log: the start of its last compile that no
other compile was open around (`last_start`, found from the end of the file before the pass), which
is where a log that grows takes up again: the compile that ended last waits there for its first
call's executor compiles, so it is read again with what came after it. A later report of the same
logs (the same inputs, this code) then:

- finds the first log that changed since: grew, was rewritten, truncated or replaced (each log's
  bytes read are keyed by their CRC-32, checked byte for byte: `_crc`), or a log added or removed;
- takes up the state kept in that log (or, if what changed lies before it, the one before), deletes
  what the report wrote after that point, puts back the pages the end of the run rewrote (desync
  banners: `pristine`), and reads on from there: that log's rest and every log after it;
- writes the run's pages, the Perfetto trace and compile_directory.json from the whole run again.

The result is the report a fresh build of the same logs writes, byte for byte
(tests/report/test_incremental.py diffs them); OUT's state directory aside. Whatever makes that
uncertain builds the whole report instead, and says why: another version of this code, other
inputs, a report that did not end, a user source file shown that changed, read-ahead records
(profiles: they belong to earlier compiles) in the part to read again.

Two reports never write one OUT at once: the second is refused (`OutLock`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import pickle
import re
import shutil
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from provenance.report.read.coerce import hashable
from provenance.report.render.files import is_temporary, write_whole, written_whole

__all__ = ["STATE_DIR", "Busy", "Keeper", "OutLock", "Plan", "last_start", "plan"]

STATE_DIR = ".thunder-trace-state"
FORMAT = 1
_STATE = "state.json"
_PERFETTO, _DIRECTORY = "perfetto.spool", "directory.spool"
_PRISTINE = "pristine"  # pages as written before the run's end rewrote them (desyncs)
_HOLDER = "writer"  # the pid of the report holding the lock
CHUNK = 1 << 20
MAX_KEPT_LOGS = 8  # logs of a run whose state is kept (and the last log's)
MAX_BACK = 256 << 20  # how far from a log's end its last compile start is looked for
_COMPILE = b'{"type":"compile_'
_STARTS = b'{"type":"compile_start"'
_ENDS = (b'{"type":"compile_end"', b'{"type":"compile_error"')


class Busy(Exception):
    """Another report holds OUT."""


class OutLock:
    """An exclusive lock on OUT itself (flock on the directory: nothing beside OUT is written, and
    --overwrite empties OUT instead of replacing it, so the lock stays on the directory written)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            holder = _read_text(out / STATE_DIR / _HOLDER).strip()
            raise Busy(f"another thunder-trace report{f' (pid {holder})' if holder.isdigit() else ''} is writing "
                       f"{out}; nothing was written: run it again when that one has ended, or choose another -o DIR"
                       ) from None
        state = out / STATE_DIR
        state.mkdir(exist_ok=True)
        (state / _HOLDER).write_text(f"{os.getpid()}\n")

    def release(self) -> None:
        if self._fd >= 0:
            try:
                (self.out / STATE_DIR / _HOLDER).unlink(missing_ok=True)
            except OSError:
                pass
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = -1


def _read_text(path: Path) -> str:
    try:
        return path.read_text()[:100]
    except (OSError, UnicodeDecodeError):
        return ""


@functools.cache
def code_version() -> str:
    """A hash of this package's files (code, templates): a report kept by other code is not resumed.
    Once per process: the code running is the code this process imported."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".html", ".js", ".css", ".bin") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def last_start(path: str | os.PathLike[str], size: int) -> int | None:
    """The offset of the last `compile_start` line of a log's first `size` bytes such that every
    compile that ends after it began at or after it (None: no such line within MAX_BACK of the
    end). A compile begun before it that never ends is found by the pass, which keeps no state there.
    Read backwards a chunk at a time, only the compile records' lines looked at (a log of short lines
    costs no object per line)."""
    ended: set[Any] = set()
    begun: set[Any] = set()
    with open(path, "rb") as f:
        end = size
        tail = b""  # the start of a line cut by the chunk read before (later in the file)
        while end > 0 and size - end < MAX_BACK:
            start = max(0, end - CHUNK)
            f.seek(start)
            data = f.read(end - start) + tail
            cut = data.find(b"\n") + 1 if start else 0  # the first line may begin in the chunk before
            if start and not cut:
                tail, end = data, start
                continue
            last = len(data)
            if end == size and not data.endswith(b"\n"):  # a last line without its newline: not a record yet
                last = data.rfind(b"\n") + 1
            at = last
            while (at := data.rfind(_COMPILE, cut, at)) >= 0:
                if at > cut and data[at - 1] != 10:  # not at a line's start
                    continue
                stop = data.find(b"\n", at, last)
                line = data[at:stop if stop >= 0 else last]
                if not (line.startswith(_STARTS) or line.startswith(_ENDS)):
                    continue
                try:
                    cid = hashable(orjson.loads(line).get("compile"))
                except (orjson.JSONDecodeError, AttributeError):
                    continue
                if line.startswith(_STARTS):
                    begun.add(cid)
                    if ended <= begun:
                        return start + at  # data begins at the file's offset `start`
                else:
                    ended.add(cid)
            tail, end = data[:cut], start
    return None


def _crc(path: Path, checks: Sequence[int]) -> list[int] | None:
    """The CRC-32 of `path`'s first n bytes for each n of `checks` (increasing), read once into one
    buffer (no new bytes per block; a mapping would count the whole file in the process's memory);
    None if the file is shorter than the last."""
    crcs, crc, done = [], 0, 0
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        with open(path, "rb") as f:
            for n in checks:
                while done < n:
                    got = f.readinto(view[: min(len(buffer), n - done)])
                    if not got:
                        return None
                    crc = zlib.crc32(view[:got], crc)
                    done += got
                crcs.append(crc)
    except OSError:
        return None
    finally:
        view.release()
    return crcs


@dataclass
class Resume:
    """Where a report takes up: the state kept in log `log` at its offset."""

    log: int
    offset: int
    snapshot: dict[str, Any]
    entries: list[dict[str, Any]]  # state.json's entries of the logs before `log`, unchanged

    @property
    def done(self) -> int:
        """The bytes of the logs read before (not read again)."""
        return self.snapshot["done_before"] + self.offset

    def __post_init__(self) -> None:
        self.compiles = len(self.snapshot["run"]["summaries"])  # ended before (not read again)


@dataclass
class Plan:
    same_inputs: bool = False  # OUT holds a report of these inputs (written over in place without --overwrite)
    up_to_date: bool = False
    resume: Resume | None = None
    why: str = ""  # why the whole report is built (a report of these inputs that cannot be taken up)
    problems: int = 0  # up to date: the bad input the report lists


_PAGE = re.compile(r"compiles/[A-Za-z0-9_.-]+\.html")
_PICKLE = re.compile(r"log-\d{1,9}\.pickle")


def _check(snapshot: Any, keep: dict[str, Any]) -> None:
    """What the report takes from a state it loaded is of the shapes it wrote (OUT may come from anywhere)."""
    if not (isinstance(snapshot, dict) and isinstance(snapshot.get("run"), dict)
            and isinstance(snapshot.get("file"), dict)
            and type(snapshot.get("done_before")) is int and isinstance(snapshot.get("manifest"), list)
            and all(isinstance(p, str) and ".." not in p.split("/") and not p.startswith("/")
                    for p in snapshot["manifest"])
            and type(snapshot.get("directory")) is int and isinstance(snapshot.get("perfetto"), tuple)
            and type(keep.get("offset")) is int and _PICKLE.fullmatch(str(keep.get("file")))):
        raise ValueError("a state of another shape")


def plan(out: Path, inputs: dict[str, Any], logs: Sequence[tuple[str, Path]],
         read_ahead_in: Callable[[Path, int], bool], preamble: list[Any]) -> Plan:
    """What to do with OUT for `logs` ((name, file) each: the name is the log as given; the file is
    what is read, a merged copy maybe): `read_ahead_in(file, offset)`: the file has read-ahead
    records past `offset`; `preamble`: what the report lists before the logs' own problems (the
    files passed over, an export's bad lines)."""
    state_dir = out / STATE_DIR
    try:
        state = orjson.loads((state_dir / _STATE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return Plan()
    if not isinstance(state, dict) or state.get("format") != FORMAT or state.get("inputs") != inputs:
        return Plan()
    if state.get("code") != code_version():
        return Plan(True, why="it was made by another version of thunder-trace")
    if not state.get("complete"):
        return Plan(True, why="the report there did not end")
    if state.get("preamble") != preamble:
        return Plan(True, why="the files passed over in the input changed")
    old = state.get("logs")
    if not isinstance(old, list) or not all(isinstance(e, dict) for e in old):
        return Plan(True, why="its state is unreadable")
    try:
        return _take_up(state, old, state_dir, logs, read_ahead_in)
    except (TypeError, ValueError, KeyError, AttributeError, OSError):
        return Plan(True, why="its state is unreadable")


def _take_up(state: dict[str, Any], old: list[dict[str, Any]], state_dir: Path, logs: Sequence[tuple[str, Path]],
             read_ahead_in: Callable[[Path, int], bool]) -> Plan:
    changed = None  # the first log that is not as it was read
    for i, (name, path) in enumerate(logs):
        entry = old[i] if i < len(old) else None
        if entry is None or entry.get("name") != name:
            changed = i
            if entry is not None:  # another log is there now (one was added or removed before it): its
                entry["checkpoint"] = None  # state is not this log's
            break
        keep = entry.get("checkpoint") or {}
        checks = sorted({n for n in (keep.get("offset"), entry.get("size")) if isinstance(n, int)})
        crcs = _crc(path, checks)
        found = dict(zip(checks, crcs)) if crcs is not None else {}
        if found.get(entry.get("size")) != entry.get("crc") or path.stat().st_size != entry.get("size"):
            changed = i
            if isinstance(keep.get("offset"), int) and found.get(keep["offset"]) != keep.get("crc"):
                entry["checkpoint"] = None  # changed before its checkpoint, too
            break
    else:
        if len(old) == len(logs):
            stale = _sources_changed({os.fsdecode(bytes.fromhex(h)): st for h, st in state.get("sources") or ()})
            problems = state.get("problems")
            return Plan(True, up_to_date=stale is None, why=f"{stale} changed" if stale else "",
                        problems=problems if type(problems) is int else 0)
        changed = len(logs)
    for i in range(min(changed, len(old) - 1), -1, -1):
        keep = old[i].get("checkpoint")
        if not keep:
            continue
        path = logs[i][1]
        if read_ahead_in(path, keep["offset"]):
            continue  # profile records come after their compile: a page before the offset may change
        try:
            snapshot = load_state(state_dir / keep["file"])
            _check(snapshot, keep)
        except Exception:  # a state that does not load is not used
            continue
        stale = _sources_changed(snapshot.get("sources") or {})
        if stale:
            return Plan(True, why=f"{stale} changed")
        return Plan(True, resume=Resume(i, keep["offset"], snapshot, old[:i]))
    return Plan(True, why="no state was kept before the logs changed")


class _StateUnpickler(pickle.Unpickler):
    """Only the report's own data classes and plain containers: OUT may come from anywhere, and a
    pickle that names any other callable (a function, a class of the standard library that acts)
    is refused, not run."""

    _BUILTINS = {("builtins", n) for n in ("set", "frozenset", "list", "dict", "tuple", "bytes", "bytearray")} | {
        ("collections", "OrderedDict"), ("collections", "Counter"), ("collections", "deque")}
    _MODULES = ("provenance.report.model", "provenance.report.analyze.", "provenance.report.read.",
                "provenance.core.record", "provenance.dynamo.")

    def find_class(self, module: str, name: str) -> Any:
        found = None
        if (module, name) in self._BUILTINS or module.startswith(self._MODULES):
            found = super().find_class(module, name)
        if not isinstance(found, type) or (module.startswith("provenance.") and _acts(found)):
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a report's state")
        return found


def _acts(cls: type) -> bool:
    """A class whose construction does more than hold data (opens files, starts processes)."""
    import dataclasses
    import enum

    return not (dataclasses.is_dataclass(cls) or issubclass(cls, (tuple, enum.Enum))
                or cls.__name__ in ("ProvTable", "FxGraphs", "CallSites", "TorchTraces", "Activity"))


def load_state(path: Path) -> Any:
    with open(path, "rb") as f:
        return _StateUnpickler(f).load()


def _report_files(out: Path) -> Iterator[str]:
    """The files of the report in `out`, relative to it: every one but its state's."""
    for root, dirs, files in os.walk(out):
        rel = os.path.relpath(root, out)
        if rel == STATE_DIR:
            dirs[:] = []
            continue
        for name in files:
            yield name if rel == "." else os.path.join(rel, name)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _sources_changed(stamps: dict[str, Any]) -> str | None:
    """A user source file the pages show from disk that is not as it was then."""
    for path, stamp in stamps.items():
        try:
            st = os.stat(path)
            now = [st.st_mtime_ns, st.st_size]
        except (OSError, ValueError):
            now = None
        if now != stamp:
            return f"the user file {path}"
    return None


@dataclass
class Keeper:
    """The state a report keeps in OUT while it builds (and, resuming, what it takes up)."""

    out: Path
    inputs: dict[str, Any]
    names: list[str]  # each log's name, as `plan` was given them
    preamble: list[Any]
    plan: Plan
    checkpoints: dict[int, int | None] = field(default_factory=dict)  # log -> where its state is kept
    _kept: dict[int, dict[str, Any]] = field(default_factory=dict)
    _spools: dict[str, IO[bytes]] = field(default_factory=dict)
    perfetto: Any = None  # the writers whose spools are kept: attach()
    directory: Any = None
    sources: Any = None
    pristine_pages: set[str] = field(default_factory=set)
    filled: dict[str, int] = field(default_factory=dict)  # pages whose final cache card is on disk: its CRC-32
    # OUT's files this build writes again or deletes, as they were (_identity): left in place until
    # the build ends, so a page open in a browser is never missing while the report is rebuilt
    stale: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def resume(self) -> Resume | None:
        return self.plan.resume

    @property
    def dir(self) -> Path:
        return self.out / STATE_DIR

    def begin(self) -> None:
        """Before the report writes: the state marked as not ended; resuming, OUT put back as it
        was at the resumed point (the rewritten pages restored; what was written after it is stale:
        written again or, at the end, deleted). Built whole, every file OUT holds is stale."""
        self.dir.mkdir(exist_ok=True)
        (self.dir / _HOLDER).write_text(f"{os.getpid()}\n")
        old = self._read_state()
        # until it ends, OUT holds a report of these inputs that did not end: the next one is built whole
        # (and needs no --overwrite), whatever stops this one
        self._write_state({"format": FORMAT, "code": code_version(), "inputs": self.inputs, "complete": False})
        if self.resume is None:
            for child in self.dir.iterdir():
                if child.name != _HOLDER:
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            self._mark_stale(_report_files(self.out))
            for name in (_PERFETTO, _DIRECTORY):
                self._spools[name] = open(self.dir / name, "w+b")
            return
        snap = self.resume.snapshot
        pristine = self.dir / _PRISTINE
        keep = set(snap["manifest"])
        earlier = (old or {}).get("filled")  # the pages written after the state are written again, unfilled
        self.filled = {page: crc for page, crc in earlier.items() if page in keep and type(crc) is int} if isinstance(
            earlier, dict) else {}
        if pristine.is_dir():
            for page in (old or {}).get("pristine") or ():
                if isinstance(page, str) and _PAGE.fullmatch(page) and page in keep and (pristine / page).is_file():
                    os.replace(pristine / page, self.out / page)
                    self.filled[page] = -1  # its card as it was then: written again, whatever it is now
            shutil.rmtree(pristine)
        self._mark_stale(path for path in _report_files(self.out) if path not in keep)
        for name, length in ((_PERFETTO, snap["perfetto"][1]), (_DIRECTORY, snap["directory"])):
            f = open(self.dir / name, "r+b")
            f.truncate(length)
            f.seek(length)
            self._spools[name] = f
        for kept in self.dir.glob("log-*.pickle"):  # the states of the logs read again
            if _PICKLE.fullmatch(kept.name) and int(kept.name[4:-7]) > self.resume.log:
                kept.unlink()

    def _mark_stale(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                self.stale[path] = _identity(os.stat(self.out / path))
            except OSError:
                pass

    def _left(self) -> set[str]:
        """The stale files this build has not written again (render/files.py: a file written is a new one)."""
        left = set()
        for path, was in self.stale.items():
            try:
                if _identity(os.stat(self.out / path)) == was:
                    left.add(path)
            except OSError:
                pass
        return left

    def _read_state(self) -> dict[str, Any] | None:
        try:
            state = orjson.loads((self.dir / _STATE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return state if isinstance(state, dict) else None

    def spools(self) -> tuple[IO[bytes], IO[bytes]]:
        """The Perfetto trace's and compile_directory.json's spools, kept in OUT (begin() opened them)."""
        return self._spools[_PERFETTO], self._spools[_DIRECTORY]

    def attach(self, perfetto: Any, directory: Any, sources: Any) -> None:
        self.perfetto, self.directory, self.sources = perfetto, directory, sources
        if self.resume is not None:
            perfetto.base_ns = self.resume.snapshot["perfetto"][0]
            sources.stamps.update(self.resume.snapshot.get("sources") or {})

    # -- what the run asks (analyze/ports.py's Keeper) ---------------------------------------------
    def checkpoint_at(self, log: int, path: str) -> int | None:
        """Where the run keeps its state in this log (found from the log's end, before its pass): in
        the first MAX_KEPT_LOGS logs and the last only (each state holds the run's so far, so one per
        log of a run of many would grow as the square of its logs; while a job runs, every log grows
        and the first one's is what is taken up)."""
        if MAX_KEPT_LOGS <= log < len(self.names) - 1:
            return None
        if log not in self.checkpoints:
            try:
                self.checkpoints[log] = last_start(path, os.path.getsize(path))
            except OSError:
                self.checkpoints[log] = None
        return self.checkpoints[log]

    def keep(self, log: int, state: dict[str, Any], offset: int, crc: int, summary_keys: Iterable[str]) -> None:
        """The run's state before the line at `offset` of log `log` (whose first `offset` bytes have
        CRC-32 `crc`): pickled, with what OUT holds then and the spools' lengths."""
        state["perfetto"] = (self.perfetto.base_ns, self.perfetto.spooled())
        state["directory"] = self.directory.spooled()
        state["sources"] = dict(self.sources.stamps)
        state["manifest"] = self._manifest(set(summary_keys))
        file = f"log-{log}.pickle"
        with written_whole(self.dir / file) as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        self._kept[log] = {"offset": offset, "crc": crc, "file": file}

    def _manifest(self, keys: set[str]) -> list[str]:
        """The files OUT holds now: a compile's only if it began before (worker processes may be
        ahead, writing later compiles' pages: those are written again when taken up)."""
        found = []
        left = self._left()
        for path in _report_files(self.out):
            folder, _, name = path.rpartition(os.sep)
            if path in left or is_temporary(name):  # not this build's; another process's, being written
                continue
            if folder == "compiles":
                key = name.removesuffix(".html").removesuffix("-source").removesuffix(".provs.js")
                if key not in keys:
                    continue
            found.append(path)
        return sorted(found)

    def pristine(self, page: str) -> None:
        """A compile page the run's end rewrites (a desync banner): its first version kept."""
        target = self.dir / _PRISTINE / page
        if page not in self.pristine_pages and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.out / page, target)
        self.pristine_pages.add(page)

    def finish(self, logs: Sequence[tuple[int, int]], filled: dict[str, int], problems: int) -> None:
        """The report ended: `logs`, (bytes read, their CRC-32) of each log read (the unchanged logs
        before a resumed one: as kept); `problems`: the bad input it lists."""
        for f in self._spools.values():
            f.close()
        self._delete_left()
        entries = list(self.resume.entries) if self.resume is not None else []
        for i in range(len(entries), len(self.names)):
            size, crc = logs[i]
            entries.append({"name": self.names[i], "size": size, "crc": crc, "checkpoint": self._kept.get(i)})
        state = {"format": FORMAT, "code": code_version(), "inputs": self.inputs, "complete": True,
                 "preamble": self.preamble, "logs": entries, "problems": problems,
                 # paths as bytes (hex): a file name need not be UTF-8
                 "sources": [[os.fsencode(p).hex(), st] for p, st in self.sources.stamps.items()],
                 "pristine": sorted(self.pristine_pages),
                 "filled": filled}
        self._write_state(state)

    def _delete_left(self) -> None:
        """The stale files not written again: what a fresh build would not have (and the folders
        that held only those; `compiles/` a report always has)."""
        folders = set()
        for path in self._left():
            (self.out / path).unlink(missing_ok=True)
            folders.add(os.path.dirname(path))
        for folder in sorted(folders, key=lambda f: -f.count(os.sep)):
            while folder and folder != "compiles":
                try:
                    os.rmdir(self.out / folder)
                except OSError:  # not empty
                    break
                folder = os.path.dirname(folder)

    def _write_state(self, state: dict[str, Any]) -> None:
        write_whole(self.dir / _STATE, orjson.dumps(state))

    def abandon(self) -> None:
        for f in self._spools.values():
            f.close()

"""An incremental report: a report's OUT keeps what it needs to take each log up where it grew.

A report reads each log once; what a log adds to the run is its own (analyze/run.py's LogPart), and
the run's pages are made from the logs' parts at the end. So while it reads a log, a report keeps
that log's part and its pass (`OUT/.thunder-trace-state/log-<i>.pickle`), with the log's share of the
Perfetto trace and of compile_directory.json (render/spools.py), at one place: the start of its last
compile that no other compile was open around (`last_start`, found from the end of the file before
the pass): the compile that ended last waits there for its first call's executor compiles, so it is
read again with what came after it. A later report of the same logs (the same inputs, this code) then,
for each log on its own:

- a log as it was (its bytes read keyed by their CRC-32) or grown past its kept place is taken up
  there: its part and pass loaded, its spools cut back, and only the rest read;
- a log rewritten before that place, replaced, added, or moved to another place in the run (a log
  added or removed before it) is read whole;

then writes the run's pages, the Perfetto trace and compile_directory.json from every log's part. The
result is the report a fresh build of the same logs writes, byte for byte (tests/report/test_incremental.py
diffs them); OUT's state directory aside. Whatever makes that uncertain builds the whole report, and
says why: another version of this code, other inputs, a user source file shown that changed.

OUT's state is data, not trust: whoever can write OUT can put any bytes there. So the state is
authenticated: state.json carries an HMAC-SHA256 (state.mac) under a key kept outside OUT, in the
user's own state directory (`$XDG_STATE_HOME/thunder-trace/state.key`, 0600), bound to OUT's path,
and names the SHA-256 of every pickle and spool it takes up. A state that fails any check is not used:
the report is built whole (or, where the earlier report cannot be told to be this user's, OUT is
refused without --overwrite) and says why. Paths come from the command line only (a state names
logs by the name given, checks them, and never supplies a path); files of the state directory are
opened without following links and only if regular; every read is bounded. Pickles are only loaded
once authenticated, through an unpickler that allows only the report's own data classes.

OUT is the user's: a report deletes only files a report wrote and recorded in the state as its own
(`files`), never anything else, with --overwrite too. Two reports never write one OUT at once: the
second is refused (`OutLock`).
"""

from __future__ import annotations

import dataclasses
import enum
import fcntl
import functools
import hashlib
import hmac
import io
import os
import pickle
import re
import secrets
import shutil
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from provenance.report.read.coerce import hashable
from provenance.report.render.files import open_regular, write_whole, written_whole
from provenance.report.render.spools import Spools

__all__ = ["STATE_DIR", "Busy", "Keeper", "OutLock", "Plan", "key_path", "last_start", "plan"]

STATE_DIR = ".thunder-trace-state"
FORMAT = 2
_STATE, _MAC = "state.json", "state.mac"
_PRISTINE = "pristine"  # pages as written before the run's end rewrote them (desyncs)
_HOLDER = "writer"  # the pid of the report holding the lock
CHUNK = 1 << 20
MAX_BACK = 256 << 20  # how far from a log's end its last compile start is looked for
MAX_STATE = 256 << 20  # bytes of state.json read
STATE_PER_LOG_BYTE = 8  # a log's pickle holds at most this many bytes per byte of the log read (+ MAX_STATE)
_COMPILE = b'{"type":"compile_'
_STARTS = b'{"type":"compile_start"'
_ENDS = (b'{"type":"compile_end"', b'{"type":"compile_error"')
_PAGE = re.compile(r"compiles/[A-Za-z0-9_.-]+\.html")
KINDS = ("start", "end")  # a log's two kept places: its last compile's start, and its end
_DIGEST = re.compile(r"[0-9a-f]{64}")
_LAYOUT = ("compiles", "graphs", "static")  # the report's folders (and files at OUT's top)


class Busy(Exception):
    """Another report holds OUT."""


class OutLock:
    """An exclusive lock on OUT itself (flock on the directory: nothing is created for it, so a
    refused OUT is left as it was; --overwrite writes over OUT in place, so the lock holds)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            holder = _read(out / STATE_DIR / _HOLDER, 100).decode(errors="replace").strip()
            raise Busy(f"another thunder-trace report{f' (pid {holder})' if holder.isdigit() else ''} is writing "
                       f"{out}; nothing was written: run it again when that one has ended, or choose another -o DIR"
                       ) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = -1


def _copy(source: Path, target: Path) -> bool:
    """A regular file copied whole, streamed (a page may be large), not through a link; whether it was."""
    try:
        f = open_regular(source)
    except OSError:
        return False
    with f:
        target.parent.mkdir(parents=True, exist_ok=True)
        with written_whole(target) as copy:
            shutil.copyfileobj(f, copy)
    return True


def _read(path: Path, limit: int) -> bytes:
    """A regular file's bytes (b"" if it is not one, cannot be read, or is longer than `limit`)."""
    try:
        with open_regular(path) as f:
            if os.fstat(f.fileno()).st_size > limit:
                return b""
            return f.read(limit + 1)[:limit]
    except OSError:
        return b""


# -- the key that authenticates OUT's state --------------------------------------------------------
def key_path() -> Path:
    """Where this user's key for reports' states lives: outside every OUT."""
    home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(home) / "thunder-trace" / "state.key"


@functools.cache
def _key(path: Path) -> bytes:
    """The key (made the first time, 32 random bytes, readable by its owner only). If it can be
    neither read nor made, one for this process only: its own rebuilds (--watch) are taken up, and a
    later report finds a state it cannot check (refused without --overwrite; the message says why)."""
    data = _read(path, 64)
    if len(data) == 32:
        return data
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:  # another report made it meanwhile (then it is read), or it cannot be made
        data = _read(path, 64)
        return data if len(data) == 32 else secrets.token_bytes(32)
    data = secrets.token_bytes(32)
    with open(fd, "wb") as f:
        f.write(data)
    return data


def _mac(key: bytes, out: Path, data: bytes) -> str:
    return hmac.new(key, os.fsencode(os.path.realpath(out)) + b"\0" + data, hashlib.sha256).hexdigest()


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


# -- the plan: what to do with OUT ----------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """Where a log's state is kept: its first `offset` bytes (CRC-32 `crc`) read; the pickle and the
    log's spools then (length and SHA-256 each), and its earliest Perfetto time. `kind`: at the start of
    its last compile (that compile is read again when taken up: executor compiles and profile records
    come after its end) or at the log's end (taken up only where nothing after it belongs to a compile
    before it)."""

    kind: str
    offset: int
    crc: int
    digest: str
    perfetto: tuple[int, str]
    directory: tuple[int, str]
    base_ns: int | None

    def file(self, log: int) -> str:
        return f"log-{log}.{self.kind}.pickle"

    def json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, raw: Any) -> Checkpoint | None:
        """From state.json (authenticated; still checked, as any data)."""
        if not isinstance(raw, dict):
            return None
        try:
            found = cls(raw["kind"], raw["offset"], raw["crc"], raw["digest"], tuple(raw["perfetto"]),
                        tuple(raw["directory"]), raw["base_ns"])
        except (KeyError, TypeError, ValueError):
            return None
        ints = (found.offset, found.crc, found.perfetto[0], found.directory[0])
        if not (found.kind in KINDS and all(type(n) is int and n >= 0 for n in ints)
                and len(found.perfetto) == len(found.directory) == 2
                and all(isinstance(d, str) and _DIGEST.fullmatch(d) for d in
                        (found.digest, found.perfetto[1], found.directory[1]))
                and (found.base_ns is None or type(found.base_ns) is int)):
            return None
        return found


def _ends_clean(path: Path, offset: int) -> bool:
    """Whether nothing after a log's end checkpoint belongs to a compile that ended before it: no executor
    compile (of the compile that ended last: its first call) nor profile record before the next compile
    starts. Only the bytes added are looked at."""
    with open(path, "rb") as f:
        f.seek(offset)
        seen = b""
        while block := f.read(CHUNK):
            seen = seen[-64:] + block
            start = seen.find(_STARTS)
            head = seen if start < 0 else seen[:start]
            if b'"type":"executor_compile"' in head or b'"type":"profile_' in head:
                return False
            if start >= 0:
                return True
    return True


@dataclass
class Plan:
    same_inputs: bool = False  # OUT holds a report of these inputs (written over in place without --overwrite)
    up_to_date: bool = False
    resume: dict[int, Checkpoint] = field(default_factory=dict)  # the logs taken up, where
    why: str = ""  # why the whole report is built (a report of these inputs that cannot be taken up)
    whole: dict[int, str] = field(default_factory=dict)  # logs read whole in a report taken up, and why
    problems: int = 0  # up to date: the bad input the report lists
    owned: list[str] = field(default_factory=list)  # the files the earlier report wrote (its state says)
    refused: str = ""  # OUT holds a state this user's thunder-trace did not write: why
    state: dict[str, Any] | None = None  # the earlier report's state (authenticated), when taken up
    kept: dict[int, list[Checkpoint]] = field(default_factory=dict)  # the states it kept, by log


def _authentic(out: Path) -> tuple[dict[str, Any] | None, str]:
    """OUT's state, if this user's thunder-trace wrote it for this OUT; else why not ("" if none is there)."""
    state_dir = out / STATE_DIR
    data = _read(state_dir / _STATE, MAX_STATE)
    if not data:
        return None, ""
    key = _key(key_path())
    if not hmac.compare_digest(_read(state_dir / _MAC, 100), _mac(key, out, data).encode()):
        return None, (f"its state cannot be checked: it was not written by this user's thunder-trace for this "
                      f"directory (the key is {key_path()})")
    try:
        state = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, "its state is unreadable"
    return (state, "") if isinstance(state, dict) else (None, "its state is unreadable")


def _owned(state: dict[str, Any]) -> list[str]:
    files = state.get("files")
    return [p for p in files if _report_path(p)] if isinstance(files, list) else []


def plan(out: Path, inputs: dict[str, Any], logs: Sequence[tuple[str, Path]], contexts: Sequence[str],
         preamble: list[Any], take_up: bool = True, live: bool = False) -> Plan:
    """What to do with OUT for `logs` ((name, file) each: the name is the log as given; the file is
    what is read, a merged copy maybe); `contexts`: what else a log's pages depend on (its labels,
    whether the run has other logs); `preamble`: what the report lists before the logs' own problems
    (the files passed over, an export's bad lines); not `take_up` (--overwrite): only whether OUT
    holds a report of these inputs, and the files it wrote (the logs are not read); `live`: a --watch
    rebuild (the index says what each process is doing now; a finished report does not: a report of
    unchanged logs built the other way is not up to date, though every log is taken up)."""
    state, why_not = _authentic(out)
    if state is None:
        try:  # what it claims decides only between building whole (deleting nothing) and refusing
            claim = orjson.loads(_read(out / STATE_DIR / _STATE, MAX_STATE) or b"null")
        except orjson.JSONDecodeError:
            claim = None
        if why_not and isinstance(claim, dict) and claim.get("inputs") == inputs:
            return Plan(True, why=why_not)
        return Plan(refused=why_not)
    owned = _owned(state)
    if state.get("format") != FORMAT or state.get("inputs") != inputs:
        return Plan(owned=owned)
    if not take_up:
        return Plan(True, owned=owned)
    if state.get("code") != code_version():
        return Plan(True, why="it was made by another version of thunder-trace", owned=owned)
    if not state.get("complete"):
        return Plan(True, why="the report there did not end", owned=owned)
    if state.get("preamble") != preamble:
        return Plan(True, why="the files passed over in the input changed", owned=owned)
    old = state.get("logs")
    if not isinstance(old, list) or not all(isinstance(e, dict) for e in old):
        return Plan(True, why="its state is unreadable", owned=owned)
    stale = _sources_changed(_stamps(state.get("sources") or []))
    if stale:
        return Plan(True, why=f"{stale} changed", owned=owned)
    found = Plan(True, owned=owned, state=state)
    unchanged = len(old) == len(logs)
    for i, (name, path) in enumerate(logs):
        entry = old[i] if i < len(old) else None
        if entry is None or entry.get("name") != name or entry.get("context") != contexts[i]:
            found.whole[i] = ("it is new here" if entry is None else "another log was at its place"
                              if entry.get("name") != name else "its pages change with the run's other logs")
            unchanged = False
            continue
        kept = [k for k in map(Checkpoint.of, entry.get("checkpoints") or ()) if k is not None]
        size, crc = entry.get("size"), entry.get("crc")
        checks = sorted({n for n in ([k.offset for k in kept] + [size]) if type(n) is int})
        crcs = _crc(path, checks)
        at = dict(zip(checks, crcs)) if crcs is not None else {}
        try:
            now = path.stat().st_size
        except OSError:
            now = -1
        if not (at.get(size) == crc and type(crc) is int and now == size):
            unchanged = False
        usable = [k for k in sorted(kept, key=lambda k: -k.offset) if at.get(k.offset) == k.crc
                  and (k.kind == "start" or _ends_clean(path, k.offset))]
        found.kept[i] = kept
        if usable:
            found.resume[i] = usable[0]
        else:
            found.whole[i] = "it changed before its kept state" if kept else "no state was kept in it"
    if unchanged and bool(state.get("live")) == live:
        problems = state.get("problems")
        return Plan(True, up_to_date=True, problems=problems if type(problems) is int else 0, owned=owned)
    if not found.resume:
        found.whole = {}
        found.why = "no state was kept before the logs changed"
    return found


def _stamps(raw: Any) -> dict[str, Any] | None:
    """The user source files a state names ([hex of the path's bytes, [mtime, size] or None] each: a file
    name need not be UTF-8), by path; None if it is not of that shape."""
    try:
        return {os.fsdecode(bytes.fromhex(item[0])): item[1] for item in raw}
    except (ValueError, TypeError, IndexError, KeyError):
        return None


def _sources_changed(stamps: dict[str, Any] | None) -> str | None:
    """A user source file the pages show from disk that is not as it was then."""
    if stamps is None:
        return "a user file its state names"
    for path, stamp in stamps.items():
        try:
            st = os.stat(path)
            now: list[int] | None = [st.st_mtime_ns, st.st_size]
        except (OSError, ValueError):
            now = None
        if now != stamp:
            return f"the user file {path}"
    return None


# -- the state itself ---------------------------------------------------------------------------
class _StateUnpickler(pickle.Unpickler):
    """Only the report's own data classes and plain containers (the state is authenticated first:
    this is a second wall), so that a pickle naming any other callable is refused, not run."""

    _BUILTINS = {("builtins", n) for n in ("set", "frozenset", "list", "dict", "tuple", "bytes")} | {
        ("collections", "OrderedDict"), ("collections", "Counter"), ("collections", "deque")}
    _MODULES = ("provenance.report.model", "provenance.report.analyze.", "provenance.report.read.",
                "provenance.core.record", "provenance.dynamo.", "provenance.timing.", "provenance.allocation.")

    def find_class(self, module: str, name: str) -> Any:
        found = None
        if (module, name) in self._BUILTINS or module.startswith(self._MODULES):
            found = super().find_class(module, name)
        if not isinstance(found, type) or (module.startswith("provenance.") and _acts(found)):
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a report's state")
        return found


def _acts(cls: type) -> bool:
    """A class whose construction does more than hold data (opens files, starts processes)."""
    return not (dataclasses.is_dataclass(cls) or issubclass(cls, (tuple, enum.Enum))
                or cls.__name__ in ("ProvTable", "FxGraphs", "CallSites", "TorchTraces", "Activity"))


def _report_path(path: Any) -> bool:
    """A path a report writes (relative, in its layout, no way out of OUT)."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\0" in path:
        return False
    parts = path.split("/")
    return ".." not in parts and "." not in parts and "" not in parts and (len(parts) == 1 or parts[0] in _LAYOUT)


def _report_files(out: Path) -> Iterator[str]:
    """The files in `out` where a report writes (its top level and its folders), relative to it."""
    try:
        top = list(os.scandir(out))
    except OSError:
        return
    for entry in top:
        if entry.is_file(follow_symlinks=False) or entry.is_symlink():
            yield entry.name
        elif entry.name in _LAYOUT and entry.is_dir(follow_symlinks=False):
            for root, dirs, files in os.walk(entry.path):
                rel = os.path.relpath(root, out)
                yield from (os.path.join(rel, name) for name in files)
                yield from (os.path.join(rel, name) for name in dirs if os.path.islink(os.path.join(root, name)))


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _identities(out: Path) -> dict[str, tuple[int, ...]]:
    found = {}
    root = os.fspath(out)
    for path in _report_files(out):
        try:  # a str path: a Path would intern each of its names for the life of the process
            found[path] = _identity(os.lstat(os.path.join(root, path)))
        except OSError:
            pass
    return found


def _page_key(path: str) -> str | None:
    """The compile a file of compiles/ belongs to (its pages and its records)."""
    folder, _, name = path.rpartition("/")
    if folder != "compiles":
        return None
    return name.removesuffix(".html").removesuffix("-source").removesuffix(".provs.js")


@dataclass
class Keeper:
    """The state a report keeps in OUT while it builds (and, taking up, what it takes up)."""

    out: Path
    inputs: dict[str, Any]
    names: list[str]  # each log's name, as `plan` was given them
    contexts: list[str]
    preamble: list[Any]
    plan: Plan
    live: bool = False  # a --watch rebuild's state (plan's `live`)
    perfetto: Any = None  # the writers whose spools are kept: attach()
    sources: Any = None
    pristine_pages: set[str] = field(default_factory=set)
    filled: dict[str, int] = field(default_factory=dict)  # pages whose final cache card is on disk: its CRC-32
    taken_up: dict[int, Checkpoint] = field(default_factory=dict)  # the logs taken up (loaded): where
    notes: dict[int, str] = field(default_factory=dict)  # logs read whole though a state was planned: why
    _loaded: dict[int, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    _kept_files: set[str] = field(default_factory=set)  # the files of the compiles before the states taken up
    _checkpoints: dict[int, int | None] = field(default_factory=dict)  # log -> where its state is kept (found)
    _kept: dict[tuple[int, str], Checkpoint] = field(default_factory=dict)  # states kept by this build
    _before: dict[str, tuple[int, ...]] = field(default_factory=dict)  # OUT's files as the build began
    _sources: dict[str, Any] = field(default_factory=dict)  # the user files the earlier report checked
    spools: tuple[Spools, Spools] | None = None  # the Perfetto trace's and compile_directory.json's

    @property
    def dir(self) -> Path:
        return self.out / STATE_DIR

    def begin(self) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Before the report writes: the state marked as not ended (whatever stops this build, the
        next is built whole, without --overwrite), the states planned loaded and checked, their
        spools cut back, OUT put back as it was at those states (the rewritten pages restored);
        what to take up: by log, (its part, its pass)."""
        old = self.plan.state
        self._before = _identities(self.out)
        self.dir.mkdir(exist_ok=True)  # the state first: OUT holds nothing of this build without it
        self._write_state({"format": FORMAT, "code": code_version(), "inputs": self.inputs, "complete": False,
                           "files": self.plan.owned})
        write_whole(self.dir / _HOLDER, f"{os.getpid()}\n".encode())
        perfetto, directory = Spools("perfetto", self.out, self.dir), Spools("directory", self.out, self.dir)
        self.spools = perfetto, directory
        for i, keep in sorted(self.plan.resume.items()):
            loaded = self._load(i, keep)
            if isinstance(loaded, str):
                self.notes[i] = loaded
                continue
            if not (perfetto.take_up(i, *keep.perfetto) and directory.take_up(i, *keep.directory)):
                self.notes[i] = "its kept spools are not as they were kept"
                perfetto.restart(i)
                directory.restart(i)
                continue
            part = loaded[0]
            self._loaded[i], self.taken_up[i] = loaded, keep
            self._kept_files.update(f"compiles/{key}" for key in part.keys)  # matched by _page_key
            self._kept_files.update(f"static/src/{asset}.js" for asset in part.assets)
        self._restore_pages(old)
        if self._loaded:  # the files the pages kept show (plan checked them)
            self._sources = _stamps((old or {}).get("sources") or []) or {}
        kept = {_STATE, _MAC, _HOLDER} | {f"log-{i}.{kind}" for i in self._loaded
                                          for kind in ("start.pickle", "end.pickle", perfetto.kind, directory.kind)}
        for path in list(self.dir.iterdir()):  # the states and spools of logs not taken up
            if path.name not in kept:
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
        return dict(self._loaded)

    def _load(self, log: int, keep: Checkpoint) -> tuple[Any, dict[str, Any]] | str:
        """A log's kept part and pass, or why they cannot be used."""
        from provenance.report.analyze.activity import Activity
        from provenance.report.analyze.prov_table import ProvTable
        from provenance.report.analyze.run import LogPart
        from provenance.report.read.log_file import LogFile

        data = _read(self.dir / keep.file(log), MAX_STATE + STATE_PER_LOG_BYTE * keep.offset)
        if not data or not hmac.compare_digest(hashlib.sha256(data).hexdigest(), keep.digest):
            return "its kept state is not as it was kept"
        try:
            state = _StateUnpickler(io.BytesIO(data)).load()
            part, kept = state["part"], state["file"]
            if not (isinstance(part, LogPart) and isinstance(kept.get("log_file"), LogFile)
                    and isinstance(kept.get("provs"), ProvTable) and isinstance(kept.get("activity"), Activity)
                    and type(kept.get("read_ahead_seen")) is int and type(kept.get("read_ahead_before")) is int
                    and isinstance(kept.get("libraries"), dict) and kept["log_file"].bytes == keep.offset):
                return "its kept state is of another shape"
        except Exception:
            return "its kept state does not load"
        return part, kept

    def _restore_pages(self, old: dict[str, Any] | None) -> None:
        """The compile pages the earlier run's end rewrote (desync banners) put back as first written,
        where their compile is taken up; the others' first versions dropped."""
        pristine = self.dir / _PRISTINE
        earlier = (old or {}).get("filled")  # pages written after the states are written again, unfilled
        self.filled = {page: crc for page, crc in earlier.items() if self._is_kept(page) and type(crc) is int
                       } if isinstance(earlier, dict) else {}
        if pristine.is_dir() and not pristine.is_symlink():
            for page in (old or {}).get("pristine") or ():
                source = pristine / str(page)
                if isinstance(page, str) and _PAGE.fullmatch(page) and self._is_kept(page) and _copy(
                        source, self.out / page):
                    self.filled[page] = -1  # its card as it was then: written again, whatever it is now
            shutil.rmtree(pristine)

    def _is_kept(self, path: str) -> bool:
        key = _page_key(path)
        return path in self._kept_files or (key is not None and f"compiles/{key}" in self._kept_files)

    def attach(self, perfetto: Any, sources: Any) -> None:
        self.perfetto, self.sources = perfetto, sources
        for i, keep in self.taken_up.items():
            perfetto.take_up(i, keep.base_ns)
        sources.stamps.update(self._sources)

    # -- what the run asks (analyze/ports.py's Keeper) ---------------------------------------------
    def checkpoint_at(self, log: int, path: str) -> int | None:
        """Where the run keeps this log's state at its last compile's start (found from the log's end,
        before its pass); it is kept at the log's end too (RunBuilder._file)."""
        if log not in self._checkpoints:
            try:
                self._checkpoints[log] = last_start(path, os.path.getsize(path))
            except OSError:
                self._checkpoints[log] = None
        return self._checkpoints[log]

    def keep(self, log: int, state: dict[str, Any], offset: int, crc: int, kind: str = "start") -> None:
        """The log's part and pass before the line at `offset` (whose first `offset` bytes have CRC-32
        `crc`), at its last compile's start or its end (`kind`): pickled, with where its spools are."""
        assert self.spools is not None
        data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        keep = Checkpoint(kind, offset, crc, hashlib.sha256(data).hexdigest(), self.spools[0].mark(log),
                          self.spools[1].mark(log), self.perfetto.base_of(log))
        write_whole(self.dir / keep.file(log), data)
        self._kept[(log, kind)] = keep

    def fell_back(self, log: int, why: str) -> None:
        """A log taken up is read whole after all (the run found why): its spools start anew."""
        assert self.spools is not None
        part = self._loaded.pop(log)[0]
        self.taken_up.pop(log, None)
        self.notes[log] = why
        self._kept_files.difference_update(f"compiles/{key}" for key in part.keys)
        self.filled = {page: crc for page, crc in self.filled.items() if self._is_kept(page)}
        for spools in self.spools:
            spools.restart(log)
        self.perfetto.restart(log)

    def pristine(self, page: str) -> None:
        """A compile page the run's end rewrites (a desync banner): its first version kept."""
        target = self.dir / _PRISTINE / page
        if page not in self.pristine_pages and not target.exists():
            _copy(self.out / page, target)
        self.pristine_pages.add(page)

    def finish(self, logs: Sequence[tuple[int, int | None]], filled: dict[str, int], problems: int) -> None:
        """The report ended: `logs`, (bytes read, their CRC-32) of each log; `problems`: the bad input
        it lists. What an earlier report wrote that this one did not write again and does not keep
        is deleted; only that: anything else in OUT is the user's."""
        owned = set(self.plan.owned)
        now = _identities(self.out)
        written = {p for p, identity in now.items() if self._before.get(p) != identity and _report_path(p)}
        kept = {p for p in owned & now.keys() if self._is_kept(p)}
        for path in owned - written - kept:
            self._delete(path)
        entries = []
        for i, name in enumerate(self.names):
            size, crc = logs[i]
            entries.append({"name": name, "context": self.contexts[i], "size": size, "crc": crc,
                            "checkpoints": [keep.json() for keep in self._checkpoints_of(i)]})
        state = {"format": FORMAT, "code": code_version(), "inputs": self.inputs, "complete": True,
                 "preamble": self.preamble, "logs": entries, "problems": problems, "live": self.live,
                 # paths as bytes (hex): a file name need not be UTF-8
                 "sources": [[os.fsencode(p).hex(), st] for p, st in self.sources.stamps.items()],
                 "pristine": sorted(self.pristine_pages), "filled": filled,
                 "files": sorted(written | kept)}
        self._write_state(state)

    def _checkpoints_of(self, log: int) -> list[Checkpoint]:
        """A log's states after this build: those it kept, and those of the earlier report it took up
        that still stand (before where it was taken up: the bytes before were not changed)."""
        taken = self.taken_up.get(log)
        earlier = [k for k in (self.plan.kept.get(log) or ()) if taken is not None and k.offset <= taken.offset]
        found = {k.kind: k for k in earlier}
        found.update({kind: k for (i, kind), k in self._kept.items() if i == log})
        return [found[kind] for kind in KINDS if kind in found]

    def _delete(self, path: str) -> None:
        """A file this tool wrote (and the folders it leaves empty: `compiles/` a report always has)."""
        try:
            (self.out / path).unlink()
        except OSError:
            return
        folder = os.path.dirname(path)
        while folder and folder != "compiles":
            try:
                os.rmdir(self.out / folder)
            except OSError:  # not empty
                break
            folder = os.path.dirname(folder)

    def _write_state(self, state: dict[str, Any]) -> None:
        """state.json and its MAC."""
        data = orjson.dumps(state)
        write_whole(self.dir / _STATE, data)
        write_whole(self.dir / _MAC, _mac(_key(key_path()), self.out, data).encode())

    def abandon(self) -> None:
        if self.spools is not None:
            for spools in self.spools:
                spools.close()

"""torch's structured trace of a Dynamo graph, read back: the `torch_trace` records (provenance.log.events'
`TorchTrace`, written by provenance/thunder/torch_trace.py) of one frame compile, and the rules that make
them readable in the user's terms. No torch import: the report and the diff use it.

What a frame compile's artifacts say (`FrameTrace`): Dynamo's output graph (the FX code, with shapes),
the guards its cache entry checks (the guard tree torch prints, one `Guard` per check, grouped by the input
it reads), the AOT graphs and inductor code of its torch pieces, the symbols its dynamic dims became and
the guards and specializations on them (`ShapeEvent`), cache outcomes, and torch's compilation metrics.
A restarted frame (Dynamo found a graph break while tracing and traced it again) keeps the last attempt's.
Records are untrusted: a field of the wrong type is left out.

The record's encoder is here too (`Encoder`): one of torch's trace records (its metadata and payload, from
the capture's handler on torch's trace logger or a line of a TORCH_TRACE log) -> a `torch_trace` event,
bounded as every record is: a payload is cut at MAX_PAYLOAD characters (a cache outcome's, whose key
components torch lists in full each time, at MAX_CACHE_PAYLOAD) and a process's payloads at MAX_TOTAL
(later records keep their metadata and say how long the payload was); a string in metadata is cut at
MAX_FIELD characters (compilation_metrics repeats torch's config dumps), and metadata past MAX_METADATA
bytes is replaced by its size, metadata nested past MAX_NESTING levels by that (orjson writes 255 at
most). torch interns file names (its `str` records; for the capture, its intern table for those
interned before the handler listened): they are resolved into the frames that name them (at most
MAX_STRINGS names), each frame marked as the user's code or not (`user`). torch's
`chromium_event` timings are left out (the graph's phases time it), as are its `describe_*` records
(meta-tensor descriptions, one per tensor input: hundreds per model); both are counted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from provenance.core import record

__all__ = ["Artifact", "Encoder", "FrameTrace", "Guard", "ShapeEvent", "StackFrame", "compile_id", "decode",
           "dim_name", "guard_tree", "nests_past", "root_name", "stack_of", "user_frame", "user_name"]

MAX_PAYLOAD = 1 << 20  # characters of one artifact's payload
MAX_TOTAL = 64 << 20  # characters of payload per process
MAX_METADATA = 64 << 10  # bytes of one artifact's metadata, as JSON
MAX_FIELD = 2000  # characters of one string in metadata (compilation_metrics' config dumps: 16 KB each time)
MAX_CACHE_PAYLOAD = 16 << 10  # characters of a cache outcome's payload (its key's components: 45 KB each time)
MAX_STRINGS = 1 << 16  # interned file names remembered
MAX_DEPTH = 8  # levels of metadata walked to resolve file names
MAX_NESTING = 64  # levels of lists and dicts in one artifact's metadata (torch's nest a few)
# the keys of torch's metadata that say where an artifact comes from, not what it is
CONTEXT = frozenset({"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload",
                     "stack"})
LEFT_OUT = frozenset({"chromium_event", "describe_storage", "describe_tensor", "describe_source"})

MAX_ARTIFACTS = 4096  # per frame compile; more are counted
MAX_GUARDS = 20_000  # guards listed per frame compile
GRAPHS = ("aot_forward_graph", "aot_backward_graph", "aot_joint_graph", "aot_inference_graph")
# The other artifacts a page renders as text (title, whether it is a program to copy and run), in this
# order; the rest are counted by name (the pre-grad graph before the passes, the joint graph's passes: near
# copies of what is shown). Kernel provenance is written by inductor only with its provenance tracking on.
TEXTS: dict[str, tuple[str, bool]] = {
    "fx_graph_runnable": ("fx_graph_runnable: a program that reproduces this compile", True),
    "after_pre_grad_graph": ("pre-grad graph (after inductor's pre-grad passes)", False),
    "inductor_post_grad_graph": ("post-grad graph (what inductor lowered)", False),
    "aot_forward_graph_fw_metadata": ("forward metadata (AOTAutograd's view of the inputs, outputs, mutations)", False),
    "inductor_provenance_tracking_node_mappings": ("kernel provenance: the FX nodes of each kernel", False),
    "inductor_provenance_tracking_kernel_stack_traces": ("kernel provenance: the stack traces of each kernel", False),
    "make_fx_fail_partial": ("the graph AOTAutograd traced before it failed", False),
    "dynamo_error": ("Dynamo's error, with its traceback", False),
    "dynamo_graph_break_reason": ("a graph break, with Dynamo's own traceback", False),
}
SHAPES = ("create_symbol", "symbolic_shape_specialization", "guard_added_fast", "guard_added", "create_unbacked_symbol",
          "propagate_real_tensors")
# torch's cache artifacts: `<cache>_<outcome>` (fx_graph_cache_hit, aotautograd_cache_bypass, ...)
_CACHE = re.compile(r"^(?P<cache>[a-z_]*cache)_(?P<outcome>hit|miss|bypass)$")
_CACHE_NAME = re.compile(r"cache_(hit|miss|bypass)$")

_LOCAL = re.compile(r"\bL\['(?P<name>[^']+)'\]")
_GLOBAL = re.compile(r"\bG\['(?P<name>[^']+)'\]")
_KWARG = re.compile(r"\bkwargs\['(?P<name>[^']+)'\]")
_MEMBER = re.compile(r"\._(?:modules|parameters|buffers)\['(?P<name>[^']+)'\]")  # nn.Module's attribute dicts
_BUILTIN = re.compile(r"\b__builtins_dict___\d+\['(?P<name>[^']+)'\]")
_IMPORT = re.compile(r"\b__import_(?P<name>\w+)")  # Dynamo's global alias of an imported module
_ROOT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*")
_SIZE = re.compile(r"^(?P<name>.+?)\.size\(\)\[(?P<index>\d+)\]$")
# one line of torch's guard tree: `| | +- KIND: code  # user line  # file:line in fn`, or a manager
_TREE_LINE = re.compile(r"^(?P<indent>[| ]*)\+- (?P<kind>[A-Za-z_]+)(?::\s?(?P<rest>.*))?$")
_SOURCE = re.compile(r"\bsource=(?P<source>.+?), accessed_by=")


def user_name(source: str) -> str:
    """Dynamo's source of a value in the user's words: `L['x']` -> `x`, `kwargs['input_ids']` ->
    `input_ids`, `G['SCALE']` -> `SCALE`, `L['self']._modules['lm_head']._parameters['weight']` ->
    `self.lm_head.weight`, `__builtins_dict___0['len']` -> `builtins.len`, `G['__import_torch_dot_nn']` ->
    `torch.nn`; inside an expression too
    (`L['n'] == 3` -> `n == 3`)."""
    name = _GLOBAL.sub(lambda m: m["name"], _LOCAL.sub(lambda m: m["name"], source))
    name = _MEMBER.sub(lambda m: "." + m["name"], _KWARG.sub(lambda m: m["name"], name))
    name = _IMPORT.sub(lambda m: m["name"].replace("_dot_", "."), name)
    name = _BUILTIN.sub(lambda m: "builtins." + m["name"], name)
    while (plain := _GETATTRIBUTE.sub(lambda m: f"{m['of']}.{m['name']}", name)) != name:  # inside out
        name = plain
    return name


# Dynamo reads an attribute past a custom __getattr__ as `object.__getattribute__(L['self'].config, 'x')`
_GETATTRIBUTE = re.compile(r"object\.__getattribute__\((?P<of>[^()]*?), '(?P<name>\w+)'\)")


_INPUT = re.compile(r"\b[LG]\['")  # Dynamo's sources of the frame's locals and globals


def is_input(source: str) -> bool:
    """Whether a symbol's source is the traced frame's (a user input: `L['input_ids'].size()[1]`), not a
    name torch's compile of a graph gave it (`sym_2`, `args[0].stride()[0]`)."""
    return _INPUT.search(source) is not None


def subject_of(guard: str) -> str:
    """What a guard (in the user's words) checks: its leftmost operand, whole (`f(a, b) == 3` -> `f(a, b)`)."""
    depth, quote = 0, ""
    for i, char in enumerate(guard):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char.isspace() and depth <= 0:
            return guard[:i]
    return guard


def root_name(subject: str) -> str:
    """The input a source (in the user's words) starts from: `self.lm_head.weight` -> `self`."""
    found = _ROOT.match(subject)
    return found[0] if found else subject


def dim_name(source: str) -> str:
    """A source in the user's words, a dim's as `x dim 1` (`L['x'].size()[1]`)."""
    name = user_name(source)
    size = _SIZE.match(name)
    return f"{size['name']} dim {size['index']}" if size else name


def nests_past(value: Any, limit: int) -> bool:
    """Whether `value`'s lists and dicts nest more than `limit` levels deep; a level at a time, not by
    recursion (a hostile record nests as deep as its parser lets it: orjson's 1024)."""
    level = [value]
    for _ in range(limit + 1):
        level = [v for c in level if isinstance(c, dict | list | tuple)
                 for v in (c.values() if isinstance(c, dict) else c)]
        if not level:
            return False
    return True


def compile_id(metadata: dict) -> str | None:
    """torch's CompileId as its str() writes it: "0/1", "!2/0/1" under compiled autograd."""
    frame, attempt_of = metadata.get("frame_id"), metadata.get("frame_compile_id")
    autograd = metadata.get("compiled_autograd_id")
    frame_part = f"{frame}/{attempt_of}" if type(frame) is int and type(attempt_of) is int else None
    if type(autograd) is int:
        return f"!{autograd}/{frame_part}" if frame_part else f"!{autograd}"
    return frame_part


class Encoder:
    """torch's trace records -> `torch_trace` events, for one process (its interned file names, its
    payload budget). `is_user(path)`: whether a file is the user's code; `intern_table()`: torch's own
    table of file names interned before the records were seen (the capture's; a log has its `str` lines)."""

    def __init__(self, is_user: Callable[[str], bool], intern_table: Callable[[], dict] | None = None) -> None:
        self.is_user = is_user
        self.intern_table = intern_table
        self.strings: dict[int, str] = {}
        self.payload_chars = 0  # kept so far (MAX_TOTAL)
        self.left_out: Counter[str] = Counter()  # by name: LEFT_OUT kinds, and payloads past MAX_TOTAL

    def encode(self, metadata: Any, payload: Any, time_ns: int, whole: int | None = None) -> dict | None:
        """The event of one of torch's records (None: a file name interned, a kind left out, no artifact);
        `whole`: the payload's whole length where the caller kept only its start."""
        if not isinstance(metadata, dict):
            return None
        name = next((k for k in metadata if k not in CONTEXT), None)
        if not isinstance(name, str):
            return None
        value = metadata[name]
        if name == "str":  # an interned file name: ["path", id]
            if isinstance(value, list | tuple) and len(value) == 2 and len(self.strings) < MAX_STRINGS \
                    and type(value[1]) is int:
                self.strings[value[1]] = str(value[0])
            return None
        if name in LEFT_OUT:
            self.left_out[name] += 1
            return None
        if name == "artifact" and isinstance(value, dict) and isinstance(value.get("name"), str):
            name = value["name"]  # torch's generic artifacts: their own name
        event: dict[str, Any] = {"type": "torch_trace", "name": name[:200], "compile_id": compile_id(metadata),
                                 "attempt": metadata.get("attempt") if type(metadata.get("attempt")) is int else None,
                                 "time_ns": time_ns, "metadata": self._metadata(value)}
        if isinstance(payload, str):
            most = MAX_CACHE_PAYLOAD if _CACHE_NAME.search(name) else MAX_PAYLOAD
            kept = payload[:most] if self.payload_chars + min(len(payload), MAX_PAYLOAD) <= MAX_TOTAL else None
            if kept is None:
                self.left_out["payload past MAX_TOTAL"] += 1
            else:
                self.payload_chars += len(kept)
                event["payload"] = kept
            length = whole if whole is not None else len(payload)
            if kept is None or len(kept) < length:
                event["payload_chars"] = length
        return event

    def _metadata(self, value: Any) -> Any:
        """torch's metadata, JSON-safe and bounded, its interned file names resolved."""
        if nests_past(value, MAX_NESTING):  # orjson would refuse to write it (255 levels), here or in the event
            self.left_out["metadata nested past MAX_NESTING"] += 1
            return {"nested_past": MAX_NESTING}
        resolved = self._resolve(value, 0)
        data = orjson.dumps(resolved, default=repr, option=orjson.OPT_NON_STR_KEYS)
        if len(data) > MAX_METADATA:
            return {"dropped_bytes": len(data)}
        return orjson.loads(data)

    def _file(self, index: int) -> str:
        """An interned file name; one torch interned before the records were seen, from its table."""
        found = self.strings.get(index)
        if found is None and self.intern_table is not None and len(self.strings) < MAX_STRINGS:
            table = self.intern_table()
            if len(table) > len(self.strings):
                for name, i in list(table.items())[:MAX_STRINGS]:
                    self.strings.setdefault(i, name)
            found = self.strings.get(index)
        return found if found is not None else f"<file {index}>"

    def _resolve(self, value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            return value
        if isinstance(value, dict):
            out = {k: self._resolve(v, depth + 1) for k, v in value.items()}
            if type(out.get("filename")) is int:  # a frame of a structured stack: its file, and whose code
                out["filename"] = path = self._file(out["filename"])
                out["user"] = self.is_user(path)
            return out
        if isinstance(value, list | tuple):
            return [self._resolve(v, depth + 1) for v in value]
        if isinstance(value, str) and len(value) > MAX_FIELD:
            return f"{value[:MAX_FIELD]}... ({len(value)} characters)"
        return value


@dataclass(frozen=True, slots=True)
class Artifact:
    """One `torch_trace` record."""

    name: str
    compile_id: str | None
    attempt: int | None
    time_ns: int | None
    metadata: Any
    payload: str | None
    payload_chars: int | None  # the payload's whole length where it was cut or left out

    @property
    def cut(self) -> bool:
        return self.payload_chars is not None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def decode(data: dict) -> Artifact | None:
    """The record as an Artifact, or None if it has no name."""
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return None
    compile_id, payload = data.get("compile_id"), data.get("payload")
    return Artifact(name[:200], compile_id[:100] if isinstance(compile_id, str) else None, _int(data.get("attempt")),
                    _int(data.get("time_ns")), data.get("metadata"), payload if isinstance(payload, str) else None,
                    _int(data.get("payload_chars")))


@dataclass(frozen=True, slots=True)
class Guard:
    """One check of a frame's guard tree: its kind (TENSOR_MATCH, ID_MATCH, LAMBDA_GUARD...), its code,
    the input it reads (the nearest manager's source, in the user's words), and the user line torch gives."""

    kind: str
    code: str
    subject: str | None
    where: str | None  # torch's comment: the user line that made the guard, and where
    local: bool  # on an argument or local of the frame (not a global, not global state)


def guard_tree(text: str) -> list[Guard]:
    """The checks of torch's guard tree (`dynamo_cpp_guards_str`), as torch prints them: one line per code
    part of each leaf guard and of the root's epilogue guards; not the managers (`GuardManager: source=...`,
    a dict's `KeyManager:`/`ValueManager:` and `KeyValueManager pair` lines), nor a relational guard printed
    again by its name alone (torch writes its code once)."""
    out: list[Guard] = []
    sources: list[tuple[int, str]] = []  # (depth, source) of the managers above the current line
    for line in text.splitlines():
        matched = _TREE_LINE.match(line)
        if matched is None:
            continue
        depth, kind, rest = len(matched["indent"]), matched["kind"], matched["rest"] or ""
        while sources and sources[-1][0] >= depth:
            sources.pop()
        if not rest:  # a relational guard's repeat, or a line that is no check
            continue
        if kind.endswith(("GuardManager", "GUARD_MANAGER")) or kind in ("KeyManager", "ValueManager"):
            source = _SOURCE.search(rest)
            if source is not None:
                sources.append((depth, source["source"]))
            continue
        code, _, where = rest.partition("  # ")
        subject = user_name(sources[-1][1]) if sources else None
        out.append(Guard(kind, code.strip(), subject, where.strip() or None,
                         bool(sources) and sources[0][1].startswith("L[")))
        if len(out) >= MAX_GUARDS:
            break
    return out


@dataclass(frozen=True, slots=True)
class StackFrame:
    file: str
    line: int
    name: str
    text: str
    user: bool  # the user's code (capture's rule, provenance.core.usercode)


def stack_of(value: Any) -> list[StackFrame]:
    """A structured stack of torch's (`[{"filename", "line", "name", "loc", "user"}]`, innermost last)."""
    if not isinstance(value, list):
        return []
    return [StackFrame(str(f.get("filename", "?"))[:500], f["line"] if type(f.get("line")) is int else 0,
                       str(f.get("name", "?"))[:200], str(f.get("loc") or "")[:500], f.get("user") is True)
            for f in value[-64:] if isinstance(f, dict)]


def user_frame(stack: list[StackFrame]) -> StackFrame | None:
    """The innermost frame of the user's code (provenance.core.record's rule; torch lists a stack outermost
    first), else the innermost."""
    return record.user_frame(reversed(stack)) or (stack[-1] if stack else None)


@dataclass(frozen=True, slots=True)
class ShapeEvent:
    """A symbolic-shape step: a dim became a symbol, was specialized, or got a guard."""

    kind: str  # "symbol", "specialized", "guard"
    symbol: str | None
    subject: str | None  # the input and dim, in the user's words (`input_ids dim 1`)
    text: str  # what happened, in torch's words
    user_stack: list[StackFrame]


def _shape(artifact: Artifact) -> ShapeEvent | None:
    data = artifact.metadata if isinstance(artifact.metadata, dict) else {}
    user = stack_of(data.get("user_stack"))
    if artifact.name in ("create_symbol", "create_unbacked_symbol"):
        source = data.get("source")
        text = f"{data.get('symbol')} = {data.get('val')}, range {data.get('vr')}"
        if isinstance(source, str) and not is_input(source):  # inductor's or AOTAutograd's, on a piece it compiles
            return ShapeEvent("symbol", _str(data.get("symbol")), None,
                              f"internal to torch's compile, not an input of yours (its source: {source[:200]}): "
                              f"{text}"[:700], user)
        subject = dim_name(source) if isinstance(source, str) else None
        return ShapeEvent("symbol", _str(data.get("symbol")), subject, text[:500], user)
    if artifact.name == "symbolic_shape_specialization":
        sources = data.get("sources") if isinstance(data.get("sources"), list) else []
        subject = ", ".join(dim_name(s) for s in sources[:8] if isinstance(s, str)) or None
        text = f"{data.get('symbol')} specialized to {data.get('value')}: {data.get('reason')}"
        return ShapeEvent("specialized", _str(data.get("symbol")), subject, text[:1000], user)
    if artifact.name in ("guard_added_fast", "guard_added"):
        return ShapeEvent("guard", None, None, str(data.get("expr"))[:1000], user)
    return None


def _str(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) else None


@dataclass
class FrameTrace:
    """What torch's structured trace says about one frame compile (one compile id)."""

    compile_id: str
    output_graph: Artifact | None = None
    guards: Artifact | None = None
    graphs: list[Artifact] = field(default_factory=list)  # AOT graphs, in the order torch wrote them
    inductor: list[Artifact] = field(default_factory=list)  # inductor_output_code
    texts: list[Artifact] = field(default_factory=list)  # TEXTS, in the order torch wrote them
    shapes: list[ShapeEvent] = field(default_factory=list)
    caches: list[tuple[str, str, str | None]] = field(default_factory=list)  # (cache, outcome, torch's JSON why)
    metrics: dict | None = None
    others: dict[str, int] = field(default_factory=dict)  # other artifacts, by name: counted
    dropped: int = 0  # past MAX_ARTIFACTS
    _attempts: dict[str, int] = field(default_factory=dict)  # the attempt of the output graph and guards kept

    def add(self, artifact: Artifact) -> None:
        count = (len(self.graphs) + len(self.inductor) + len(self.texts) + len(self.shapes) + len(self.caches)
                 + sum(self.others.values()))
        if count >= MAX_ARTIFACTS:
            self.dropped += 1
            return
        name, attempt = artifact.name, artifact.attempt or 0
        if name in ("dynamo_output_graph", "dynamo_cpp_guards_str"):
            if attempt < self._attempts.get(name, -1):
                return  # an earlier attempt's, after a later one's: the later attempt stands
            self._attempts[name] = attempt
        if name == "dynamo_output_graph":
            self.output_graph = artifact
        elif name == "dynamo_cpp_guards_str":
            self.guards = artifact
        elif name in GRAPHS:
            self.graphs.append(artifact)
        elif name == "inductor_output_code":
            self.inductor.append(artifact)
        elif name in TEXTS and (artifact.payload or artifact.payload_chars):
            self.texts.append(artifact)
        elif name in SHAPES:
            event = _shape(artifact)
            if event is not None:
                self.shapes.append(event)
        elif name == "compilation_metrics" and isinstance(artifact.metadata, dict):
            self.metrics = artifact.metadata
        elif (cache := _CACHE.match(name)) is not None:
            self.caches.append((cache["cache"], cache["outcome"], artifact.payload))
        else:
            self.others[name] = self.others.get(name, 0) + 1

    def guard_list(self) -> list[Guard]:
        return guard_tree(self.guards.payload) if self.guards is not None and self.guards.payload else []

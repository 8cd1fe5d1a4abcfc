"""torch's structured trace of a Dynamo graph, read back: the `torch_trace` records (provenance.log.events'
`TorchTrace`, written by provenance/thunder/torch_trace.py) of one frame compile, and the rules that make
them readable in the user's terms. No torch import: the report and the diff use it.

What a frame compile's artifacts say (`FrameTrace`): Dynamo's output graph (the FX code, with shapes),
the guards its cache entry checks (the guard tree torch prints, one `Guard` per check, grouped by the input
it reads), the AOT graphs and inductor code of its torch pieces, the symbols its dynamic dims became and
the guards and specializations on them (`ShapeEvent`), cache outcomes, and torch's compilation metrics.
A restarted frame (Dynamo found a graph break while tracing and traced it again) keeps the last attempt's.
Records are untrusted: a field of the wrong type is left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Artifact", "FrameTrace", "Guard", "ShapeEvent", "StackFrame", "decode", "dim_name", "guard_tree",
           "root_name", "stack_of", "user_frame", "user_name"]

MAX_ARTIFACTS = 4096  # per frame compile; more are counted
MAX_GUARDS = 20_000  # guards listed per frame compile
GRAPHS = ("aot_forward_graph", "aot_backward_graph", "aot_joint_graph", "aot_inference_graph")
SHAPES = ("create_symbol", "symbolic_shape_specialization", "guard_added_fast", "guard_added", "create_unbacked_symbol",
          "propagate_real_tensors")
# torch's cache artifacts: `<cache>_<outcome>` (fx_graph_cache_hit, aotautograd_cache_bypass, ...)
_CACHE = re.compile(r"^(?P<cache>[a-z_]*cache)_(?P<outcome>hit|miss|bypass)$")

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
    return _BUILTIN.sub(lambda m: "builtins." + m["name"], name)


def root_name(subject: str) -> str:
    """The input a source (in the user's words) starts from: `self.lm_head.weight` -> `self`."""
    found = _ROOT.match(subject)
    return found[0] if found else subject


def dim_name(source: str) -> str:
    """A source in the user's words, a dim's as `x dim 1` (`L['x'].size()[1]`)."""
    name = user_name(source)
    size = _SIZE.match(name)
    return f"{size['name']} dim {size['index']}" if size else name


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
    """The innermost frame of the user's code, else the innermost."""
    return next((f for f in reversed(stack) if f.user), stack[-1] if stack else None)


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
        subject = dim_name(source) if isinstance(source, str) else None
        text = f"{data.get('symbol')} = {data.get('val')}, range {data.get('vr')}"
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
    shapes: list[ShapeEvent] = field(default_factory=list)
    caches: list[tuple[str, str, str | None]] = field(default_factory=list)  # (cache, outcome, torch's JSON why)
    metrics: dict | None = None
    others: dict[str, int] = field(default_factory=dict)  # other artifacts, by name: counted
    dropped: int = 0  # past MAX_ARTIFACTS
    _attempts: dict[str, int] = field(default_factory=dict)  # the attempt of the output graph and guards kept

    def add(self, artifact: Artifact) -> None:
        count = (len(self.graphs) + len(self.inductor) + len(self.shapes) + len(self.caches)
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

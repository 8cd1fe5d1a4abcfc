"""FX's generated code back to the user's source (ThunderFX).

ThunderFX hands Thunder pieces of Dynamo's FX graphs: GraphModules whose generated `forward`
(pseudo-file `<eval_with_key>.N`) Thunder's interpreter runs. torch 2.9 keeps on each
GraphModule a map from generated line to node index, `GraphModule._lineno_map`, keyed by
`line - forward.__code__.co_firstlineno` (what Dynamo itself uses to carry node metadata over
when it retraces a GraphModule, `OutputGraph._maybe_preserve_original_meta`). Dynamo records
on each node the user's stack, `meta["stack_trace"]` (traceback text, outermost first), and
the module stack, `meta["nn_module_stack"]` ({key: (source path such as
`L['self']._modules['h']._modules['0'].mlp`, class)}, outermost first).

A lookup that finds no map, no node or no metadata gives what it has (possibly nothing): the
op then keeps the generated frame alone. Nothing here raises into Thunder.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from torch.fx import GraphModule, Node

from provenance.core.caches import CACHES
from provenance.core.record import Frame
from provenance.thunder import capture
from provenance.thunder.compat import api
from provenance.thunder.frames import frame_at
from provenance.thunder.frames import module_file as module_file_of

__all__ = ["FxNode", "GraphContext", "is_piece", "node_at", "node_info", "set_context", "split_module_path"]


@dataclass(frozen=True, slots=True)
class FxNode:
    """What an FX node says about the user's code."""

    name: str
    frames: tuple[Frame, ...] = ()  # from meta["stack_trace"], innermost first
    module: str | None = None  # the original model's module path ("" is the root)
    module_type: str | None = None
    module_file: str | None = None  # of the innermost module whose class is the user's


@dataclass(frozen=True, slots=True)
class GraphContext:
    """What a Dynamo graph's metadata leaves implicit: where the traced frame's `self` sits.

    Dynamo writes module paths relative to the frame it traced (`L['self']...`). After a graph
    break inside a submodule, that frame is the submodule's `forward`; `prefix` is then its path
    in the compiled model (`blocks.0`). `root_type` is the class of `self`: the module of the ops
    outside any submodule call (none when the frame is not a method of a module).
    """

    prefix: str = ""
    root_type: str | None = None
    root_class: type | None = None  # `self`'s class (a class, not the module: nothing kept alive)

    def join(self, path: str) -> str:
        return ".".join(p for p in (self.prefix, path) if p)


_LINENO_MAP = api().names["lineno_map"]  # torch's private map of generated lines to nodes

# Per GraphModule, on the running Capture (weakly: nothing here keeps a model alive): its context
# (set by the ThunderCompiler hook, `fx_contexts`) and its line table (built at the first lookup,
# rebuilt on recompile, `fx_line_tables`).


def set_context(gm: GraphModule, context: GraphContext) -> None:
    """`context` for `gm` and the GraphModules inside it (e.g. checkpointed bodies)."""
    running = capture.ACTIVE
    if running is None:
        return
    for module in gm.modules():
        if isinstance(module, GraphModule):
            running.fx_contexts[module] = context
            running.fx_line_tables.pop(module, None)


def is_piece(module: Any) -> bool:
    """Whether `module` is a GraphModule ThunderFX made (a piece of a Dynamo graph, or inside one)."""
    running = capture.ACTIVE
    return running is not None and isinstance(module, GraphModule) and module in running.fx_contexts


def node_at(module: Any, code: Any, line: int) -> FxNode | None:
    """The node computed by `line` of `module`'s generated `forward` (code object `code`)."""
    running = capture.ACTIVE
    if not isinstance(module, GraphModule) or running is None:
        return None
    try:
        tables = running.fx_line_tables
        cached = tables.get(module)
        if cached is None or cached[0] is not code:  # recompiled: a new code object, a new map
            cached = tables[module] = (code, _line_table(module, code, running.fx_contexts.get(module)))
        return cached[1].get(line)
    except Exception as exc:  # a GraphModule unlike torch 2.9's: keep the generated frame
        if not running.fx_warned:
            running.fx_warned = True
            warnings.warn(f"thunder-provenance: FX source mapping failed ({type(exc).__name__}: {exc}); "
                          f"ops keep FX's generated line.", RuntimeWarning, stacklevel=2)
        return None


def _line_table(gm: GraphModule, code: Any, context: GraphContext | None) -> dict[int, FxNode]:
    lineno_map = getattr(gm, _LINENO_MAP, None)
    if not lineno_map:
        return {}
    nodes = list(gm.graph.nodes)
    infos: dict[int, FxNode] = {}
    table: dict[int, FxNode] = {}
    for offset, index in lineno_map.items():
        if index is None or not 0 <= index < len(nodes):
            continue
        info = infos.get(index)
        if info is None:
            info = infos[index] = node_info(nodes[index], context)
        table[offset + code.co_firstlineno] = info
    return table


def node_info(node: Node, context: GraphContext | None = None) -> FxNode:
    """The user's frames and the original module of `node`, from its metadata."""
    meta = node.meta
    frames = parse_stack_trace(meta.get("stack_trace"))
    module = module_type = module_file = None
    stack = meta.get("nn_module_stack")
    entries = list(stack.values()) if isinstance(stack, dict) else []  # outermost first
    entry = entries[-1] if entries else None
    if isinstance(entry, tuple) and len(entry) == 2:
        base, path = split_module_path(str(entry[0]))
        module = context.join(path) if context is not None and base == "L['self']" else path
        module_type = _type_name(entry[1])
        classes = [e[1] for e in reversed(entries) if isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], type)]
        if context is not None and context.root_class is not None and base == "L['self']":
            classes.append(context.root_class)  # the traced frame's `self`, above the graph's modules
        module_file = module_file_of(classes)
    elif context is not None and context.root_type is not None:
        module, module_type = context.prefix, context.root_type
        module_file = module_file_of([context.root_class]) if context.root_class is not None else None
    return FxNode(node.name, frames, module, module_type, module_file)


def _type_name(cls: Any) -> str:
    if isinstance(cls, type):
        return cls.__name__
    return str(cls).rsplit(".", 1)[-1].rstrip("'>")  # "torch.nn.modules.linear.Linear" (serialized)


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<function>.+?)\s*$', re.M)
# Dynamo continues a function after a graph break in a generated "resume" function.
RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<name>.+)_at_\d+$")


def function_name(name: str) -> str:
    """`torch_dynamo_resume_in_forward_at_12` -> `forward`: the user's function."""
    resumed = RESUME.match(name)
    return resumed["name"] if resumed else name


@CACHES.lru("fx.stack_traces")
@lru_cache(maxsize=4096)
def parse_stack_trace(text: str | None) -> tuple[Frame, ...]:
    """`meta["stack_trace"]` (traceback text, outermost first) as Frames, innermost first."""
    if not text:
        return ()
    frames = [frame_at(m["file"], int(m["line"]), function_name(m["function"])) for m in _FRAME.finditer(text)]
    return tuple(reversed(frames))


_BASE = re.compile(r"[LG]\['[^']*'\]")
_STEP = re.compile(r"\._modules\['(?P<a>[^']*)'\]|\['(?P<b>[^']*)'\]|\[(?P<c>\d+)\]|\.(?P<d>[A-Za-z_]\w*)")


def split_module_path(source: str) -> tuple[str | None, str]:
    """Dynamo's source of a module -> (its base, its dotted path from there):
    `L['self']._modules['h']._modules['0'].mlp` -> (`L['self']`, `h.0.mlp`). A form not
    understood is returned as written after the base."""
    base = _BASE.match(source)
    if base is None:
        return None, source
    parts: list[str] = []
    pos = base.end()
    while pos < len(source):
        step = _STEP.match(source, pos)
        if step is None:
            return base.group(), source[base.end():].lstrip(".")
        parts.append(next(g for g in step.groups() if g is not None))
        pos = step.end()
    return base.group(), ".".join(parts)

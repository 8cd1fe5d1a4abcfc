"""User source and nn.Module path of the op being traced, read off Thunder's interpreter stack.

Thunder records only the innermost non-Thunder frame. The interpreter's frame stack knows the
whole chain, including each module's `self`, so an `nn.Linear` op can point at the user's
`self.fc(x)` line (and still show linear.py, marked as library code) and know its module path.
Under ThunderFX the interpreter runs FX's generated `forward`: that frame is kept (generated,
not the user's) and followed by the user's frames its FX node recorded (see fx_source.py).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any

import torch

from provenance.core.record import Frame, Kind, Provenance, Span, intern
from provenance.thunder import fx_source
from provenance.thunder.compat import api
from provenance.thunder.frames import frame_of, is_user_code
from provenance.thunder.frames import module_file as frames_module_file

T = api()  # this Thunder's objects (compat.py)
get_interpreterruntimectx, unwrap = T.get_interpreterruntimectx, T.unwrap

# Frames of Thunder's interpreter machinery: never part of an op's story.
_SKIPPED_MODULES = frozenset({"thunder.core.interpreter", "thunder.core.jit_ext", "thunder.torch"})
# torch.nn's call plumbing (Module.__call__/_call_impl): carries nothing worth showing.
_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")

def _module_of(frame: Any) -> torch.nn.Module | None:
    code = frame.code
    if code.co_argcount == 0 or code.co_varnames[0] != "self" or not frame.localsplus:
        return None
    self_ = unwrap(frame.localsplus[0])
    return self_ if isinstance(self_, torch.nn.Module) else None


class StackReader:
    """Turns interpreter stacks into interned records; one per compile (module ids are per run)."""

    def __init__(self) -> None:
        self._records: dict[tuple, Provenance] = {}
        self._names: dict[int, dict[int, str]] = {}  # id(root module) -> {id(module): qualname}

    def current(self, span: Span | None) -> Provenance | None:
        frames = get_interpreterruntimectx().frame_stack
        key_parts: list[tuple] = []
        relevant: list[tuple[Any, torch.nn.Module | None]] = []
        for frame in frames:
            module_name = unwrap(frame.globals).get("__name__", "")
            if module_name in _SKIPPED_MODULES:
                continue
            module = _module_of(frame)
            line = frame.positions.lineno if frame.positions is not None else 0
            key_parts.append((frame.code, line, id(module) if module is not None else 0))
            relevant.append((frame, module, line, module_name))
        if not relevant:
            return None
        key = (tuple(key_parts), span)
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = self._build(relevant, span)
        return record

    def _build(self, relevant: list, span: Span | None) -> Provenance:
        source: list[Frame] = []
        modules: list[torch.nn.Module] = []
        node: fx_source.FxNode | None = None  # the FX node of the innermost generated frame (ThunderFX)
        for frame, module, line, module_name in reversed(relevant):  # innermost first
            if module is not None and (not modules or modules[-1] is not module) and not fx_source.is_piece(module):
                modules.append(module)  # a ThunderFX piece is Dynamo's GraphModule, not a module of the user's
            if frame.code.co_filename.endswith(_MODULE_PY):
                continue
            record_frame = frame_of(frame.code.co_filename, line, frame.code.co_qualname, module_name)
            if node is None and record_frame.generated and module is not None:
                # FX's generated forward: the node this line computes knows the user's stack
                node = fx_source.node_at(module, frame.code, line)
                if node is not None:
                    source.append(replace(record_frame, fx_node=node.name))
                    source.extend(node.frames)
                    continue
            source.append(record_frame)
        module_path = module_type = module_file = None
        if node is not None and node.module_type is not None:
            module_path, module_type = node.module, node.module_type  # the original model's module
            module_file = node.module_file
        elif modules:
            root, innermost = modules[-1], modules[0]
            names = self._names.get(id(root))
            if names is None:
                names = self._names[id(root)] = {}
                for name, module in root.named_modules(remove_duplicate=False):
                    names.setdefault(id(module), name)  # a shared module keeps its first name
            module_path = names.get(id(innermost))
            module_type = type(innermost).__name__
            module_file = frames_module_file(type(m) for m in modules)
        return intern(
            Provenance(
                source=tuple(source),
                module=module_path,
                module_type=module_type,
                module_file=module_file,
                role=span.role if span is not None else None,
                span=span,
                kind=Kind.OP,
            )
        )


def python_stack(limit: int = 64) -> list[Frame]:
    """The user frames of the current Python stack, outermost first (for compile call sites). A frame
    at its function's own first line (its `def`, or the decorator above it) runs the code Dynamo compiled
    from that function, which has no line of its own: the user's call is the frame above it, and a
    decorator's `@wraps(func)` in a library (transformers' `can_return_tuple`) is no call site."""
    frames: list[Frame] = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < limit:
        module_name = frame.f_globals.get("__name__", "")
        code = frame.f_code
        path = code.co_filename
        if frame.f_lineno != code.co_firstlineno and is_user_code(module_name, path):
            frames.append(frame_of(path, frame.f_lineno, code.co_qualname, module_name))
        frame = frame.f_back
    frames.reverse()
    return frames

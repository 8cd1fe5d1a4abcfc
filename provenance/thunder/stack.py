"""User source and nn.Module path of the op being traced, read off Thunder's interpreter stack.

Thunder records only the innermost non-Thunder frame. The interpreter's frame stack knows the
whole chain, including each module's `self`, so an `nn.Linear` op can point at the user's
`self.fc(x)` line (and still show linear.py, marked as library code) and know its module path.
"""

from __future__ import annotations

import linecache
import os
import sys
from functools import lru_cache
from typing import Any

import torch
from thunder.core.interpreter import get_interpreterruntimectx, unwrap

from provenance.caches import CACHES
from provenance.record import Frame, Kind, Provenance, Span, intern

# Frames of Thunder's interpreter machinery: never part of an op's story.
_SKIPPED_MODULES = frozenset({"thunder.core.interpreter", "thunder.core.jit_ext", "thunder.torch"})
# torch.nn's call plumbing (Module.__call__/_call_impl): carries nothing worth showing.
_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")

_LIBRARY_PACKAGES = frozenset({"torch", "thunder", "provenance", "exporters"})
# The interpreter's own stdlib (os.py's folder); in a venv "platstdlib" would also cover site-packages.
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


@CACHES.lru("stack.is_user_code")
@lru_cache(maxsize=4096)
def is_user_code(module_name: str, path: str) -> bool:
    """User code: anything but torch, thunder (its bundled test models excepted), this package
    and the standard library. Third-party model code (say, transformers) counts as user code:
    it is the model the user runs."""
    top = module_name.partition(".")[0]
    if top in _LIBRARY_PACKAGES and not module_name.startswith("thunder.tests"):
        return False
    path = os.path.abspath(path)
    return not (path.startswith(_STDLIB_DIR) and "-packages" + os.sep not in path)


@CACHES.lru("stack.frames")
@lru_cache(maxsize=65536)
def stack_frame(path: str, line: int, function: str, module_name: str) -> Frame:
    text = linecache.getline(path, line).strip() if line else ""
    return Frame(file=path, line=line, function=function, text=text, user=is_user_code(module_name, path))


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
        for frame, module, line, module_name in reversed(relevant):  # innermost first
            if module is not None and (not modules or modules[-1] is not module):
                modules.append(module)
            if frame.code.co_filename.endswith(_MODULE_PY):
                continue
            source.append(stack_frame(frame.code.co_filename, line, frame.code.co_qualname, module_name))
        module_path = module_type = None
        if modules:
            root, innermost = modules[-1], modules[0]
            names = self._names.get(id(root))
            if names is None:
                names = self._names[id(root)] = {}
                for name, module in root.named_modules(remove_duplicate=False):
                    names.setdefault(id(module), name)  # a shared module keeps its first name
            module_path = names.get(id(innermost))
            module_type = type(innermost).__name__
        return intern(
            Provenance(
                source=tuple(source),
                module=module_path,
                module_type=module_type,
                role=span.role if span is not None else None,
                span=span,
                kind=Kind.OP,
            )
        )


def python_stack(limit: int = 64) -> list[Frame]:
    """The user frames of the current Python stack, outermost first (for compile call sites)."""
    frames: list[Frame] = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < limit:
        module_name = frame.f_globals.get("__name__", "")
        path = frame.f_code.co_filename
        if is_user_code(module_name, path) and not path.startswith("<frozen"):
            frames.append(stack_frame(path, frame.f_lineno, frame.f_code.co_qualname, module_name))
        frame = frame.f_back
    frames.reverse()
    return frames

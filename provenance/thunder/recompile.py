"""Why a call compiled again: each cached entry's rejecting check, in the user's terms.

On a call, Thunder tries its cached entries newest first: each entry's prologue checks the
inputs (shapes, dtypes, Python values, globals, ...) and raises on the first mismatch, and
Thunder swallows that exception and tries the next (thunder/__init__.py,
get_computation_and_inputs). When every entry rejected the call, it compiles. Only then, on that
compile path, `rejections` reads the exception each entry's prologue raised in that lookup (the
prologue of an entry built while tracing is `recording`: it keeps its rejection for the compile
that follows, and a hit drops it; no prologue is run again, so no user code runs twice): the
statement that raised (the generated prologue's frame and line), the checked value (that frame's
locals), and what the check expected (the statement's bound symbol in the entry's prologue
trace). The prologue's unpacking symbols map the checked proxy back to what the user wrote: a
parameter of the jitted function or of the module's forward, an attribute path under `self`, a
global, a closure variable, or Thunder's own cache keys (default dtype, grad mode, ...). A cache
hit runs none of the explaining.
"""

from __future__ import annotations

import inspect
import linecache
import re
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from provenance.dynamo.torch_trace import dim_name
from provenance.thunder.compat import api

T = api()  # this Thunder's objects (compat.py)
PrimIDs, Proxy = T.PrimIDs, T.Proxy
_PROLOGUE_FILE = T.names["prologue_file"]

MAX_ENTRIES = 16  # entries analysed per compile (newest first); Thunder tries them all
_VALUE_CHARS = 80

# Thunder's cache_info keys (thunder/__init__.py, populate_cache_info) in the user's words.
_CACHE_INFO = {
    "default_dtype": "torch default dtype",
    "default_device": "torch default device",
    "is_autocast_enabled": "autocast enabled",
    "autocast_config_torch_enabled": "torch.autocast (cuda) enabled",
    "autocast_config_torch_cpu_enabled": "torch.autocast (cpu) enabled",
    "autocast_gpu_dtype": "autocast cuda dtype",
    "autocast_cpu_dtype": "autocast cpu dtype",
    "autocast_thunder_dtype": "autocast dtype",
    "alias_tensor_indices": "tensor arguments sharing storage",
    "is_grad_enabled": "torch.is_grad_enabled()",
    "no_grad_sync": "skipped gradient sync (no_sync)",
}
_UNPACK_BY_KEY = {PrimIDs.UNPACK_GETITEM, PrimIDs.UNPACK_KEY, PrimIDs.UNPACK_DICT_KEY}
_UNPACK_BY_PATH = {PrimIDs.UNPACK_PARAMETER, PrimIDs.UNPACK_BUFFER, PrimIDs.UNPACK_SUBMODULE}
_UNPACK_SEQUENCE = {PrimIDs.UNPACK_SEQUENCE, PrimIDs.UNPACK_TUPLE, PrimIDs.UNPACK_LIST}
_CALL = re.compile(r"^\s*(\w+)\((\w+)")  # a check statement: `check_x(proxy, ...)`
_ASSIGN = re.compile(r"^\s*(\w+)\s*(?::[^=]*)?=")  # an unpack statement: `name: "type" = ...`


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one cached entry rejected the call."""

    compile: int | None  # the compile that built the entry, when known
    reason: str  # `tokens: shape [2, 16] → [2, 8]`
    subject: str | None  # what changed, as the user wrote it
    changes: tuple[tuple[str, str, str], ...]  # (what, cached, now)
    check: str | None  # the prologue statement that raised
    error: str  # Thunder's words: the exception
    # every input found changed, the one that raised first: (subject, its changes)
    inputs: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = ()


class Rejected:
    """The rejections of the cache lookup in progress, per thread: (prologue, its exception),
    kept by `recording` prologues until the compile that follows reads them (`take`) or a prologue
    accepts the call (a hit: dropped). At most MAX_ENTRIES per lookup; `clear()` at disable()."""

    def __init__(self) -> None:
        self._by_thread: dict[int, list] = {}

    def add(self, prologue: Any, exc: BaseException) -> None:
        found = self._by_thread.setdefault(threading.get_ident(), [])
        if len(found) < MAX_ENTRIES:
            found.append((prologue, exc))

    def drop(self) -> None:
        self._by_thread.pop(threading.get_ident(), None)

    def take(self) -> dict[Any, BaseException]:
        return dict(self._by_thread.pop(threading.get_ident(), ()))

    def clear(self) -> None:
        self._by_thread.clear()


def recording(prologue: Callable, rejected: Callable[[], Rejected | None]) -> Callable:
    """`prologue`, keeping the exception it raises for the compile that may follow (`rejected()`:
    the running capture's Rejected, None while disabled). On a hit, one dict pop."""

    def checked_prologue(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest hides this frame in a failure's traceback
        try:
            result = prologue(*args, **kwargs)
        except Exception as exc:
            into = rejected()
            if into is not None:
                into.add(checked_prologue, exc)
            raise
        into = rejected()
        if into is not None:
            into.drop()
        return result

    return checked_prologue


def rejections(entries: list, raised: Mapping[Any, BaseException], args: tuple, kwargs: dict, fn: Any,
               built_by: Mapping[Any, int]) -> tuple[list[Rejection], int]:
    """Why each cached entry (`cs.interpreter_cache`, oldest first) rejected this call, newest
    first as Thunder tried them, from what its prologue raised (`raised`, by prologue function:
    Rejected.take()); and how many older entries were not analysed. `built_by`: the compile that
    built each entry, by its prologue function (Capture.entry_compiles)."""
    tried = list(reversed(entries))
    out = [_rejection(entry, raised, args, kwargs, fn, built_by) for entry in tried[:MAX_ENTRIES]]
    return out, max(0, len(tried) - MAX_ENTRIES)


def _rejection(entry: Any, raised: Mapping[Any, BaseException], args: tuple, kwargs: dict, fn: Any,
               built_by: Mapping[Any, int]) -> Rejection:
    prologue = entry.prologue_fn
    compile_id = built_by.get(prologue)
    exc = raised.get(prologue)
    if exc is None:
        return Rejection(compile_id, "not recorded (the entry was built while tracing was off)", None, (), None, "")
    return _explain(exc, entry.prologue_traces[-1] if entry.prologue_traces else None, fn, compile_id, args, kwargs)


def _explain(exc: Exception, trace: Any, fn: Any, compile_id: int | None, args: tuple = (),
             kwargs: dict | None = None) -> Rejection:
    error = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:500]
    frame = _prologue_frame(exc)
    if frame is None or trace is None:
        return Rejection(compile_id, f"the prologue raised {error}", None, (), None, error)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    paths = _paths(trace, fn)
    call = _CALL.match(line)
    bsym = None
    if call is not None:
        name, proxy = call.groups()
        bsym = next((b for b in trace.bound_symbols if b.sym.name == name and b.args
                     and isinstance(b.args[0], Proxy) and b.args[0].name == proxy), None)
    if bsym is None:  # an unpack failed: what it reads is gone
        target = _ASSIGN.match(line)
        subject = paths.get(target.group(1)) if target else None
        what = subject or line
        return Rejection(compile_id, f"{what}: could not be read ({type(exc).__name__})", subject, (), line, error)
    proxy = bsym.args[0].name
    subject = paths.get(proxy, proxy)
    unpacked = frame.f_locals
    actual = unpacked.get(proxy, _MISSING)
    changes = tuple(_changes(bsym, actual))
    if not changes:
        return Rejection(compile_id, f"{subject}: {error}", subject, (), line, error)
    # The prologue stops at its first failed check: the other inputs' checks are read here.
    inputs = ((subject, changes), *_other_inputs(trace, paths, args, kwargs, bsym, unpacked))
    reason = "; ".join(f"{who}: " + ", ".join(f"{what} {old} \u2192 {new}" for what, old, new in found)
                       for who, found in inputs)
    return Rejection(compile_id, reason, subject, changes, line, error, inputs)


_MISSING = object()
MAX_INPUTS = 32  # changed inputs named per entry
_CHECKS = frozenset(("check_tensor_metadata", "check_len", "check_number_type_and_value", "check_literal_like",
                     "check_string_value", "check_slice_value", "check_bool_conversion", "check_none", "check_empty",
                     "check_type", "check_instance"))


def _other_inputs(trace: Any, paths: _Paths, args: tuple, kwargs: dict | None, first: Any,
                  unpacked: Mapping[str, Any]) -> list:
    """(subject, changes) of every other check of the prologue that this call fails: the value
    each checks is what the prologue unpacked before it raised (`unpacked`, its frame's locals),
    else read from the call's own arguments (paths rooted at args or kwargs), through built-in
    containers and plain attributes only: no user code runs."""
    roots = {"args": args, "kwargs": kwargs or {}}
    found: list = []
    seen = {first.args[0].name}
    for bsym in trace.bound_symbols:
        if len(found) >= MAX_INPUTS:
            break
        if bsym is first or bsym.sym.name not in _CHECKS or not bsym.args or not isinstance(bsym.args[0], Proxy):
            continue
        proxy = bsym.args[0].name
        if proxy in seen:
            continue
        value = unpacked.get(proxy, _MISSING)
        if value is _MISSING:
            value = paths.value(proxy, roots)
        if value is _MISSING:
            continue
        try:
            # _changes describes a check known to have failed: keep what differs
            changes = tuple(c for c in _changes(bsym, value) if c[1] != c[2].split(" (")[0]
                            and not (bsym.sym.name == "check_none" and value is None))
        except Exception:  # a user object that does not compare: not a change we can name
            continue
        if changes:
            seen.add(proxy)
            found.append((paths.get(proxy, proxy), changes))
    return found


def _prologue_frame(exc: BaseException) -> Any:
    """The generated prologue's frame in the exception's traceback (Thunder names its file
    `thunder.prologue...`), innermost."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_PROLOGUE_FILE):
            found = tb.tb_frame
        tb = tb.tb_next
    return found


# -- what was checked, and how it changed -----------------------------------------------------------
def _show(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if isinstance(value, (tuple, list, torch.Size)) and all(isinstance(v, int) for v in value):
        return "[" + ", ".join(map(str, value)) + "]"
    try:
        text = repr(value)
    except Exception:  # a user object whose repr fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."


def _typed(value: Any) -> str:
    return f"{type(value).__name__} {_show(value)}"


def _changes(bsym: Any, actual: Any) -> list[tuple[str, str, str]]:
    """(what, cached, now) for the check `bsym` on the value `actual`."""
    name, expected = bsym.sym.name, bsym.args[1:]
    if actual is _MISSING:
        return []
    if name == "check_tensor_metadata" and len(expected) == 4:
        shape, device, dtype, requires_grad = expected
        if not isinstance(actual, torch.Tensor):
            return [("type", "Tensor", type(actual).__name__)]
        out = []
        if len(actual.shape) != len(shape) or any(not isinstance(s, Proxy) and s != a
                                                  for a, s in zip(actual.shape, shape)):
            out.append(("shape", _show(tuple(s if isinstance(s, int) else "?" for s in shape)), _show(actual.shape)))
        if str(actual.device) != device:
            out.append(("device", str(device), str(actual.device)))
        if actual.dtype != dtype:
            out.append(("dtype", _show(dtype), _show(actual.dtype)))
        if actual.requires_grad != requires_grad:
            out.append(("requires_grad", str(requires_grad), str(actual.requires_grad)))
        return out
    if name == "check_len" and expected:
        now = str(len(actual)) if hasattr(actual, "__len__") else "?"
        if isinstance(actual, dict):  # keyword arguments, or a dict argument: name the keys
            now += f" ({', '.join(map(str, actual))})" if actual else ""
        return [("count" if isinstance(actual, (tuple, dict)) else "length", str(expected[0]), now)]
    if name in ("check_number_type_and_value", "check_literal_like", "check_string_value", "check_slice_value",
                "check_bool_conversion") and expected:
        cached = expected[0]
        if type(actual) is not type(cached) and not isinstance(cached, str):
            return [("value", _typed(cached), _typed(actual))]
        return [("value", _show(cached), _show(actual))]
    if name == "check_none":
        return [("value", "None", _typed(actual))]
    if name == "check_empty":
        return [("length", "0", str(len(actual)) if hasattr(actual, "__len__") else "?")]
    if name in ("check_type", "check_instance") and expected:
        cached = expected[0]
        return [("type", getattr(cached, "__name__", _show(cached)), type(actual).__name__)]
    return []


# -- where a prologue proxy comes from, as the user wrote it ----------------------------------------
_ROOTS = {PrimIDs.UNPACK_TRIVIAL: None, PrimIDs.UNPACK_FUNCTION_OBJ: "fn", PrimIDs.UNPACK_THUNDER_MODULE: "fn",
          PrimIDs.UNPACK_CACHE_INFO: "cache_info"}  # None: the proxy's own name (args, kwargs)
# By identity: PrimIDs' hash is Python code, and a prologue has a thousand symbols.
_UNPACKS = frozenset(map(id, (*_ROOTS, *_UNPACK_BY_KEY, *_UNPACK_BY_PATH, *_UNPACK_SEQUENCE, PrimIDs.UNPACK_ATTR)))


class _Paths:
    """Where the proxies a prologue unpacks come from: each one's parent and the step from it,
    rendered on demand in the user's terms (`tokens`, `self.lin.weight`, `global SCALE`)."""

    def __init__(self, trace: Any, fn: Any) -> None:
        self.links: dict[str, tuple[str | None, tuple]] = {}  # name -> (parent, step), or (None, (root,))
        for bsym in trace.bound_symbols:
            sid = bsym.sym.id
            if id(sid) not in _UNPACKS:  # the checks: most of a prologue
                continue
            args = bsym.args
            outs = [o for o in bsym.flat_outs if isinstance(o, Proxy)]
            if not outs:
                continue
            if sid in _ROOTS:
                self.links[outs[0].name] = (None, (_ROOTS[sid] or outs[0].name,))
                continue
            if not (args and isinstance(args[0], Proxy)) or len(args) < 2 and sid not in _UNPACK_SEQUENCE:
                continue
            parent = args[0].name
            if sid in _UNPACK_BY_KEY:
                self.links[outs[0].name] = (parent, (("[]", args[1]),))
            elif sid is PrimIDs.UNPACK_ATTR:
                self.links[outs[0].name] = (parent, ((".", args[1]),))
            elif sid in _UNPACK_BY_PATH:
                self.links[outs[0].name] = (parent, tuple((".", part) for part in str(args[1]).split(".")))
            else:
                for i, out in enumerate(outs):
                    self.links[out.name] = (parent, (("[]", i),))
        self.names = _Names(fn)

    def get(self, name: str, default: str | None = None) -> str | None:
        steps: list = []
        seen = 0
        while name in self.links and seen < 256:
            parent, step = self.links[name]
            if parent is None:
                return self.names.render((step[0], *reversed(steps)))
            steps.extend(reversed(step))
            name, seen = parent, seen + 1
        return default


    def value(self, name: str, roots: Mapping[str, Any]) -> Any:
        """The value the proxy `name` unpacks from the call's arguments (`roots`: args and kwargs),
        or _MISSING (rooted elsewhere, or not there)."""
        steps: list = []
        seen = 0
        while name in self.links and seen < 256:
            parent, step = self.links[name]
            if parent is None:
                if step[0] not in roots:
                    return _MISSING
                value = roots[step[0]]
                try:
                    for kind, key in reversed(steps):
                        value = _item(value, key) if kind == "[]" else _attribute(value, key)
                except Exception:  # gone, or only user code could say: nothing to compare
                    return _MISSING
                return value
            steps.extend(reversed(step))
            name, seen = parent, seen + 1
        return _MISSING


def _item(value: Any, key: Any) -> Any:
    """value[key] for a built-in container (no user __getitem__ runs), else LookupError."""
    if type(value) in (tuple, list, dict):
        return value[key]
    raise LookupError(key)


def _attribute(value: Any, name: str) -> Any:
    """value.name where no user code runs: a module's parameter, buffer or submodule, or an
    instance's own attribute (not a property, not __getattr__), else AttributeError."""
    if isinstance(value, torch.nn.Module):
        for table in ("_parameters", "_buffers", "_modules"):
            found = value.__dict__.get(table, {})
            if name in found:
                return found[name]
    own = getattr(value, "__dict__", None)
    if isinstance(own, dict) and name in own and not isinstance(inspect.getattr_static(type(value), name, None),
                                                                  property):
        return own[name]
    raise AttributeError(name)


def _paths(trace: Any, fn: Any) -> _Paths:
    return _Paths(trace, fn)


class _Names:
    """Renders unpack paths with the names the user wrote."""

    def __init__(self, fn: Any) -> None:
        self.is_module = isinstance(fn, torch.nn.Module)
        target: Callable | None = getattr(fn, "forward", None) if self.is_module else fn
        self.positional: list[str] = []
        self.varargs: str | None = None
        self.freevars: tuple[str, ...] = ()
        try:
            signature = inspect.signature(target)
            for p in signature.parameters.values():
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                    self.positional.append(p.name)
                elif p.kind is p.VAR_POSITIONAL:
                    self.varargs = p.name
        except (TypeError, ValueError):
            pass
        code = getattr(inspect.unwrap(target), "__code__", None) if target is not None else None
        self.freevars = code.co_freevars if code is not None else ()
        self.renamed = _placeholder_names(fn)

    def render(self, path: tuple) -> str:
        root, rest = path[0], list(path[1:])
        if root == "args" and rest and rest[0][0] == "[]" and isinstance(rest[0][1], int):
            i = rest.pop(0)[1]
            if i < len(self.positional):
                text = self.renamed.get(self.positional[i], self.positional[i])
            elif self.varargs:
                text = f"{self.varargs}[{i - len(self.positional)}]"
            else:
                text = f"argument {i}"
        elif root == "kwargs" and rest and rest[0][0] == "[]":
            text = str(rest.pop(0)[1])
        elif root == "cache_info" and rest and rest[0][0] == "[]":
            key = str(rest.pop(0)[1])
            text = _CACHE_INFO.get(key, f"cache key {key!r}")
        elif root == "args":
            return "positional arguments" if not rest else "args" + _suffix(rest)
        elif root == "kwargs":
            return "keyword arguments" if not rest else "kwargs" + _suffix(rest)
        elif root == "fn":
            if rest[:2] == [(".", "forward"), (".", "__func__")]:
                rest = rest[2:]
            if rest and rest[0] == (".", "__globals__") and len(rest) > 1:
                text = f"global {rest[1][1]}"
                rest = rest[2:]
            elif rest and rest[0] == (".", "__closure__") and len(rest) > 2 and rest[2] == (".", "cell_contents"):
                i = rest[1][1]
                name = self.freevars[i] if isinstance(i, int) and i < len(self.freevars) else f"#{i}"
                text = f"closure variable {name}"
                rest = rest[3:]
            else:
                text = "self" if self.is_module else "the function"
        else:
            text = str(root)
        return text + _suffix(rest)


def _placeholder_names(fn: Any) -> dict[str, str]:
    """A ThunderFX piece (an FX GraphModule Dynamo made): each placeholder's name -> the user's name of what
    Dynamo passes there (`l_kwargs_input_ids_` -> `input_ids`, `s27` -> `input_ids dim 1`), from the
    placeholder's `grapharg` source; a placeholder another piece feeds keeps its FX name."""
    graph = getattr(fn, "graph", None) if isinstance(fn, torch.fx.GraphModule) else None
    names: dict[str, str] = {}
    for node in graph.nodes if graph is not None else ():
        if node.op == "placeholder":
            source = getattr(node.meta.get("grapharg"), "source", None)
            try:
                name = source.name() if source is not None else None
            except Exception:  # a source torch cannot name
                name = None
            if isinstance(name, str) and isinstance(node.target, str):
                names[node.target] = dim_name(name)
    return names


def _suffix(steps: list) -> str:
    out = []
    for kind, key in steps:
        out.append(f".{key}" if kind == "." else f"[{key!r}]")
    return "".join(out)

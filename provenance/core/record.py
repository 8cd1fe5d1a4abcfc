"""Provenance records: immutable, interned, shared by every bound symbol that has them.

A record is created once per distinct provenance and then only referenced: passes copy the
reference, never the record (deep-copying provenance per pass is quadratic, cf. FX). Derived
records (backward, recompute, fusion, pass-made bookkeeping) are cached on their inputs, so
deriving the same record twice returns the same object.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from provenance.core.caches import CACHES

__all__ = ["Frame", "Span", "Provenance", "Kind", "intern", "of", "user_frame", "BSYM_ATTR"]

BSYM_ATTR = "_provenance"  # the bound-symbol attribute holding its record


class Kind:
    """Values of `Provenance.kind`."""

    OP = "op"  # an op the user's program called (or its decomposition, which shares the record)
    DECOMPOSITION = "decomposition"  # a subsymbol a pass flattened to the top level
    BACKWARD = "backward"  # made by autograd from a forward op (`derived_from`)
    RECOMPUTE = "recompute"  # a forward op recomputed in the backward (rematerialization)
    FUSION = "fusion"  # an executor fusion; `members` are the fused ops' records
    BOOKKEEPING = "bookkeeping"  # del, return, unpack, checks, comments: named after the pass
    PASS = "pass"  # a compute op a pass created with no op to attribute it to
    SCOPE = "scope"  # created inside a provenance.scope() and nothing more specific


@dataclass(frozen=True, slots=True)
class Frame:
    """One Python frame of the stack that produced an op.

    `user` is decided at capture: True only for a file on disk outside torch, thunder, this
    package and the standard library. Code generated at run time (FX's `<eval_with_key>.N`,
    `<string>`) is never the user's: such a frame has `generated=True`, and on FX's generated
    `forward` also `fx_node`, the FX node whose line it is. Fields after `user` are additive:
    readers of the 5-field layout (`Frame(*fields)`) keep working.
    """

    file: str
    line: int
    function: str
    text: str = ""
    user: bool = True
    generated: bool = False
    fx_node: str | None = None

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


F = TypeVar("F")


def user_frame(frames: Iterable[F], is_user: Callable[[F], Any] | None = None) -> F | None:
    """THE innermost user frame of `frames` (innermost first): the first that is the user's, by
    its `user` flag (decided at capture) or by `is_user` (a logged `[file, line, ...]` list, a
    frame parsed from text: see provenance.core.usercode.is_library_path). A stack listed outermost
    first (a traceback) is given `reversed`."""
    if is_user is None:
        return next((f for f in frames if f.user), None)  # type: ignore[attr-defined]
    return next((f for f in frames if is_user(f)), None)


_span_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, eq=False)
class Span:
    """A provenance span, opened by `provenance.scope()`.

    Two scopes with the same name are two spans: spans compare by their process-unique id (and
    start time), so a span read back from a log equals the one the process had. The end time is
    not part of the record (records are immutable); exporters receive it as an event.
    """

    name: str
    parent: Span | None = None
    attributes: tuple[tuple[str, Any], ...] = ()
    role: str | None = None
    id: int = field(default_factory=lambda: next(_span_ids))
    start_ns: int = field(default_factory=time.time_ns)

    @property
    def path(self) -> tuple[str, ...]:
        names: list[str] = []
        span: Span | None = self
        while span is not None:
            names.append(span.name)
            span = span.parent
        return tuple(reversed(names))

    def attribute(self, key: str, default: Any = None) -> Any:
        return dict(self.attributes).get(key, default)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Span) and (self.id, self.start_ns) == (other.id, other.start_ns)

    def __hash__(self) -> int:
        return hash(self.id)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a bound symbol came from. Obtain one with `provenance.of(bsym)`."""

    source: tuple[Frame, ...] = ()  # innermost first; library frames kept, marked user=False
    module: str | None = None  # nn.Module qualified path; "" is the root module
    module_type: str | None = None
    # the source file of the innermost module whose class is the user's (`LlamaAttention`'s
    # modeling_llama.py for an op its forward made through a helper): see `module_frame`
    module_file: str | None = None
    transforms: tuple[str, ...] = ()  # lineage, outermost last: ("grad",), ("grad", "recompute")
    role: str | None = None  # distributed role, e.g. "row_parallel.post"
    span: Span | None = None
    derived_from: Provenance | None = None  # backward/recompute: the forward op's record
    members: tuple[Provenance, ...] = ()  # fusion: the fused ops' records, flat, deduplicated
    kind: str = Kind.OP
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Records are dict keys on hot paths (interning, derivation caches): hash once.
        key = (self.source, self.module, self.module_type, self.module_file, self.transforms, self.role,
               self.span, self.derived_from, self.members, self.kind)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame of the user's own code (the line to show)."""
        return user_frame(self.source)

    @property
    def module_frame(self) -> Frame | None:
        """The module line: the innermost frame in the file of the innermost user module's class,
        i.e. the line of that module's own code that led to the op (`attn_output, attn_weights =
        attention_interface(...)` in LlamaAttention.forward for an SDPA op whose innermost user
        frame is in a helper). None where no user module is known; often the user frame itself."""
        if self.module_file is None:
            return None
        return next((f for f in self.source if f.file == self.module_file), None)

    @property
    def generated_frame(self) -> Frame | None:
        """The innermost frame of generated code (FX's `forward`), if the op came through one."""
        return next((f for f in self.source if f.generated), None)

    @property
    def fx_node(self) -> str | None:
        """The FX node (ThunderFX) whose generated line produced this op."""
        frame = self.generated_frame
        return frame.fx_node if frame is not None else None

    @property
    def lineage(self) -> str:
        """The transforms read like a JAX name stack: `grad(recompute(op))`."""
        text = "op"
        for name in self.transforms:
            text = f"{name}({text})"
        return text

    def derive(self, **changes: Any) -> Provenance:
        """The interned record equal to this one with `changes` applied."""
        return intern(replace(self, **changes))

    def __repr__(self) -> str:
        where = self.user_frame.location if self.user_frame else "?"
        return (f"Provenance(kind={self.kind!r}, module={self.module!r}, at={where!r}, "
                f"transforms={self.transforms!r}, role={self.role!r})")


_interned = CACHES.memo("record.intern", 1 << 18)
_intern_lock = threading.Lock()


def intern(record: Provenance) -> Provenance:
    """The canonical instance equal to `record`: equal records are one shared object (while the
    record is in the bounded table; see provenance.core.caches)."""
    found = _interned.get(record)
    if found is not None:
        return found
    with _intern_lock:
        found = _interned.get(record)
        return found if found is not None else _interned.put(record, record)


def of(bsym: Any) -> Provenance | None:
    """The provenance record of a bound symbol, or None if it has none."""
    return getattr(bsym, "__dict__", {}).get(BSYM_ATTR)

"""The seam between capture and one Thunder release series: the version check, and every name of
Thunder (and of the torch it runs on) that capture patches or reads, in one table per series.

Capture's modules take their Thunder objects from `api()`, the running series' table resolved, and
patch only the points the table lists (tests/thunder/test_compat.py holds the hooks to it). Supporting
another series is one more `Series` in `TABLES`: the same names, wherever that release keeps them.
Importing this module imports neither Thunder nor torch.
"""

from __future__ import annotations

import importlib
import sys
import threading
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from types import SimpleNamespace
from typing import Any

__all__ = ["SUPPORTED_THUNDER", "TABLES", "TESTED_TORCH", "Series", "UnsupportedThunderVersion", "api", "check_stack",
           "check_version", "resolve", "loaded", "present_one", "series", "thunder_version", "torch_version"]


class UnsupportedThunderVersion(RuntimeError):
    pass


@dataclass(frozen=True)
class Series:
    """What capture uses of one Thunder release series."""

    # our name -> "module:attribute.path" ("module:" is the module itself)
    objects: dict[str, str]
    # (owner: a name of `objects`, attribute) that capture replaces while enabled
    patch_points: tuple[tuple[str, str], ...]
    # our name -> the private attribute, closure variable, key or prefix capture reads
    names: dict[str, str]
    # objects that may be absent (torch built without distributed): None then
    optional: frozenset[str] = field(default_factory=frozenset)
    # objects resolved only once the program imported their module (`loaded()`): nvFuser's, which
    # Thunder imports only where nvFuser is installed
    if_loaded: frozenset[str] = field(default_factory=frozenset)
    # our name -> patch points of which a release of torch has one (`present_one`)
    one_of: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


_THUNDER_0_2 = Series(
    objects={
        "thunder": "thunder:",
        "autodiff": "thunder.transforms.autodiff:",
        "transform_common": "thunder.core.transform_common:",
        "executor_passes": "thunder.executors.passes:",
        "rematerialization": "thunder.core.rematerialization:",
        "torch_compile": "thunder.executors.torch_compile:",
        "memory_calculation": "thunder.examine.memory_calculation:",  # memory.py: Thunder's allocation rules
        "nvfuser": "thunder.executors.nvfuserex_impl:",
        "distributed_utils": "thunder.distributed.utils:",
        "dynamo_utils": "thunder.dynamo.utils:",
        "dynamo_compiler": "thunder.dynamo.compiler:",
        "dynamo_splitter": "thunder.dynamo.splitter:",
        "BoundSymbol": "thunder.core.symbol:BoundSymbol",
        "BoundSymbolTag": "thunder.core.symbol:BoundSymbolTag",
        "TraceCtx": "thunder.core.trace:TraceCtx",
        "TraceTag": "thunder.core.trace:TraceTag",
        "tracectx": "thunder.core.trace:tracectx",
        "tracectx_var": "thunder.core.trace:_tracectx",
        "compile_data_var": "thunder.core.compile_data:_compile_data",
        "get_compile_data": "thunder.core.compile_data:get_compile_data",
        "TraceSubstitutionProcessor": "thunder.core.trace_interpreter:TraceSubstitutionProcessor",
        "get_interpreterruntimectx": "thunder.core.interpreter:get_interpreterruntimectx",
        "unwrap": "thunder.core.interpreter:unwrap",
        "opcode_handlers": "thunder.core.interpreter:_default_opcode_handler_map",
        "PrimIDs": "thunder.core.prims:PrimIDs",
        "Proxy": "thunder.core.proxies:Proxy",
        "TensorProxy": "thunder.core.proxies:TensorProxy",
        "DeviceType": "thunder.core.devices:DeviceType",
        "CACHE_OPTIONS": "thunder.core.options:CACHE_OPTIONS",
        "TorchCompileExecutor": "thunder.executors.torch_compile:TorchCompileExecutor",
        "nvFuserExecutor": "thunder.executors.nvfuserex_impl:nvFuserExecutor",
        "torch_executor": "thunder.executors.torchex:ex",
        "ThunderCompiler": "thunder.dynamo.compiler:ThunderCompiler",
        "TensorParallelVisitor":
            "thunder.distributed.tensor_parallel.common:ComputationTraceTransformVisitorForTensorParallel",
        "TensorParallelLayerType": "thunder.distributed.tensor_parallel.common:TensorParallelLayerType",
        "TransformForTensorParallel": "thunder.distributed.tensor_parallel.common:TransformForTensorParallel",
        "ColumnParallelLinear": "thunder.distributed.tensor_parallel.column_wise:ColumnParallelLinearPrePostProcess",
        "ColumnParallelEmbedding":
            "thunder.distributed.tensor_parallel.column_wise:ColumnParallelEmbeddingPrePostProcess",
        "RowParallelLinear": "thunder.distributed.tensor_parallel.row_wise:RowParallelLinearPrePostProcess",
        "RowParallelEmbedding": "thunder.distributed.tensor_parallel.row_wise:RowParallelEmbeddingPrePostProcess",
        "FSDPTransform": "thunder.distributed.transforms.fsdp_v2:FSDPTransform",
        "DDPTransform": "thunder.distributed.transforms.ddp_v2:DDPTransform",
        # the torch Thunder 0.2 runs on (2.7.1 to 2.12)
        "symbolic_convert": "torch._dynamo.symbolic_convert:",
        "InstructionTranslatorBase": "torch._dynamo.symbolic_convert:InstructionTranslatorBase",
        "convert_frame": "torch._dynamo.convert_frame:",
        "dynamo_callbacks": "torch._dynamo.callback:callback_handler",
        "OptimizedModule": "torch._dynamo.eval_frame:OptimizedModule",
        "CompileContext": "torch._guards:CompileContext",
        "TracingContext": "torch._guards:TracingContext",
        "trace_log": "torch._logging._internal:trace_log",  # torch's structured trace (torch_trace.py)
        "intern_table": "torch._logging.structured:INTERN_TABLE",  # ...and the file names it interns
    },
    patch_points=(
        # hooks.py: where bound symbols are made, copied, printed; where a compile starts and ends
        ("BoundSymbol", "_provenance"), ("BoundSymbol", "__post_init__"), ("BoundSymbol", "from_bsym"),
        ("BoundSymbol", "python"), ("TraceCtx", "set_current_source_location"), ("TraceCtx", "set_provenance"),
        ("TraceCtx", "bound_symbols"), ("TraceSubstitutionProcessor", "__call__"),
        ("autodiff", "split_into_forward_and_backward"), ("thunder", "thunder_general_jit"),
        ("thunder", "CacheEntry"), ("thunder", "jit"), ("thunder", "_with_cache_info_ctx"),
        # ...and the interpreter's comparisons, which call the proxy's operator uninterpreted
        ("opcode_handlers", "COMPARE_OP"),
        # distributed.py: the ops distributed transforms and rematerialization insert
        ("TensorParallelVisitor", "__call__"),
        ("ColumnParallelLinear", "preprocess"), ("ColumnParallelLinear", "postprocess"),
        ("ColumnParallelEmbedding", "preprocess"), ("ColumnParallelEmbedding", "postprocess"),
        ("RowParallelLinear", "preprocess"), ("RowParallelLinear", "postprocess"),
        ("RowParallelEmbedding", "preprocess"), ("RowParallelEmbedding", "postprocess"),
        ("FSDPTransform", "transform_traces_pre_prologue"), ("DDPTransform", "transform_traces_pre_prologue"),
        ("rematerialization", "apply_rematerialization_for_consumer"),
        # phases.py: each step of apply_transforms_and_build_cache_entry, codegen, fusion executors
        ("thunder", "wrap_return_value_together_with_arguments"),
        ("thunder", "remove_context_manager_prims_from_trace"),
        ("thunder", "insert_alias_updates"), ("thunder", "transform_for_execution"),
        ("thunder", "transform_to_torch_types"), ("thunder", "dce"), ("thunder", "unwrap_return_value"),
        ("autodiff", "grad_transform_on_trace"), ("executor_passes", "_transform_for_operator_executor_execution"),
        ("executor_passes", "del_last_used"), ("transform_common", "_inplace_copy_sanity_check"),
        ("TraceCtx", "python_callable"), ("distributed_utils", "maybe_sort_waits"),
        ("TorchCompileExecutor", "fusion_pass"), ("TorchCompileExecutor", "fuse"), ("torch_compile", "make_compiled"),
        ("torch_compile", "rematerialize"), ("torch_compile", "update_fusion_call_ctx"),
        ("nvFuserExecutor", "fusion_pass"), ("nvfuser", "rematerialize"),
        # thunderfx.py: ThunderFX's backend, its splitter's trial runs, Dynamo's graph-break log
        ("ThunderCompiler", "__call__"), ("dynamo_utils", "try_execute_thunder_symbol"),
        ("symbolic_convert", "log_graph_break"), ("InstructionTranslatorBase", "log_graph_break"),
        # fx_compile.py: the splitter's inductor compiles, Dynamo's recompile reasons
        ("dynamo_compiler", "_splitter"), ("convert_frame", "get_and_maybe_log_recompilation_reasons"),
        ("dynamo_splitter", "split_module"), ("dynamo_splitter", "is_node_supported_by_thunder"),
    ),
    names={
        "compile_stats_attr": "_lc_cs",  # a jitted function's CompileStats (thunder.compile_stats)
        "stats_closure": "weakref_cs",  # _with_cache_info_ctx's function: its weak reference to them
        "grad_processor": "AugmentedForwardProcessor",  # autodiff's local processor classes
        "recompute_processor": "InsertRecomputationsProcessor",
        "process_bsym": "process_bsym",  # TraceSubstitutionProcessor methods shadowed per instance
        "add_unprocessed_bsyms": "add_unprocessed_bsyms",
        "fusion_call_ctx": "_call_ctx",  # a fusion bsym's call context
        "compiled_func": "compiled_func",  # torch_compile's compiled_func_wrapper closure variable
        "wait_symbol": "torch_wait_prim_impl",  # the torch executor's wait, in its call context
        "bind_postprocess": "_bind_postprocess",  # ...reached through its symbol's bind postprocess
        "bind_call_ctx": "call_ctx",  # ...whose closure holds the shared call context
        "prologue_file": "thunder.prologue",  # file name prefix of generated prologues
        "generated_file": "thunder.",  # of every generated function
        "lineno_map": "_lineno_map",  # torch.fx.GraphModule: generated line -> node index
    },
    optional=frozenset({"distributed_utils"}),
    if_loaded=frozenset({"nvfuser", "nvFuserExecutor"}),
    # Dynamo's graph-break log: a function of the module on torch 2.9 (code_options, reason, exc_info,
    # user_stack), a method of the instruction translator from torch 2.10, (self, code_options, reason,
    # user_stack) on 2.10 and (self, code_options, reason, exc) from 2.11, the user stack then on the
    # exception (`graph_break_stack` reads either shape)
    one_of={"graph_break_log": (("symbolic_convert", "log_graph_break"),
                                ("InstructionTranslatorBase", "log_graph_break"))},
)

# Thunder's development head (0.2.7.dev0, commit 1e22aac, 2026-01-29) keeps every name above where 0.2.6
# does (tests/thunder/test_compat.py resolves them on each stack of the support matrix).
TABLES: dict[str, Series] = {"0.2.6": _THUNDER_0_2, "0.2.7.dev0": _THUNDER_0_2}
SUPPORTED_THUNDER = tuple(TABLES)  # release series this integration was written and tested against
# The torch releases of the support matrix (README, "Compatibility"); another one is tried, not refused.
TESTED_TORCH = ("2.9", "2.10", "2.11", "2.12")


def thunder_version() -> str:
    try:
        return metadata.version("lightning-thunder")
    except metadata.PackageNotFoundError:
        import thunder

        return getattr(thunder, "__version__", "unknown")


def torch_version() -> str:
    """The installed torch's version, from its metadata (importing torch is not needed to say it)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _ours() -> str:
    from provenance._version import __version__

    return f"thunder-provenance {__version__}"


def series(version: str | None = None) -> str:
    """The supported series `version` (default: the installed one) belongs to, or
    UnsupportedThunderVersion. A release's post and local versions (0.2.6.post1, 0.2.6+cu) are its
    series; a development version is supported only as the one tested (0.2.7.dev0, not 0.2.7.dev3)."""
    version = version or thunder_version()
    base = version.split("+")[0]
    found = next((v for v in SUPPORTED_THUNDER
                  if base == v or (".dev" not in v and base.startswith(v + ".post"))), None)
    if found is None:
        raise UnsupportedThunderVersion(
            f"{_ours()} supports lightning-thunder {' and '.join(SUPPORTED_THUNDER)}, but {version} is "
            f"installed. Install a supported one (pip install 'lightning-thunder=="
            f"{SUPPORTED_THUNDER[0]}') or a thunder-provenance that supports {version}; the program can run "
            f"untraced (unset THUNDER_TRACE)."
        )
    return found


def check_stack() -> str:
    """The installed Thunder's version, once it is supported and imports; else UnsupportedThunderVersion
    naming both versions and, where Thunder itself cannot import on this torch, Thunder's error and where it
    was raised (lightning-thunder 0.2.6 on torch 2.13 and newer). Imports Thunder."""
    version = check_version()
    try:
        import thunder  # noqa: F401
    except Exception as exc:
        where = next((f"{frame.filename.rpartition('site-packages/')[2]}:{frame.lineno}"
                      for frame in reversed(traceback.extract_tb(exc.__traceback__))
                      if "thunder" in frame.filename.replace("\\", "/").split("/")), "")
        raise UnsupportedThunderVersion(
            f"lightning-thunder {version} does not import on torch {torch_version()}: "
            f"{type(exc).__name__}: {exc}{f' ({where})' if where else ''}. {_ours()} is tested on torch "
            f"{', '.join(TESTED_TORCH)}; the program fails the same way without tracing."
        ) from exc
    return version


def check_version(version: str | None = None) -> str:
    """Raise UnsupportedThunderVersion unless `version` (default: the installed one) is supported."""
    version = version or thunder_version()
    series(version)
    return version


def resolve(ref: str) -> Any:
    """`module:attribute.path` -> the object (the module itself for `module:`)."""
    module_name, _, path = ref.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in filter(None, path.split(".")):
        found = getattr(found, part)
    return found


_lock = threading.Lock()
_api: list[SimpleNamespace] = []  # the running series' objects, resolved once


def api() -> SimpleNamespace:
    """The installed Thunder's objects by our names (`api().BoundSymbol`), and its private names
    (`api().names["lineno_map"]`); an optional object that is absent is None. Checks the version
    first: an unsupported Thunder raises UnsupportedThunderVersion."""
    if not _api:
        with _lock:
            if not _api:
                table = TABLES[series()]
                objects = {}
                for name, ref in table.objects.items():
                    if name in table.if_loaded:
                        continue
                    try:
                        objects[name] = resolve(ref)
                    except (ImportError, AttributeError):
                        if name not in table.optional:
                            raise
                        objects[name] = None
                _api.append(SimpleNamespace(**objects, names=dict(table.names), table=table))
    return _api[0]


def present_one(name: str) -> tuple[str, str]:
    """The first patch point of the `one_of` group `name` that this torch has: (owner, attribute).
    Checks the owner's own attributes, not inherited ones (a method's class, a function's module)."""
    found = api()
    points = found.table.one_of[name]
    for owner, attribute in points:
        if attribute in vars(getattr(found, owner)):
            return owner, attribute
    raise AttributeError(f"none of {', '.join(f'{o}.{a}' for o, a in points)} is in this torch")


def loaded(name: str) -> Any:
    """The object `name` (one of the series' `if_loaded`) if the program imported its module, else None."""
    ref = api().table.objects[name]
    return resolve(ref) if ref.partition(":")[0] in sys.modules else None


def graph_break_stack(arguments: dict[str, Any]) -> tuple[str, Any] | None:
    """Dynamo's graph-break log's bound arguments -> (reason, the user stack at the break), in either
    shape the `graph_break_log` group has: `user_stack` (torch 2.9 and 2.10) or the exception's
    `real_stack` (2.11 and newer, which log an exception once: None when `exc.logged`)."""
    if "user_stack" in arguments:
        return str(arguments.get("reason", "")), arguments["user_stack"]
    exc = arguments.get("exc")
    if getattr(exc, "logged", False):
        return None
    return str(arguments.get("reason", "")), getattr(exc, "real_stack", None)

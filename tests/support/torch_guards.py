"""torch's own count of the guard checks of each Dynamo cache entry, to hold the report's guard lists
against (tests/thunder/test_torch_trace.py, tests/support/hf_program.py)."""

from __future__ import annotations

import torch


def checks(entry) -> int:
    """A cache entry's guard checks, from its guard manager: each code part of each leaf guard (a
    relational guard once), through dicts' key and value managers, and the epilogue guards."""
    relational, seen = torch._C._dynamo.guards.RelationalGuard, set()

    def parts(guard) -> int:
        code = guard.verbose_code_parts()
        if isinstance(guard, relational):  # one guard on several inputs, under each input's manager:
            key = (type(guard).__name__, tuple(code))  # its Python wrappers differ (no id()), its code not
            if key in seen:
                return 0
            seen.add(key)
        return len(code)

    def walk(manager) -> int:
        count = sum(map(parts, manager.get_leaf_guards()))
        for key, value in (manager.get_key_value_managers().values()
                           if hasattr(manager, "get_key_value_managers") else ()):
            count += (walk(key) if key is not None else 0) + (walk(value) if value is not None else 0)
        return count + sum(map(walk, manager.get_child_managers()))

    root = entry.guard_manager.root
    return walk(root) + sum(map(parts, root.get_epilogue_lambda_guards()))


def by_compile_id(code=None) -> dict[str, int]:
    """compile id -> torch's count, for the cache entries of `code` (a function), else of every code
    object Dynamo compiled in this process."""
    from torch._dynamo.convert_frame import input_codes
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    codes = [code] if code is not None else [ref() for ref in input_codes.seen if ref() is not None]
    return {str(e.compile_id): checks(e) for c in codes for e in _debug_get_cache_entry_list(c)}

"""The report's jinja2 Environment, and its templates compiled once, at install time.

Compiling the package's templates costs a report process about 0.27 s of CPU. The install's build
hook (hatch_build.py at the project root) compiles them instead, with the same `make_environment`
the report uses, into one file next to this module (COMPILED: generated, never committed); a report
loads them through `PackagedTemplates`, a read-only jinja2 bytecode cache, and writes nothing
(a report writes nothing outside its output directory: no cache at report time).

Nothing stale is ever used, template by template:
- a template whose source differs from the source it was compiled from (edited after install, or a
  page's template from outside the package) is compiled from source: jinja2 keeps each template's
  source checksum with its code and drops code whose checksum differs;
- code compiled by another Python version is dropped (jinja2 keeps the version with the code);
- a file made by another jinja2 version, or for an environment whose options differ in anything
  that changes compiled code (`fingerprint`), is not used at all; a missing or unreadable one
  neither. Then every template compiles from source, as before.

Stdlib and jinja2 only: the build hook loads this file by its path, where neither this package nor
its dependencies are installed. `python provenance/report/render/templating.py` writes COMPILED into a
checkout (what the hook does for an editable install).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import jinja2

__all__ = ["COMPILED", "FILTER_NAMES", "PackagedTemplates", "compile_templates", "fingerprint",
           "load_compiled", "make_environment", "write_compiled"]

COMPILED = "templates_compiled.bin"  # next to this module; .gitignore'd, made by the build hook
FILTER_NAMES = ("json_script", "ms", "plural", "seconds")  # html.py's; the build compiles with stand-ins
FORMAT = 1  # of COMPILED's contents


class _Environment(jinja2.Environment):
    """A template's globals as one flat dict, not jinja2's ChainMap over the environment's: every
    render copies them into its context and every `{% import %}` compares their keys, which a
    ChainMap does through the generic, slow paths (2.5% of the instructions of a report of small
    compiles, by callgrind). The report sets its globals once, before any template loads
    (html.environment), so a snapshot is the same."""

    def make_globals(self, d: MutableMapping[str, Any] | None) -> MutableMapping[str, Any]:
        return {**self.globals, **d} if d else dict(self.globals)


def make_environment(loader: jinja2.BaseLoader, filters: Mapping[str, Callable[..., Any]]) -> jinja2.Environment:
    """The one place the report's Environment options are set, for the report and the build hook
    alike, so that the compiled templates are compiled as the report would compile them."""
    if sorted(filters) != sorted(FILTER_NAMES):
        raise ValueError(f"the report's filters are {sorted(FILTER_NAMES)} (templating.FILTER_NAMES), "
                         f"not {sorted(filters)}")
    env = _Environment(
        loader=loader,
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True,
        # templates do not change during a report: no stat of the file at every include and import
        # (a compile page made ~11 of them)
        auto_reload=False,
    )
    env.filters.update(filters)
    return env


def _name(value: Any) -> str:
    if value is None or isinstance(value, bool | str | int):
        return repr(value)
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__qualname__)}"


def fingerprint(env: jinja2.Environment) -> str:
    """What compiled code depends on besides the template's source and the Python version (which
    jinja2 checks itself): jinja2's version, the environment's syntax and code generation options,
    and the names of its filters and tests with how each is called (a `pass_context` filter is
    called differently by the compiled code)."""
    parts = [
        f"jinja2 {jinja2.__version__}",
        *(f"{key}={getattr(env, key)!r}" for key in (
            "block_start_string", "block_end_string", "variable_start_string", "variable_end_string",
            "comment_start_string", "comment_end_string", "line_statement_prefix", "line_comment_prefix",
            "trim_blocks", "lstrip_blocks", "newline_sequence", "keep_trailing_newline", "optimized",
            "is_async")),
        *(f"{key}={_name(getattr(env, key))}" for key in (
            "autoescape", "undefined", "finalize", "code_generator_class", "template_class", "concat")),
        "extensions=" + ",".join(sorted(env.extensions)),
        *(f"{kind} {name} {getattr(func, 'jinja_pass_arg', None)}"
          for kind, table in (("filter", env.filters), ("test", env.tests)) for name, func in sorted(table.items())),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class PackagedTemplates(jinja2.BytecodeCache):
    """A read-only jinja2 bytecode cache: the code compiled at install time, by template name.
    jinja2 uses a template's code only if it was compiled from the same source (checksum) by the
    same Python version; otherwise it compiles the template and offers the code back to
    `dump_bytecode`, which keeps nothing."""

    def __init__(self, templates: Mapping[str, bytes]) -> None:
        self.templates = templates

    def get_cache_key(self, name: str, filename: str | None = None) -> str:
        return name  # not the file's path: the templates were compiled elsewhere (the build tree)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = self.templates.get(bucket.key)
        if data is not None:
            bucket.bytecode_from_string(data)  # resets the bucket on another checksum or Python

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        pass  # a report writes nothing outside its output directory


class _Recorder(PackagedTemplates):
    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.templates[bucket.key] = bucket.bytecode_to_string()


def _stand_in(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a build-time stand-in for one of the report's filters: templates are compiled, not rendered")


def compile_templates(directory: str | os.PathLike[str]) -> bytes:
    """COMPILED's contents: every `.html` template of `directory` compiled by the report's
    environment (with stand-ins for html.py's filters: compiled code looks filters up by name when
    it runs). A template that does not compile is left out (the report then reports its error)."""
    templates: dict[str, bytes] = {}
    env = make_environment(jinja2.FileSystemLoader(os.fspath(directory)), dict.fromkeys(FILTER_NAMES, _stand_in))
    env.bytecode_cache = _Recorder(templates)
    for name in env.list_templates(filter_func=lambda name: name.endswith(".html")):
        try:
            env.get_template(name)
        except jinja2.TemplateError as e:
            print(f"thunder-provenance: template {name} left uncompiled: {e}", file=sys.stderr)
    return marshal.dumps({"format": FORMAT, "fingerprint": fingerprint(env), "templates": templates,
                          # to say why a report would not use them (tests/report/test_report_templates.py):
                          "jinja2": jinja2.__version__, "python": list(sys.version_info[:2])})


def write_compiled(directory: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """compile_templates(directory), written to `target` whole (a temporary file renamed: render/files.py's
    way, written out here because hatch_build.py loads this module alone, by its path)."""
    data = compile_templates(directory)
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_compiled(env: jinja2.Environment, path: str | os.PathLike[str] | None = None) -> PackagedTemplates | None:
    """The templates compiled at install time (COMPILED next to this module unless `path`), if they
    were compiled for an environment like `env` by this jinja2; else None."""
    try:
        with open(Path(__file__).with_name(COMPILED) if path is None else path, "rb") as f:
            data = marshal.load(f)
        if data["format"] != FORMAT or data["fingerprint"] != fingerprint(env):
            return None
        templates = data["templates"]
        if not isinstance(templates, dict) or not all(isinstance(code, bytes) for code in templates.values()):
            return None
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return None
    return PackagedTemplates(templates)


if __name__ == "__main__":  # a checkout's COMPILED, without installing (--quiet: say nothing)
    here = Path(__file__).resolve().parent
    write_compiled(here / "templates", here / COMPILED)
    if "--quiet" not in sys.argv[1:]:
        print(f"templating.py: the report's templates compiled into {here / COMPILED}")

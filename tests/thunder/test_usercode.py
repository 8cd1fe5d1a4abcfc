"""One user-code rule (provenance.core.usercode): capture's filesystem-aware reading of it
(provenance/thunder/frames.py) and the report's path-only one (`is_library_path`, for text)
agree on the paths of this process's layout; `register_exclusion` moves a path or package to
the library side for both; one `user_frame` picks the innermost user frame."""

from __future__ import annotations

import importlib.util
import json.decoder
import os
import subprocess
import sys
from pathlib import Path

import _pytest.runner
import models
import pluggy
import pytest
import torch

import exporters.otel
import provenance
from provenance.core import usercode
from provenance.core.record import Frame, user_frame
from provenance.thunder import frames

TORCH = importlib.util.find_spec("torch").submodule_search_locations[0]
THUNDER = importlib.util.find_spec("thunder").submodule_search_locations[0]


def _layout(tmp_path: Path) -> dict[str, bool]:
    """Paths as this process lays them out -> whether they are the user's code."""
    third_party = tmp_path / "lib" / "python3.11" / "site-packages" / "transformers" / "modeling_utils.py"
    third_party.parent.mkdir(parents=True)
    third_party.write_text("x = 1\n")
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    console = tmp_path / "venv" / "bin" / "pytest"  # pip's console script: run as __main__
    console.parent.mkdir(parents=True)
    console.write_text("import sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    return {
        os.path.join(TORCH, "nn", "modules", "linear.py"): False,
        os.path.join(THUNDER, "core", "symbol.py"): False,
        os.path.join(THUNDER, "tests", "nanogpt_model.py"): True,  # Thunder's bundled models: the user's
        os.__file__: False,
        json.decoder.__file__: False,
        provenance.__file__: False,
        frames.__file__: False,
        exporters.otel.__file__: False,
        models.__file__: True,
        str(script): True,
        str(third_party): True,  # third-party model code is the model the user runs
        _pytest.runner.__file__: False,  # test runners and launchers run the user's code, they are not it
        pluggy.__file__: False,
        str(console): False,
        "<eval_with_key>.3": False,
        "<string>": False,
        "<frozen importlib._bootstrap>": False,
    }


def test_capture_and_the_text_rule_agree_on_this_layout(tmp_path):
    for path, user in _layout(tmp_path).items():
        assert frames.is_user_path(path) is user, path
        assert usercode.is_library_path(path) is not user, path


def test_the_text_rule_on_other_machines_paths():
    library = ["/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py",
               "C:\\venv\\Lib\\site-packages\\thunder\\core\\symbol.py",
               "/usr/lib/python3/dist-packages/torch/_tensor.py",
               "/home/u/src/lightning-thunder/thunder/executors/torchex.py",  # a source checkout
               "/home/u/thunder-provenance/provenance/thunder/emit.py",
               "/usr/lib/python3.11/json/decoder.py", "<frozen runpy>", "<eval_with_key>.12",
               "/opt/venv/lib/python3.11/site-packages/_pytest/runner.py",
               "/opt/venv/lib/python3.11/site-packages/pluggy/_hooks.py",
               "/opt/venv/bin/pytest", "/usr/local/bin/torchrun", "C:\\venv\\Scripts\\pytest.exe"]
    user = ["/opt/venv/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py",
            "/opt/venv/lib/python3.11/site-packages/litgpt/model.py",
            "/opt/venv/lib/python3.11/site-packages/thunder/tests/llama2_model.py",
            "/home/u/project/train.py", "/home/u/torchvision_stuff/model.py", "relative/model.py",
            "/home/u/bin/train.py", "/home/u/project/tests/test_model.py"]
    assert [p for p in library if not usercode.is_library_path(p)] == []
    assert [p for p in user if usercode.is_library_path(p)] == []


def test_a_module_name_decides_a_live_frame():
    path = models.__file__
    assert frames.is_user_code("models", path) and frames.is_user_code("thunder.tests.nanogpt_model", path)
    assert not frames.is_user_code("torch.nn.modules.linear", path)
    assert not frames.is_user_code("provenance.timing.rollup", path) and not frames.is_user_code("__main__", "<stdin>")
    assert not frames.is_user_code("_pytest.runner", _pytest.runner.__file__)
    assert not frames.is_user_code("pluggy._callers", pluggy.__file__)


@pytest.fixture
def excluded():
    added: list[str] = []

    def exclude(what: str) -> None:
        usercode.register_exclusion(what)
        added.append(what)

    yield exclude
    for what in added:
        usercode.remove_exclusion(what)


def test_an_excluded_folder_or_package_is_library_code_for_both_readings(tmp_path, excluded):
    launcher = tmp_path / "launch" / "run.py"
    launcher.parent.mkdir()
    launcher.write_text("x = 1\n")
    namesake = tmp_path / "launcher.py"
    namesake.write_text("x = 1\n")
    assert frames.is_user_path(str(launcher)) and frames.frame_at(str(launcher), 1, "main").user

    excluded(str(tmp_path / "launch") + "/")
    assert not frames.is_user_path(str(launcher)) and usercode.is_library_path(str(launcher))
    assert not frames.is_user_code("__main__", str(launcher)) and not frames.frame_at(str(launcher), 1, "main").user
    assert frames.is_user_path(str(namesake)) and not usercode.is_library_path(str(namesake))

    excluded("models")  # a package or module by name: its module name, its file, its path as text
    assert not frames.is_user_code("models", models.__file__) and not frames.is_user_path(models.__file__)
    assert usercode.is_library_path(models.__file__) and "models" in usercode.library_packages()

    for what in ("models", str(tmp_path / "launch") + "/"):
        usercode.remove_exclusion(what)
    assert frames.is_user_path(str(launcher)) and frames.is_user_code("models", models.__file__)
    assert not usercode.is_library_path(models.__file__)
    with pytest.raises(ValueError, match="package name or a path"):
        usercode.register_exclusion("not a name")


def test_one_user_frame_rule():
    lib, mine, outer = Frame("/t/torch/x.py", 1, "f", user=False), Frame("/u/a.py", 2, "g"), Frame("/u/b.py", 3, "h")
    assert user_frame((lib, mine, outer)) is mine and user_frame((lib,)) is None and user_frame(()) is None
    logged = [["/u/b.py", 3, "h", "", True], ["/u/a.py", 2, "g", "", True], ["/t/torch/x.py", 1, "f", "", False]]
    assert user_frame(reversed(logged), is_user=lambda f: f[4]) == logged[1]  # outermost first, reversed
    texts = ["/home/u/train.py", "/opt/site-packages/torch/nn/functional.py"]  # a traceback's files, outermost first
    assert user_frame(reversed(texts), is_user=lambda p: not usercode.is_library_path(p)) == texts[0]


def test_usercode_imports_nothing_heavy():
    code = "import sys, provenance.core.usercode; print(sorted(m for m in ('torch', 'thunder') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


class _Outer(torch.nn.Module):
    pass


class _Inner(torch.nn.Module):
    pass


def test_the_module_line_file_skips_building_blocks_from_other_files():
    from provenance.thunder.frames import module_file

    here, there = os.path.abspath(__file__), sys.modules[models.Net.__module__].__file__
    assert module_file([_Inner, _Outer]) == here  # the innermost, in its parent's file
    assert module_file([torch.nn.Linear, _Inner, _Outer]) == here  # library layers are never it
    assert module_file([models.Net, _Inner, _Outer]) == here  # a layer from another file: its parent's
    assert module_file([models.Net]) == there  # nothing above it: its own
    assert module_file([_Inner, models.Net]) == there  # the file of the nearest user module above decides
    assert module_file([torch.nn.Linear]) is None and module_file([]) is None

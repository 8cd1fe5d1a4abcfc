"""provenance.core.libraries: the distributions the user's frames lie in, each named once."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from provenance.core.libraries import Libraries

yaml = pytest.importorskip("yaml")  # a distribution (PyYAML) named otherwise than its package


def test_a_file_in_site_packages_names_its_distribution_once():
    import thunder

    libraries = Libraries()
    site = Path(thunder.__file__).parent.parent
    files = [str(site / "thunder" / "tests" / "nanogpt_model.py"), "/home/me/train.py",
             str(site / "yaml" / "__init__.py"), str(site / "yaml" / "loader.py")]
    assert libraries.new(files, named={"thunder"}) == [("PyYAML", importlib.metadata.version("PyYAML"), "yaml")]
    assert libraries.new([*files, str(site / "yaml" / "dumper.py")]) == []  # each once
    # unless the header names it: Thunder's bundled models are lightning-thunder's (named otherwise too)
    assert Libraries().new(files[:1]) == [("lightning-thunder", importlib.metadata.version("lightning-thunder"),
                                           "thunder")]
    assert Libraries().new([str(site / "no_such_package" / "x.py"), "/usr/lib/python3.11/os.py"]) == []

"""The Thunder seam (provenance/thunder/compat.py): every name its table lists resolves on the
installed Thunder, the hooks patch only the points it lists, and another series is refused."""

from __future__ import annotations

import re

import pytest

import provenance
from provenance.thunder import UnsupportedThunderVersion, capture, check_version, compat


def _table() -> compat.Series:
    return compat.TABLES[compat.series()]


def test_every_object_and_patch_point_of_the_table_resolves_on_the_installed_thunder():
    table, api = _table(), compat.api()
    for name, ref in table.objects.items():
        if name in table.if_loaded:
            continue
        found = getattr(api, name)
        assert found is not None or name in table.optional, (name, ref)
    alternatives = {point for points in table.one_of.values() for point in points}
    assert alternatives <= set(table.patch_points)
    for owner, attribute in table.patch_points:
        obj = compat.loaded(owner) if owner in table.if_loaded else getattr(api, owner)
        if obj is None:
            assert owner in table.optional | table.if_loaded, owner
            continue
        if (owner, attribute) in alternatives:
            continue  # a torch release has one of its group: checked below
        present = attribute in obj if isinstance(obj, dict) else hasattr(obj, attribute)
        assert attribute == "_provenance" or present, (owner, attribute)  # ours: BSYM_ATTR
    for name, points in table.one_of.items():
        owner, attribute = compat.present_one(name)
        assert (owner, attribute) in points and attribute in vars(getattr(api, owner))


def test_a_torch_without_any_of_a_groups_points_is_named_in_the_error(monkeypatch):
    table = _table()
    monkeypatch.setitem(table.one_of, "graph_break_log", (("symbolic_convert", "no_such_function"),))
    with pytest.raises(AttributeError, match="symbolic_convert.no_such_function"):
        compat.present_one("graph_break_log")
    # ...and capture goes on without that hook, saying so once
    with pytest.warns(RuntimeWarning, match="graph breaks are not recorded.*no_such_function"):
        provenance.enable()
    try:
        assert provenance.enabled() and capture.ACTIVE is not None
    finally:
        provenance.disable()


def test_the_hooks_patch_only_what_the_table_lists():
    table, api = _table(), compat.api()
    listed = {(id(getattr(api, o)), a) for o, a in table.patch_points if o not in table.if_loaded}
    provenance.enable(wait_counters=True, profile=1)
    try:
        points = capture.ACTIVE.patcher.points()
    finally:
        provenance.disable()
    unlisted = [(o, a) for o, a in points if (id(o), a) not in listed]
    # the one entry not in the table: the torch executor's call context (found, not named)
    assert [a for o, a in unlisted if isinstance(o, dict)] == [api.names["wait_symbol"]]
    unlisted = [(o, a) for o, a in unlisted if not isinstance(o, dict)]
    assert unlisted == []
    assert len(points) >= 45


def test_the_version_is_written_once_and_checked_in_one_place():
    assert compat.SUPPORTED_THUNDER == tuple(compat.TABLES)
    assert provenance.thunder.UnsupportedThunderVersion is compat.UnsupportedThunderVersion
    assert check_version() == compat.thunder_version()


@pytest.mark.parametrize("other", ["0.2.7", "0.3.0", "0.2.60", "1.0.0+cu128"])
def test_another_series_is_refused_with_a_clear_error(other):
    with pytest.raises(UnsupportedThunderVersion, match=re.escape(f"but {other} is installed")) as raised:
        compat.series(other)
    assert "pip install 'lightning-thunder==" in str(raised.value)
    assert compat.series(f"{compat.SUPPORTED_THUNDER[0]}.post1") == compat.SUPPORTED_THUNDER[0]


def test_an_unknown_thunder_is_refused_before_any_log_directory_exists(monkeypatch, tmp_path):
    """A Thunder the seam does not know: one clear error naming both versions, and no directory left
    behind, whether enable() was called or THUNDER_TRACE asked for it (the bootstrap warns instead)."""
    monkeypatch.setattr(compat, "thunder_version", lambda: "0.2.9")
    logs = tmp_path / "logs"
    with pytest.raises(UnsupportedThunderVersion, match=r"thunder-provenance \S+ supports lightning-thunder "
                       r"0\.2\.6 and 0\.2\.7\.dev0, but 0\.2\.9 is installed") as raised:
        provenance.enable(logs)
    assert not isinstance(raised.value.__cause__, AttributeError)
    assert not provenance.enabled() and not logs.exists()
    from provenance import bootstrap

    with pytest.warns(RuntimeWarning, match=r"THUNDER_TRACE=.* could not be enabled.*but 0\.2\.9 is installed"):
        bootstrap._enable(str(logs))
    assert not provenance.enabled() and not logs.exists()


def test_a_thunder_that_cannot_import_on_this_torch_is_named_with_its_own_error(tmp_path):
    """Thunder 0.2.6 on torch 2.13 and newer fails at import (`Tensor.align_as`): enable() says so in our
    words, with Thunder's error and where it was raised, instead of raising Thunder's AttributeError."""
    import subprocess
    import sys
    import textwrap

    broken = tmp_path / "thunder"
    broken.mkdir()
    # an installed Thunder's metadata (0.2.6), whose import fails as 0.2.6's does on a newer torch
    (broken / "__init__.py").write_text("import torch\nraise AttributeError(\"type object 'Tensor' has no "
                                        "attribute 'align_as'\")\n")
    program = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import provenance
        from provenance.thunder import UnsupportedThunderVersion
        try:
            provenance.enable({str(tmp_path / 'logs')!r})
        except UnsupportedThunderVersion as exc:
            print("REFUSED", exc)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in __import__("os").environ.items() if not k.startswith("THUNDER_TRACE")})
    assert done.returncode == 0, done.stderr
    refused = done.stdout.strip()
    assert refused.startswith(f"REFUSED lightning-thunder {compat.thunder_version()} does not import on torch "
                              f"{compat.torch_version()}: AttributeError: type object 'Tensor' has no attribute "
                              f"'align_as' (")
    assert "thunder/__init__.py:2)" in refused and "fails the same way without tracing" in refused
    assert not (tmp_path / "logs").exists()

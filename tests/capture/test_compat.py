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
    assert compat.series(f"{compat.SUPPORTED_THUNDER[-1]}.post1") == compat.SUPPORTED_THUNDER[-1]

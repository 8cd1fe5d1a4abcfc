"""Milliseconds, the unit every time figure is shown in: the conversion from the logs' nanoseconds
and the five ways a figure is written (prose, table cell, page label, a short ASCII label, JSON),
in one place.

Each writing fits where it goes: prose adapts its digits (`0.412 ms`, `12.4 ms`), a terminal
table keeps three decimals in a column and a dot for nothing, a page label drops digits it
cannot show (`412 ms`, `4.1 ms`), an op's label on a trace line turns to µs below 0.1 ms
(`45.6 us`), JSON keeps four decimals (the diff's before and after).
"""

from __future__ import annotations

__all__ = ["NS_PER_MS", "ms", "ms_cell", "ms_json", "ms_label", "ms_short", "ms_text"]

NS_PER_MS = 1e6


def ms(ns: float) -> float:
    """Nanoseconds as milliseconds."""
    return ns / NS_PER_MS


def ms_text(ns: float, unit: bool = True) -> str:
    """Prose: three decimals below 10 ms, one above (`0.412 ms`, `12.4 ms`)."""
    value = ms(ns)
    text = f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return f"{text} ms" if unit else text


def ms_cell(ns: float) -> str:
    """A terminal table's cell: three decimals, `·` for nothing."""
    return f"{ms(ns):.3f}" if ns else "·"


def ms_label(value_ms: float) -> str:
    """A page's label of a value already in ms: whole ms from 10 up, else one decimal."""
    return f"{value_ms:.0f} ms" if value_ms >= 10 else f"{value_ms:.1f} ms"


def ms_json(ns: float) -> float:
    """A figure a JSON document compares: four decimals."""
    return round(ms(ns), 4)


def ms_short(ns: float) -> str:
    """A short ASCII label of an op on a trace line: `1.23 ms`, `45.6 us`, `0.78 us`."""
    value = ms(ns)
    if value >= 0.1:
        return f"{value:.2f} ms"
    return f"{value * 1000:.1f} us" if value >= 0.001 else f"{value * 1000:.2f} us"

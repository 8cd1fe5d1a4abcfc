"""read/read_ahead.py: the records of the types asked for, found without parsing the other lines,
with the line number of each one `take` rejects, whatever the chunking (lines longer than a
chunk, a record cut by a chunk's end, a truncated last line)."""

from __future__ import annotations

import random

import orjson
import pytest

from provenance.report.read import read_ahead


def _log(rng: random.Random, n: int) -> tuple[list[bytes], list[tuple[int, str]], int]:
    lines, bad, wanted = [], [], 0
    for number in range(1, n + 1):
        kind = rng.choice(["trace", "profile_call", "profile_ops", "prov", "junk"])
        if kind == "junk":
            lines.append(b'{"type": "profile_call", oops' if rng.random() < 0.5 else b"not json at all")
            continue
        record = {"type": kind, "pad": "x" * rng.choice([0, 10, 100, 300]), "n": number}
        if kind.startswith("profile_"):
            wanted += 1
            if rng.random() < 0.3:
                record["bad"] = True
                bad.append((number, f"bad {number}"))
        lines.append(orjson.dumps(record))
    return lines, bad, wanted


@pytest.mark.parametrize("chunk", [16, 64, 257, 1 << 20])
def test_rejected_records_are_named_by_their_line_whatever_the_chunks(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(read_ahead, "CHUNK", chunk)
    rng = random.Random(chunk)
    lines, bad, wanted = _log(rng, 400)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"type": "profile_ops", "cut sh')  # a truncated last line
    taken = []

    def take(data: dict) -> str | None:
        taken.append(data["n"])
        return f"bad {data['n']}" if data.get("bad") else None

    found = read_ahead.scan(path, {"profile_call", "profile_ops"}, take)
    assert found.records == wanted == len(taken)
    assert taken == sorted(taken)  # in the file's order
    assert found.problems == bad and found.more_problems == 0

from __future__ import annotations

import pytest
from diff_logs import make

# Variants made together, whichever of them a test asks for first: runs compared for noise, or for
# one change, share the machine's load (their per-call spreads are comparable).
BATCHES = (("base1", "base2", "base3", "relu"), ("wide", "recompile"), ("ranks", "ranks_relu1"), ("fx", "fx_break"))


class Logs:
    """The variants' log directories, each made on first use with the rest of its batch."""

    def __init__(self, root) -> None:
        self.root, self.made = root, {}

    def __call__(self, *names: str):
        missing = [n for n in names if n not in self.made]
        for batch in BATCHES:
            if set(batch) & set(missing):
                missing = [*missing, *(n for n in batch if n not in missing and n not in self.made)]
        if missing:
            self.made.update(make(self.root, missing))
        found = [self.made[n] for n in names]
        return found[0] if len(found) == 1 else found


@pytest.fixture(scope="session")
def diff_logs(tmp_path_factory):
    return Logs(tmp_path_factory.mktemp("diff_logs"))

from __future__ import annotations

import pytest
from diff_logs import make


class Logs:
    """The variants' log directories, each made on first use, one run at a time: runs on one machine
    at the same time contend, and on 2 cores a run timed while another compiles is slower in every
    call (made six at once, the same program's runs differed beyond their spreads in CI)."""

    def __init__(self, root) -> None:
        self.root, self.made = root, {}

    def __call__(self, *names: str):
        for name in names:
            if name not in self.made:
                self.made.update(make(self.root, [name]))
        found = [self.made[n] for n in names]
        return found[0] if len(found) == 1 else found


@pytest.fixture(scope="session")
def diff_logs(tmp_path_factory):
    return Logs(tmp_path_factory.mktemp("diff_logs"))

from __future__ import annotations

import pytest
from diff_logs import make


class Logs:
    """The variants' log directories, each made on first use (several at once where a test asks)."""

    def __init__(self, root) -> None:
        self.root, self.made = root, {}

    def __call__(self, *names: str):
        missing = [n for n in names if n not in self.made]
        if missing:
            self.made.update(make(self.root, missing))
        found = [self.made[n] for n in names]
        return found[0] if len(found) == 1 else found


@pytest.fixture(scope="session")
def diff_logs(tmp_path_factory):
    return Logs(tmp_path_factory.mktemp("diff_logs"))

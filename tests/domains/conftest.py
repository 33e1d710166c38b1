"""The real local sandbox (pre-started workers, rlimits, bubblewrap when installed), shared by the domain tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def sandbox():
    from propel.sandbox.local import LocalSandbox

    with LocalSandbox(max_workers=2) as box:
        yield box

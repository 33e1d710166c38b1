"""The ``propel`` process fixes glibc's mmap threshold (``propel.cli.allocator``) unless the environment sets it."""

from __future__ import annotations

import sys

import pytest

from propel.cli.allocator import fix_mmap_threshold


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_threshold_is_fixed_on_linux_unless_the_environment_sets_it(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert fix_mmap_threshold() is True
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert fix_mmap_threshold() is False  # the user's own setting wins

"""``propel.host_memory``: freed heap memory leaves the resident set where a phase ends."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from propel.host_memory import release_freed_memory


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_memory_leaves_the_resident_set():
    """Blocks of 1 MiB freed between live ones stay resident under glibc's default (the heap cannot shrink past a
    live block), until they are released."""
    big = torch.ones(2**20)  # a freed 4 MiB mapping raises glibc's mmap threshold: the 1 MiB blocks are heap
    del big
    blocks = [torch.ones(2**18) for _ in range(400)]  # 400 x 1 MiB, touched
    keep = blocks[9::10]  # every tenth stays alive, so the freed ones lie between live blocks
    del blocks
    before = _rss_mb()
    assert release_freed_memory() is True
    after = _rss_mb()
    assert before - after > 200, (before, after)  # of the 360 MiB freed
    assert all(float(t.sum()) == 2**18 for t in keep)  # the live blocks are untouched

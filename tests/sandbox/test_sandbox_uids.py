"""Sandbox uids are leased host-wide: two sandboxes, in one process or two, never run jobs as the same uid."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from propel.sandbox import Job, Limits, LocalSandbox
from propel.sandbox.uids import UidLeases

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="uids are leased only when running as root")
BASE = 63000  # away from the default base, so a sandbox of another test run on this host does not interfere


def test_leases_are_exclusive_and_released():
    a, b = UidLeases(BASE, span=3), UidLeases(BASE, span=3)
    first, second = a.claim(), b.claim()
    assert first != second and {first, second} <= {BASE, BASE + 1, BASE + 2}
    third = a.claim()
    with pytest.raises(Exception, match="held by other sandboxes"):
        b.claim()
    a.release(first)
    assert b.claim() == first
    for lease in (a, b):
        lease.close()
    assert third not in (first, second)


def test_a_lease_held_by_another_process_is_skipped_and_freed_when_it_dies():
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys
                from propel.sandbox.uids import UidLeases
                print(UidLeases({BASE}).claim(), flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        held = int(holder.stdout.readline())
        mine = UidLeases(BASE)
        assert mine.claim() != held
    finally:
        holder.kill()
        holder.wait()
    assert mine.claim() == held  # the kernel dropped the dead holder's lock
    mine.close()


@root_only
def test_two_sandboxes_never_share_a_uid():
    """The regression: a benchmark's sandbox and the suite's used the same uids, and one's session clean-up (kill
    every process of its uid) killed the other's worker."""
    job = Job(command=["id", "-u"], limits=Limits(timeout_s=5))
    with LocalSandbox(max_workers=2, isolation="none") as a, LocalSandbox(max_workers=1, isolation="none") as b:
        a.warm_up()
        with b.session() as session:
            session_uid = int(session.run(job).stdout)
        b_uid = int(b.run(job).stdout)
        a_uids = set(a._slot_uids.values())
        assert len(a_uids) == 2 and not a_uids & {session_uid, b_uid}, (a_uids, session_uid, b_uid)
        assert all(a.run(job).ok for _ in range(4))  # a's workers outlived b's session clean-up

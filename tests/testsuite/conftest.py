"""Fixtures of the fingerprint-parity and watch-aware tests: a sandbox per backend (one per module) and the
observables ``docs/trusted_grading.md`` lists as allowed differences."""

from __future__ import annotations

from pathlib import Path

import pytest

from propel.testing import fingerprint as fp

DOC = Path(__file__).resolve().parents[2] / "docs" / "trusted_grading.md"


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def box(request, docker_sandbox_or_skip):
    if request.param == "local":
        from propel.sandbox import LocalSandbox

        with LocalSandbox(max_workers=2) as sandbox:
            yield sandbox
    else:
        with docker_sandbox_or_skip(max_workers=2) as sandbox:
            yield sandbox


@pytest.fixture(scope="module")
def allowed():
    return fp.documented(DOC.read_text(encoding="utf-8"))

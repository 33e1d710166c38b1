"""``scripts/test_times.py`` on a real pytest JUnit report: files ranked by their total time, test classes folded
into their file, every case counted (what ``scripts/test.sh`` prints after each stage)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_times.py"


def _module():
    spec = importlib.util.spec_from_file_location("test_times", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_slowest_file_and_test_come_first(tmp_path):
    pkg = tmp_path / "suite"
    pkg.mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (pkg / "test_fast.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    (pkg / "test_slow.py").write_text(
        "import time\n\n\nclass TestWait:\n    def test_wait(self):\n        time.sleep(0.4)\n\n\n"
        "def test_quick():\n    pass\n"
    )
    report = tmp_path / "report.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0",
         f"--junitxml={report}", "suite"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    times = _module()
    cases = times.case_times([report])
    assert sorted(c[0] for c in cases) == ["suite/test_fast.py"] * 2 + ["suite/test_slow.py"] * 2
    text = times.main([str(report), "--top", "2"])
    assert text.startswith("4 tests, ")
    files = [line for line in text.splitlines() if line.startswith("| suite/")]
    assert files[0].startswith("| suite/test_slow.py | 2 | ") and files[1].startswith("| suite/test_fast.py | 2 | ")
    assert "| suite/test_slow.py::test_wait | 0.4 |" in text

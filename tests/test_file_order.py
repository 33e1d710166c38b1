"""The suite's file order (tests/conftest.py): files start longest first by their recorded seconds, a file's tests
keep their order, and ``--store-file-seconds`` merges a run's measured seconds into the record."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]


def root_conftest(request):
    path = str(ROOT / "tests" / "conftest.py")
    return next(p for p in request.config.pluginmanager.get_plugins() if getattr(p, "__file__", None) == path)


def test_files_start_longest_first_and_a_run_merges_its_seconds(request, tmp_path, monkeypatch):
    conftest = root_conftest(request)
    record = tmp_path / "file_seconds.json"
    record.write_text(json.dumps({"tests/b.py": 10.0, "tests/c.py": 50.0}))
    monkeypatch.setattr(conftest, "FILE_SECONDS", record)
    ids = ["tests/a.py::x", "tests/b.py::y", "tests/b.py::z", "tests/c.py::w", "tests/d.py::v"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [ids[3], ids[1], ids[2], ids[0], ids[4]]  # unmeasured files keep their place

    store = conftest._FileSeconds()
    for nodeid, seconds in [("tests/a.py::x", 1.5), ("tests/a.py::x", 0.5), ("tests/c.py::w", 2.0)]:
        store.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=seconds))
    store.pytest_sessionfinish(None)
    assert json.loads(record.read_text()) == {"tests/b.py": 10.0, "tests/a.py": 2.0, "tests/c.py": 2.0}
    assert next(iter(json.loads(record.read_text()))) == "tests/b.py"  # written longest first


def test_the_record_names_files_that_exist():
    record = json.loads((ROOT / "tests" / "file_seconds.json").read_text())
    assert record and all((ROOT / path).is_file() for path in record)

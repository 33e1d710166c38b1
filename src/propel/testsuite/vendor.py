"""pytest as one zip the sandbox imports from: the sandbox's interpreter has the standard library only.

The zip holds the pure-Python sources of the packages installed here (``pytest``, ``_pytest``, ``pluggy``,
``iniconfig``, ``packaging``, most of ``pygments``). It is built once per process (about a second) and sent with
each sandbox job as a single file.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import zipfile
from importlib._bootstrap_external import _code_to_hash_pyc
from importlib.util import source_hash

PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "pygments")
"""Top-level modules/packages copied into the zip (``py`` is pytest's one-file shim; pytest imports pygments)."""
PYGMENTS_KEEP = ("lexers/__init__.py", "lexers/_mapping.py", "lexers/python.py", "lexers/diff.py")
"""pygments' lexers are most of its size: keep the lexer modules pytest imports, drop the other lexers."""
ZIP_NAME = "propel_testlib.zip"


def _location(name: str) -> tuple[str, bool]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"the test-suite reward needs {name!r} installed in the trainer's environment (pip install pytest)"
        )
    if spec.submodule_search_locations:
        return os.path.dirname(spec.origin), True
    return spec.origin, False


def _dropped(arc: str) -> bool:
    return arc.startswith("pygments/lexers/") and arc.removeprefix("pygments/") not in PYGMENTS_KEEP


@functools.lru_cache(maxsize=1)
def testlib_zip() -> bytes:
    """The zip's bytes: sources plus unchecked hash-based ``.pyc`` files compiled by this interpreter (the sandbox's
    Python of the same minor version imports them without compiling; another version falls back to the sources),
    stored uncompressed so that imports cost no inflation."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name in PACKAGES:
            path, is_package = _location(name)
            if not is_package:
                zf.write(path, os.path.basename(path))
                continue
            root = os.path.dirname(path)
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for file in sorted(files):
                    full = os.path.join(folder, file)
                    arc = os.path.relpath(full, root)
                    if not file.endswith(".py") or _dropped(arc):
                        continue
                    zf.write(full, arc)
                    with open(full, "rb") as f:
                        source = f.read()
                    code = compile(source, arc, "exec", dont_inherit=True)
                    zf.writestr(arc + "c", _code_to_hash_pyc(code, source_hash(source), checked=False))
    return buf.getvalue()

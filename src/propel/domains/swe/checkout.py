"""Clean, git-initialised checkouts of the SWE repos, built from their PyPI sdists and cached on disk.

The sdist is fetched once through PyPI's simple index (JSON, PEP 691) and checked against the profile's sha256, so
a checkout is the same bytes on every machine; after that everything works offline. The checkout is one commit with
a fixed author and date (the same commit id everywhere), and ``git apply --check`` against it is the first validity
test of a bug.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path

from propel.domains.swe.repos import RepoProfile
from propel.durable import publish_dir, write_with
from propel.errors import PropelError
from propel.paths import cache_dir

INDEX_URL = "https://pypi.org/simple/"
"""PyPI's simple index; override with ``PROPEL_PYPI_SIMPLE`` (a mirror that speaks PEP 691 JSON)."""
CLEAN_MARK = ".git/propel-clean"
"""Written last: a checkout folder without it is an interrupted build and is rebuilt."""
GIT_ENV = {
    "GIT_AUTHOR_NAME": "propel",
    "GIT_AUTHOR_EMAIL": "propel@localhost",
    "GIT_COMMITTER_NAME": "propel",
    "GIT_COMMITTER_EMAIL": "propel@localhost",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class FetchError(PropelError):
    """An sdist cannot be fetched or does not match its pinned hash."""


def swe_cache(root: str | os.PathLike | None = None) -> Path:
    """Where sdists and checkouts live: ``root`` or ``<propel cache>/swe``."""
    path = Path(root) if root is not None else cache_dir() / "swe"
    path.mkdir(parents=True, exist_ok=True)
    return path


def fetch_sdist(profile: RepoProfile, cache: str | os.PathLike | None = None) -> Path:
    """The profile's sdist archive, downloaded on first use and verified against ``profile.sha256``."""
    target = swe_cache(cache) / "sdists" / profile.archive
    if target.exists() and _sha256(target) == profile.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    index = os.environ.get("PROPEL_PYPI_SIMPLE", INDEX_URL).rstrip("/") + "/"
    page = urllib.parse.urljoin(index, f"{profile.dist}/")
    try:
        request = urllib.request.Request(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            files = json.load(response)["files"]
        entry = next((f for f in files if f["filename"] == profile.archive), None)
        if entry is None:
            raise FetchError(f"{profile.archive} is not on {page}; check the profile's version")
        url = urllib.parse.urljoin(page, entry["url"])

        def download(tmp: Path) -> None:
            with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=120) as response:
                shutil.copyfileobj(response, out)
            got = _sha256(tmp)
            if got != profile.sha256:
                raise FetchError(f"{profile.archive} has sha256 {got}, the profile pins {profile.sha256}")

        write_with(target, download)
    except FetchError:
        raise
    except (OSError, ValueError, KeyError) as e:
        raise FetchError(
            f"cannot fetch {profile.archive} from {page}: {e} (set PROPEL_PYPI_SIMPLE for a mirror)"
        ) from e
    return target


def checkout(profile: RepoProfile, cache: str | os.PathLike | None = None) -> Path:
    """A clean checkout of the repo (one git commit), built from the sdist on first use; callers must not modify it."""
    target = swe_cache(cache) / "repos" / profile.key
    if (target / CLEAN_MARK).exists():
        return target
    archive = fetch_sdist(profile, cache)

    def build(folder: Path) -> None:
        unpacked = folder / ".sdist"
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        (top,) = list(unpacked.iterdir())  # an sdist holds one folder, name-version
        for entry in top.iterdir():
            os.replace(entry, folder / entry.name)
        shutil.rmtree(unpacked)
        git(folder, "init", "-q", "-b", "main")
        git(folder, "add", "-A")
        git(folder, "commit", "-q", "--no-gpg-sign", "-m", f"{profile.key} from its PyPI sdist")
        (folder / CLEAN_MARK).write_text(profile.sha256 + "\n")

    publish_dir(build, target, keep_existing=True)  # another process's checkout is the same commit: keep it in use
    return target


def git(cwd: str | os.PathLike, *args: str, input: bytes | None = None, check: bool = True):
    """Run git in ``cwd`` with a fixed identity and no user or system configuration."""
    env = {**os.environ, **GIT_ENV, "HOME": os.fspath(cwd)}
    env.pop("GIT_DIR", None)
    return subprocess.run(["git", *args], cwd=cwd, env=env, input=input, capture_output=True, check=check)


def repo_files(root: str | os.PathLike) -> dict[str, bytes]:
    """Every file of a checkout but ``.git``: ``{relative path: bytes}`` (what a sandbox job is given)."""
    root = Path(root)
    out: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink():
                continue
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

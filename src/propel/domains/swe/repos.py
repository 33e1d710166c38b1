"""The SWE domain's repositories: small pure-Python libraries whose PyPI source distributions ship their tests.

Each ``RepoProfile`` pins one sdist (name, version, sha256) and says where its code and tests are, so a checkout can
be rebuilt offline from the cached archive and a bug's diff can be judged against it. The shipped repos were chosen
because their suites need nothing beyond the standard library and pytest, run in a few seconds in the sandbox, and
are not pytest's own dependencies (a suite of ``iniconfig`` would import the vendored copy instead of the checkout).
Several repos exist so that repo-disjoint splits (probe training, RL training, held-out evaluation) are possible.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

TEST_FILE_GLOBS = (
    "test_*.py",
    "*/test_*.py",
    "*_test.py",
    "conftest.py",
    "*/conftest.py",
    "tests/*",
    "test/*",
    "*/tests/*",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
)
"""Paths a bug may not touch: test modules, test folders and the files pytest reads its configuration from
(``fnmatch`` patterns, where ``*`` also matches ``/``)."""


@dataclass(frozen=True)
class RepoProfile:
    """One repository: which sdist it is built from and how its suite runs."""

    name: str
    """Short name, also the cache folder's name (``parse``)."""
    dist: str
    """The distribution's name on PyPI (``parse``)."""
    version: str
    """The pinned release; the sdist is ``{sdist_stem}-{version}.tar.gz``."""
    sha256: str
    """Hash of the sdist archive; a download that does not match is refused."""
    test_paths: tuple[str, ...]
    """What pytest is given to collect, relative to the checkout root."""
    source_globs: tuple[str, ...]
    """The code under test (where bugs go), relative to the checkout root; test files are excluded even if matched."""
    python_path: tuple[str, ...] = (".",)
    """Folders put first on ``sys.path`` so the tests import the checkout (``src`` for src layouts)."""
    sdist_stem: str = ""
    """The archive's name before ``-{version}`` when it differs from ``dist`` (``more_itertools``)."""
    test_globs: tuple[str, ...] = TEST_FILE_GLOBS
    """Paths a bug may not touch (see ``TEST_FILE_GLOBS``)."""
    timeout_s: float = 60.0
    """Wall-clock limit of one run of the whole suite."""
    pytest_args: tuple[str, ...] = field(default=())
    """Extra pytest arguments (deselections of tests that need the network or extra packages)."""

    @property
    def archive(self) -> str:
        """File name of the sdist on PyPI."""
        return f"{self.sdist_stem or self.dist}-{self.version}.tar.gz"

    @property
    def key(self) -> str:
        """``name-version``: the cache folder of this profile's checkout and manifest."""
        return f"{self.name}-{self.version}"

    def is_test_path(self, path: str) -> bool:
        """Whether ``path`` (relative, ``/``-separated) is a test file or test configuration a bug must not touch."""
        path = path.removeprefix("./")
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in self.test_globs)

    def is_source_path(self, path: str) -> bool:
        """Whether ``path`` is code under test: matched by ``source_globs`` and not a test path."""
        return any(fnmatch.fnmatchcase(path, g) for g in self.source_globs) and not self.is_test_path(path)


REPOS: dict[str, RepoProfile] = {
    p.name: p
    for p in (
        RepoProfile(
            name="parse",
            dist="parse",
            version="1.20.2",
            sha256="b41d604d16503c79d81af5165155c0b20f6c8d6c559efa66b4b695c3e5a0a0ce",
            test_paths=("tests",),
            source_globs=("parse.py",),
        ),
        RepoProfile(
            name="inflection",
            dist="inflection",
            version="0.5.1",
            sha256="1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
            test_paths=("test_inflection.py",),
            source_globs=("inflection/*.py",),
        ),
        RepoProfile(
            name="isodate",
            dist="isodate",
            version="0.7.2",
            sha256="4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
            test_paths=("tests",),
            source_globs=("src/isodate/*.py",),
            python_path=("src",),
        ),
        RepoProfile(
            name="toolz",
            dist="toolz",
            version="1.2.0",
            sha256="9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
            test_paths=("toolz/tests",),
            source_globs=("toolz/*.py",),
        ),
        RepoProfile(
            name="cachetools",
            dist="cachetools",
            version="8.0.1",
            sha256="deb1d376d4d28c2f33f3e3058043b005e0af75c35c094bd54053e27d2906ad95",
            test_paths=("tests",),
            source_globs=("src/cachetools/*.py",),
            python_path=("src",),
        ),
        RepoProfile(
            name="semver",
            dist="semver",
            version="3.1.1",
            sha256="149b26cabada6f63212f97e94505d21578cb1d280cf714827f328d5e70765fea",
            test_paths=("tests",),
            source_globs=("src/semver/*.py",),
            python_path=("src",),
        ),
        RepoProfile(
            name="webcolors",
            dist="webcolors",
            version="25.10.0",
            sha256="62abae86504f66d0f6364c2a8520de4a0c47b80c03fc3a5f1815fedbef7c19bf",
            test_paths=("tests",),
            source_globs=("src/webcolors/*.py",),
            python_path=("src",),
        ),
        RepoProfile(
            name="tabulate",
            dist="tabulate",
            version="0.10.0",
            sha256="e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d",
            test_paths=("test",),
            source_globs=("tabulate/*.py",),
        ),
    )
}
"""The shipped repositories by name (8; each suite runs in about a second or two in the sandbox)."""


def get_repo(name: str) -> RepoProfile:
    """The profile called ``name``; raises ``KeyError`` naming the known ones."""
    try:
        return REPOS[name]
    except KeyError:
        raise KeyError(f"unknown SWE repo {name!r}; known: {', '.join(sorted(REPOS))}") from None


SPLITS: dict[str, tuple[str, ...]] = {
    "probe_train": ("parse", "inflection", "isodate", "webcolors"),
    "rl_train": ("toolz", "cachetools"),
    "eval": ("semver", "tabulate"),
}
"""Repo-disjoint splits: the probe is trained (and cross-validated by repo) on ``probe_train``'s bugs, the generator
is trained with RL on ``rl_train``, and evaluated with fresh repair trials on the held-out ``eval`` repos."""

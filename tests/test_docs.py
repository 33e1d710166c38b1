"""The documentation site builds in strict mode (a broken link, a missing anchor, a page left out of the nav or an
API reference that cannot be collected fails the build), every sub-package has an API page, and README.md stays the
front page: at most 150 lines, opening with the two commands that work on a fresh machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_in_strict_mode(tmp_path, require):
    require("mkdocs")
    require("material")
    require("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    for page in ("index.html", "guide/getting_started.html", "guide/bring_your_own.html", "guide/trl.html"):
        assert (site / page).is_file(), page  # page.html, not page/index.html: links work opened from disk
    assert 'href="guide/getting_started.html"' in (site / "index.html").read_text()
    rewards = (site / "api" / "rewards.html").read_text()
    assert 'id="propel.rewards.TestSuiteReward"' in rewards and 'id="propel.rewards.TRLRewardFunction"' in rewards


def test_every_sub_package_has_an_api_page():
    documented = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        documented |= set(re.findall(r"^::: (propel(?:\.\w+)*)\s*$", page.read_text(), flags=re.M))
    packages = {f"propel.{p.parent.name}" for p in (ROOT / "src" / "propel").glob("*/__init__.py")}
    missing = {p for p in packages if not any(d == p or d.startswith(p + ".") for d in documented)}
    assert not missing, f"sub-packages without an API page in docs/api/: {sorted(missing)}"


def test_the_readme_is_a_front_page_opening_with_the_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "README.md is the front page: move details to docs/"
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S).group(1)
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"], commands
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).is_file(), target


def test_the_architecture_page_shows_the_pipeline_links_table_as_the_data_holds_it():
    from propel.pipeline.links import table

    page = (ROOT / "docs" / "architecture.md").read_text()
    shown = page.split("<!-- links-table: generated from propel.pipeline.links.table() -->\n")[1]
    assert shown.split("<!-- /links-table -->")[0] == table()


def test_the_architecture_page_shows_what_each_stage_hands_on_as_the_data_holds_it():
    from propel.pipeline.outputs import table

    page = (ROOT / "docs" / "architecture.md").read_text()
    shown = page.split("<!-- outputs-table: generated from propel.pipeline.outputs.table() -->\n")[1]
    assert shown.split("<!-- /outputs-table -->")[0] == table()

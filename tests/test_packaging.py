"""The two ways to install (pip + pyproject, conda + environment.yml) must agree."""
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# Extras the conda environment leaves out on purpose. "verl": the verl plug-in's loss path needs only
# `pip install --no-deps verl==0.9.1` and a few modules (docs/scaling_out.md); the extra with its
# dependencies pulls verl's training stack (ray[default], wandb, transformers<5.11, ...).
NOT_IN_CONDA = {"verl"}


def _pyproject_deps() -> dict:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = {"core": project["dependencies"], **project["optional-dependencies"]}
    return {name: sorted(deps) for name, deps in groups.items() if name not in NOT_IN_CONDA}


def _conda_pip_lines() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip section"
    return pip[0]["pip"]


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    lines = _conda_pip_lines()
    requirements = sorted(l for l in lines if not l.startswith("-"))
    expected = sorted(d for deps in _pyproject_deps().values() for d in deps)
    assert requirements == expected


def test_environment_yml_installs_the_package_with_every_extra():
    extras = set(_pyproject_deps()) - {"core"}
    editable = [l for l in _conda_pip_lines() if l.startswith("-e ")]
    assert len(editable) == 1
    listed = set(editable[0].split("[", 1)[1].rstrip("]").split(","))
    assert listed == extras


def test_no_bare_torch_pin_that_pulls_cuda():
    """A CPU build must stay possible: torch is a lower bound, never an exact CUDA version."""
    torch_req = [d for d in _pyproject_deps()["core"] if d.startswith("torch")]
    assert torch_req and "+cu" not in torch_req[0]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in _conda_pip_lines()

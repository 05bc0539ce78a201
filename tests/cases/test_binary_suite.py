"""The binary family: every op ``BinaryOp.cpp`` registers has a launcher, a reference and a suite; the edge
inputs are where the suite says."""

from __future__ import annotations

import re

import numpy as np

from vkdiff import reference
from vkdiff.cases.kernel_suites.tensor import binary
from vkdiff.cases.kernels import all_cases, load_suites
from vkdiff.device.launchers import LAUNCHERS


def _args(case_id: str) -> dict:
    case = next(c for c in all_cases("^" + re.escape(case_id) + "$"))
    return binary.binary_args(case, np.random.default_rng(case.seed()))


def test_every_op_binaryop_cpp_registers_is_covered(et_tree):
    source = (et_tree / "backends/vulkan/runtime/graph/ops/impl/BinaryOp.cpp").read_text()
    registered = set(re.findall(r"VK_REGISTER_OP\(([\w.]+),", source))
    assert len(registered) == 16
    suites = load_suites()
    gaps = {op: [name for name, ok in (("launcher", op in LAUNCHERS), ("reference", op in reference.OPS),
                                       ("suite", op in suites))
                 if not ok] for op in registered}
    assert not {op: g for op, g in gaps.items() if g}


def test_edges():
    eq = _args("eq[C3-H5-W6-oC3-oH5-oW6-fp32-texture3d]")
    a, b = eq["self"].reshape(-1), eq["other"].reshape(-1)
    assert (a[:4] == b[:4]).all() and (np.nextafter(a[4:8], np.float32(np.inf)) == b[4:8]).all()
    power = _args("pow[C3-H5-W6-oC3-oH5-oW6-fp32-buffer]")
    assert power["self"].reshape(-1)[0] < 0 and float(power["exponent"].reshape(-1)[0]).is_integer()
    special = _args("minimum[C3-H5-W6-oC3-oH5-oW6-fp16-buffer-special]")["self"]
    assert np.isnan(special).sum() == 1 and np.isinf(special).sum() == 2
    assert _args("div_mode[C3-H5-W6-oC3-oH5-oW6-fp32-buffer-trunc]")["rounding_mode"] == "trunc"
    flags = _args("logical_or[W67-oW67-bool-texture3d]")["self"]
    assert flags.dtype == np.bool_ and flags.any() and not flags.all()


def test_every_op_full_cpp_registers_is_covered_and_fills_reach_overflow(et_tree):
    from vkdiff.cases.kernel_suites.tensor import full

    source = (et_tree / "backends/vulkan/runtime/graph/ops/impl/Full.cpp").read_text()
    registered = set(re.findall(r"VK_REGISTER_OP\(([\w.]+),", source))
    assert len(registered) == 6 and registered <= set(LAUNCHERS) & set(reference.OPS) & set(load_suites())
    case = next(c for c in all_cases(r"^full\[C3-H5-W6-fp16-buffer-overflow\]$"))
    assert full.full_args(case, np.random.default_rng(0))["fill_value"] > float(np.finfo(np.float16).max)


def test_arange_is_covered_and_its_sizes_follow_resize_arange_node():
    from vkdiff.device.launchers.arange import resize_arange_node

    assert "aten.arange.start_step" in set(LAUNCHERS) & set(reference.OPS) & set(load_suites())
    for case in all_cases(r"^arange\["):
        args = load_suites()[case.op].make_args(case, np.random.default_rng(0))
        assert resize_arange_node(args)[0] == (case.size("W"),)

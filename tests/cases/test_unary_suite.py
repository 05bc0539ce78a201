"""The unary family: every op ``UnaryOp.cpp`` registers has a launcher, a reference and a suite, and the edge
generator reaches its edges."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vkdiff import reference
from vkdiff.cases.kernel_suites.tensor import unary
from vkdiff.cases.kernels import all_cases, load_suites
from vkdiff.device.graph.vtensor import TensorSpec
from vkdiff.device.launchers import LAUNCHERS


def _args(case_id: str) -> dict:
    case = next(c for c in all_cases("^" + re.escape(case_id) + "$"))
    return unary.unary_args(case, np.random.default_rng(case.seed()))


def test_every_op_unaryop_cpp_registers_has_a_launcher_a_reference_and_a_suite(et_tree):
    source = (et_tree / "backends/vulkan/runtime/graph/ops/impl/UnaryOp.cpp").read_text()
    registered = set(re.findall(r"VK_REGISTER_OP\((aten\.\w+\.default)", source))
    assert len(registered) == 21
    missing = {op: [what for what, table in (("launcher", LAUNCHERS), ("reference", reference.OPS),
                                             ("suite", load_suites())) if op not in table]
               for op in registered}
    assert not {op: gaps for op, gaps in missing.items() if gaps}


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_edges_reach_saturation_overflow_ties_and_specials(dtype):
    finfo = np.finfo(np.float32 if dtype == "fp32" else np.float16)
    plain = _args(f"tanh[C3-H5-W6-{dtype}-buffer]")["self"].astype(np.float64)
    assert {-13.5, -20.0, 300.0, -300.0, 0.5, 2.5}.issubset(set(plain.reshape(-1)))
    assert plain.max() > 0.8 * float(finfo.max) and np.isfinite(plain).all()
    special = _args(f"tanh[C3-H5-W6-{dtype}-buffer-special]")["self"].astype(np.float64).reshape(-1)
    assert np.isnan(special).sum() == 1 and np.isposinf(special).sum() == 1 and np.isneginf(special).sum() == 1
    subnormal = _args(f"tanh[C3-H5-W6-{dtype}-buffer-subnormal]")["self"].reshape(-1)
    tiny = np.abs(subnormal[(subnormal != 0)]).min()
    assert 0 < tiny < finfo.smallest_normal


def test_domains_scalars_and_other_dtypes():
    assert (_args("sqrt[W67-fp32-buffer]")["self"] >= 0).all()
    periodic = _args("sin[W67-fp32-buffer]")["self"]
    assert np.abs(periodic).max() <= np.float32(np.pi) and np.isclose(periodic, np.pi / 2).any()
    assert _args("clamp[W67-fp32-buffer]")["min"] == -0.75
    assert _args("gelu[C3-H5-W6-fp32-buffer-tanh]")["approximate"] == "tanh"
    assert _args("gelu[C3-H5-W6-fp32-buffer]")["approximate"] == "none"
    assert _args("clamp[C3-H5-W6-int32-buffer]")["self"].dtype == np.int32
    flags = _args("bitwise_not[W67-bool-texture3d]")["self"]
    assert flags.dtype == np.bool_ and flags.any() and not flags.all()


def test_limit_cases_reach_the_texture_limits():
    """x extent 4096 texels (lavapipe's largest 3-D image) and z extent 2049 (past the partitioner's 2048)."""
    extents = {c.id: TensorSpec(tuple(c.sizes.values()), "float32", "texture3d", "width").extents
               for c in all_cases(r"^relu\[.*-limit\]$")}
    assert extents == {"relu[W16383-fp32-texture3d-limit]": (4096, 1, 1), "relu[W16383-fp16-texture3d-limit]":
                       (4096, 1, 1), "relu[C2049-H1-W3-fp32-texture3d-limit]": (1, 1, 2049),
                       "relu[C2049-H1-W3-fp16-texture3d-limit]": (1, 1, 2049)}

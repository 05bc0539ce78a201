"""The indexing, concat/split, ``where``, ``tan`` and tensor-scalar families: every op their ``.cpp`` files
register has a launcher, a reference and a suite; the launchers' ported output sizes agree with the
references'; and every edge generator reaches its edge."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vkdiff import reference
from vkdiff.cases.kernel_suites.tensor import indexing, scalar_ops
from vkdiff.cases.kernels import all_cases, load_suites
from vkdiff.device.launchers import LAUNCHERS, launcher_for
from vkdiff.device.launchers.index_select import get_dim_idx

FILES = {"Concat.cpp": 1, "Split.cpp": 1, "Gather.cpp": 1, "IndexSelect.cpp": 1, "IndexTensor.cpp": 1,
         "PixelShuffle.cpp": 1, "Unfold.cpp": 1, "RepeatInterleave.cpp": 1, "Where.cpp": 1, "Tan.cpp": 1,
         "BinaryScalarOp.cpp": 7}
"""The family's ``.cpp`` files and how many ops each registers."""
FAMILY = r"^(cat|split_with_sizes_copy|gather|index_select|index|pixel_shuffle|unfold_copy|repeat_interleave|where|tan|" \
         r"pow_scalar|(eq|ne|lt|le|gt|ge)_scalar)\["


def _args(case_id: str) -> dict:
    case = next(c for c in all_cases("^" + re.escape(case_id) + "$"))
    return load_suites()[case.op].make_args(case, np.random.default_rng(case.seed()))


def test_every_op_the_family_registers_is_covered(et_tree):
    suites = load_suites()
    for name, count in FILES.items():
        source = (et_tree / "backends/vulkan/runtime/graph/ops/impl" / name).read_text()
        registered = set(re.findall(r"VK_REGISTER_OP\(\s*([\w.]+),", source))
        assert len(registered) == count, name
        gaps = {op: [what for what, ok in (("launcher", op in LAUNCHERS), ("reference", op in reference.OPS),
                                           ("suite", op in suites)) if not ok] for op in registered}
        assert not {op: g for op, g in gaps.items() if g}, name
        assert all(launcher_for(op, et_tree).registered_in.endswith(name) for op in registered)


def test_suites_are_sized_and_ids_unique():
    cases = all_cases(FAMILY)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    per_op: dict[str, int] = {}
    for case in cases:
        per_op[case.op] = per_op.get(case.op, 0) + 1
    assert len(per_op) == 17 and all(8 <= n <= 40 for n in per_op.values()), per_op


def test_ported_output_sizes_match_the_references():
    """Each launcher's ``output`` (its resize function, or ATen's sizes where the C++ has none) agrees with the
    reference on every case."""
    for case in all_cases(FAMILY):
        args = load_suites()[case.op].make_args(case, np.random.default_rng(case.seed()))
        expected = reference.evaluate(case.op, args)
        spec = launcher_for(case.op).output(args, None)
        shapes = [tuple(s) for s, _ in spec] if isinstance(spec, list) else [tuple(spec[0])]
        outs = expected if isinstance(expected, tuple) else (expected,)
        assert shapes == [np.shape(o) for o in outs], case.id


def test_index_edges_and_every_index_select_route():
    index = indexing.edge_indices(5, 7, np.random.default_rng(0))
    assert index.dtype == np.int32 and index[0] == 0 and index[1] == 6 and (index == 0).sum() >= 2
    routes = {get_dim_idx(dim, len(shape)) for shape, dim, _ in indexing.INDEX_SELECT.values()}
    assert routes == {-1, -2, -3, -4}
    neg = _args("index[C4-H3-W6-fp32-buffer-r3-neg]")["indices"][0]
    assert neg.min() == -4 and -1 in neg
    gather = _args("gather[C3-H5-W6-fp32-buffer-dimneg1]")
    assert gather["dim"] == -1 and gather["index"].min() == 0 and gather["index"].max() == 5


def test_cat_and_split_pieces_straddle_texels():
    for label, (shapes, dim) in indexing.CAT.items():
        assert any(s[dim] % 4 for s in shapes), label
    from vkdiff.device.launchers.concat import BATCH_SIZE

    assert max(len(shapes) for shapes, _ in indexing.CAT.values()) > BATCH_SIZE
    assert any(np.cumsum(sizes)[0] % 4 for _, sizes, _ in indexing.SPLIT.values())


def test_where_puts_nan_in_both_branches():
    args = _args("where[C3-H5-W6-fp32-texture3d-same-nan]")
    cond = args["condition"].reshape(-1)
    assert cond[0] and not cond[1]
    assert np.isnan(args["self"].reshape(-1)[0]) and np.isnan(args["other"].reshape(-1)[1])


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_tan_reaches_half_pi_and_large_arguments(dtype):
    x = _args(f"tan[C3-H5-W6-{dtype}-buffer-special]")["self"].astype(np.float64)
    assert np.isnan(x).any() and np.isinf(x).sum() == 2
    assert np.min(np.abs(np.abs(x[np.isfinite(x)]) - np.pi / 2)) < 1e-3
    assert np.abs(x[np.isfinite(x)]).max() > 3e4


def test_pow_edges_and_compare_neighbours():
    power = _args("pow_scalar[C3-H5-W6-fp32-buffer-e0]")
    flat = power["self"].reshape(-1)
    assert power["exponent"] == 0.0 and flat[0] < 0 and 0.0 in flat[:5]
    assert _args("pow_scalar[C3-H5-W6-fp16-texture3d-e0p5]")["exponent"] == 0.5
    x = _args("eq_scalar[C3-H5-W6-fp16-texture3d-s0p1-special]")["self"].reshape(-1)
    s = np.float16(0.1)
    assert np.isnan(x[0]) and x[3] == s and x[4] == np.nextafter(s, np.float16(-1)) and x[5] == np.nextafter(
        s, np.float16(1))
    assert _args("lt_scalar[C3-H5-W6-int32-texture3d-s1p5]")["other"] == 1.5
    assert np.isinf(_args("ge_scalar[C3-H5-W6-fp32-texture3d-sinf]")["other"])
    assert {c.dtype for c in all_cases(r"^ne_scalar\[")} == {"fp32", "fp16", "int32"}
    assert scalar_ops.COMPARISONS == ("eq", "ne", "lt", "le", "gt", "ge")

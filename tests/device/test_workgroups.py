"""The local workgroup size as a knob (``--local-wg``)."""

from __future__ import annotations

import pytest

from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.device.runtime.workgroups import LocalWgOverride, parse


def test_sizes_parse_with_an_optional_node_and_bad_ones_are_one_line():
    assert parse("8x8x1") == LocalWgOverride((8, 8, 1)) and parse("default") is None and parse(None) is None
    assert parse("4x16x1@12") == LocalWgOverride((4, 16, 1), 12) and str(parse("4x16x1@12")) == "4x16x1@12"
    assert parse("4x16x1@12").applies_to(12) and not parse("4x16x1@12").applies_to(3)
    for bad in ("8x8", "0x8x1", "8x8x1@", "big"):
        with pytest.raises(ValueError, match="give XxYxZ"):
            parse(bad)


@requires_tree
@requires_vulkan
def test_every_dispatch_takes_the_override_and_a_bounds_checked_kernel_still_passes(et_tree):
    from vkdiff.cases.kernels import all_cases
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.harness.kernels import run_case

    (case,) = [c for c in all_cases() if c.id == "relu[C3-H5-W6-fp32-texture3d]"]
    ctx = DeviceContext(*first_adapter(), ShaderBuilder(et_tree))
    default = run_case(ctx, case)
    ctx.local_wg = parse("1x1x64")
    forced = run_case(ctx, case)
    assert default.status == forced.status == "PASS", forced.reason
    assert forced.dispatch["local"] == [1, 1, 64] != default.dispatch["local"]

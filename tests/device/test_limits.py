"""Mobile limits profiles: devices created with a phone's limits; exceeding one is NOT_SUPPORTED naming it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.testutils import first_adapter, requires_tree, requires_vulkan
from vkdiff.datamodel import Status
from vkdiff.device.transports import limits
from vkdiff.device.boundary import DeviceLimitError
from vkdiff.executors.op_graph import run_op
from vkdiff.verdicts.statuses import status_of_exception


def test_a_profile_only_lowers_limits():
    adapter = {"max-texture-dimension-3d": 16384, "max-texture-dimension-2d": 8192, "other": 7}
    lowered = limits.apply(adapter, "adreno-7xx")
    assert lowered == {"max-texture-dimension-3d": 2048, "max-texture-dimension-2d": 8192, "other": 7}
    assert limits.apply(adapter, None) == adapter


def test_an_unknown_profile_names_the_known_ones():
    with pytest.raises(limits.UnknownLimitsProfileError, match="known: adreno-7xx, mali-g7xx"):
        limits.check_limits_profile("pixel")


@pytest.fixture(scope="module")
def adreno_ctx(et_tree):
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.device.runtime.context import DeviceContext

    found = first_adapter()
    if found is None:
        pytest.skip("NOT_RUN: no Vulkan adapter")
    return DeviceContext(*found, ShaderBuilder(et_tree), "adreno-7xx")


@requires_vulkan
@requires_tree
def test_the_device_is_created_with_the_profile(adreno_ctx):
    assert adreno_ctx.device.limits["max-texture-dimension-3d"] <= 2048
    assert adreno_ctx.device.limits["max-uniform-buffer-binding-size"] <= 65536


@requires_vulkan
@requires_tree
def test_a_texture_beyond_the_profile_is_not_supported_naming_the_limit(adreno_ctx, et_ctx):
    """[1, 4096, 8] width-packed is 4096 texels high: fine on the desktop device, over Adreno's 3D limit."""
    rng = np.random.default_rng(4096)
    args = {"self": rng.standard_normal((1, 4096, 8)).astype(np.float32),
            "other": rng.standard_normal((1, 4096, 8)).astype(np.float32)}
    launch = run_op(et_ctx, "aten.add.Tensor", args, storage="texture3d")
    np.testing.assert_allclose(launch.output, args["self"] + args["other"], rtol=1e-6)
    with pytest.raises(DeviceLimitError, match=r"max-texture-dimension-3d 2048") as caught:
        run_op(adreno_ctx, "aten.add.Tensor", args, storage="texture3d")
    assert status_of_exception(caught.value)[0] is Status.NOT_SUPPORTED

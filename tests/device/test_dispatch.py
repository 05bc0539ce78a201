"""Dispatch paths on a real Vulkan adapter (lavapipe in CI), with the project's own shaders."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from tests.testutils import compile_glsl, requires_test_spirv, requires_vulkan
from vkdiff.device.runtime import layouts, resources
from vkdiff.device.boundary import DeviceLimitError, DispatchError, ShaderLoadError, ShaderUnsupportedError
from vkdiff.device.shaders.dispatch import dispatch, workgroup_count

pytestmark = [requires_vulkan, requires_test_spirv]


def test_workgroup_count_is_div_up():
    assert workgroup_count((10, 5, 1), (4, 4, 64)) == (3, 2, 1)


@pytest.mark.parametrize("n", (1, 63, 64, 1000))
def test_buffer_ubo_push_constants_spec_constants(gpu, pipelines, rng, n):
    pipeline = pipelines.get(compile_glsl("scale_add.glsl"), {3: 5}, (64, 1, 1), label="scale_add")
    x = rng.standard_normal(n).astype(np.float32)
    out = resources.poisoned(gpu, (n,), np.float32, "buffer")
    inp = resources.buffer_tensor(gpu, x)
    ubo = resources.uniform(gpu, np.array([n, 1, 1, 1], np.int32).tobytes())
    dispatch(gpu, pipeline, [out, inp, ubo], (n, 1, 1), struct.pack("<fi", 1.5, 7))
    got = resources.read(gpu, out)
    np.testing.assert_allclose(got, x * 1.5 + 10 + 7 + 64, rtol=1e-6)
    assert not layouts.unwritten_mask(got).any()


@pytest.mark.parametrize("shape", ((3, 5, 6), (2, 7, 9)))
def test_texture3d_sampler_rewrite_and_texel_packing(gpu, pipelines, rng, shape):
    pipeline = pipelines.get(compile_glsl("texel_copy3d.glsl"), {}, (4, 4, 2), label="texel_copy3d")
    x = rng.standard_normal(shape).astype(np.float32)
    out = resources.poisoned(gpu, shape, np.float32, "texture3d")
    inp = resources.texture_tensor(gpu, x)
    sizes = layouts.whcn_sizes(shape)
    ubo = resources.uniform(gpu, np.array(sizes, np.int32).tobytes())
    dispatch(gpu, pipeline, [out, inp, ubo], layouts.texture_extent(shape))
    got = resources.read(gpu, out)
    texel_pos = np.indices(layouts.texture_extent(shape)[::-1])  # z, y, x of each texel
    bonus = np.stack([texel_pos[2], texel_pos[1], texel_pos[0], np.zeros_like(texel_pos[0])], -1).astype(np.float32)
    expected = layouts.from_texels(layouts.to_texels(2 * x) + bonus, shape)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_int_texture2d(gpu, pipelines, rng):
    shape = (5, 12)
    x = rng.integers(-1000, 1000, shape).astype(np.int32)
    w4, h = 3, 5
    pipeline = pipelines.get(compile_glsl("int_texel2d.glsl"), {3: w4, 4: h}, (8, 8, 1), label="int_texel2d")
    out = resources.poisoned(gpu, shape, np.int32, "texture2d")
    inp = resources.texture_tensor(gpu, x, "texture2d")
    dispatch(gpu, pipeline, [out, inp], (w4, h, 1))
    np.testing.assert_array_equal(resources.read(gpu, out), x * 3 - np.tile([1, 2, 3, 4], 3))


def test_unwritten_elements_are_detected(gpu, pipelines):
    n = 37
    pipeline = pipelines.get(compile_glsl("skip_odd.glsl"), {3: n}, (64, 1, 1), label="skip_odd")
    out = resources.poisoned(gpu, (n,), np.float32, "buffer")
    dispatch(gpu, pipeline, [out], (n, 1, 1))
    mask = layouts.unwritten_mask(resources.read(gpu, out))
    np.testing.assert_array_equal(np.flatnonzero(mask), np.arange(1, n, 2))


def test_float16_buffers(gpu, pipelines, rng):
    if "shader-f16" not in gpu.features:
        pytest.skip("NOT_SUPPORTED: adapter lacks shader-f16")
    n = 64
    pipeline = pipelines.get(compile_glsl("half_axpy.glsl"), {3: n // 4}, (64, 1, 1), label="half_axpy")
    x, y = (rng.standard_normal(n).astype(np.float16) for _ in range(2))
    out = resources.poisoned(gpu, (n,), np.float16, "buffer")
    dispatch(gpu, pipeline, [out, resources.buffer_tensor(gpu, x), resources.buffer_tensor(gpu, y)], (n // 4, 1, 1))
    np.testing.assert_array_equal(resources.read(gpu, out), x * np.float16(2) + y)


def test_pipeline_cache_reuses(pipelines):
    spv = compile_glsl("scale_add.glsl")
    assert pipelines.get(spv, {3: 1}, (64, 1, 1)) is pipelines.get(spv, {3: 1}, (64, 1, 1))
    assert pipelines.get(spv, {3: 1}, (64, 1, 1)) is not pipelines.get(spv, {3: 2}, (64, 1, 1))


def test_wrong_binding_count_is_a_dispatch_error(gpu, pipelines):
    pipeline = pipelines.get(compile_glsl("scale_add.glsl"), {3: 0}, (64, 1, 1))
    with pytest.raises(DispatchError, match=re.escape("shader declares bindings [1, 2], launcher gave 1 resources")):
        dispatch(gpu, pipeline, [resources.poisoned(gpu, (4,), np.float32, "buffer")], (4, 1, 1), b"\0" * 8)


def test_wrong_resource_kind_is_a_dispatch_error(gpu, pipelines, rng):
    pipeline = pipelines.get(compile_glsl("scale_add.glsl"), {3: 0}, (64, 1, 1))
    tex = resources.texture_tensor(gpu, rng.standard_normal((2, 4)).astype(np.float32))
    with pytest.raises(DispatchError, match="binding 0 .*expects a storage-buffer, launcher gave texture3d"):
        dispatch(gpu, pipeline, [tex, tex, tex], (4, 1, 1), b"\0" * 8)


def test_too_large_workgroup_is_not_supported(pipelines):
    with pytest.raises(DeviceLimitError, match="exceeds max-compute-invocations-per-workgroup"):
        pipelines.get(compile_glsl("scale_add.glsl"), {3: 0}, (64, 64, 1))


def test_garbage_spirv_does_not_load_and_is_not_called_unsupported(pipelines):
    with pytest.raises(ShaderLoadError) as info:
        pipelines.get(b"\x03\x02\x23\x07" + b"\0" * 60, {}, (1, 1, 1), label="garbage")
    assert not isinstance(info.value, ShaderUnsupportedError)


def test_binding_check_compares_kinds_and_widths():
    """A float tensor on an int8 image, an int tensor on a float buffer: mismatches; 8-bit data read as words: not."""
    import numpy as np

    from vkdiff.device.shaders.dispatch import binding_mismatch
    from vkdiff.device.graph.vtensor import TensorSpec
    from vkdiff.device.runtime.resources import Tensor
    from vkdiff.device.shaders.spirv import Binding

    def tensor(dtype, storage):
        spec = TensorSpec((4, 8), dtype, storage, "width")
        return Tensor(shape=(4, 8), dtype=np.dtype(dtype), storage=storage, handle=None, spec=spec)

    image = Binding(group=0, binding=1, kind="storage-texture", format="rgba8sint", dim="3d", access="write-only")
    assert "float32" in binding_mismatch(image, tensor("float32", "texture3d"))
    assert binding_mismatch(image, tensor("int8", "texture3d")) is None
    assert binding_mismatch(Binding(group=0, binding=0, kind="storage-texture", format="rgba32float", dim="3d",
                                    access="write-only"), tensor("float16", "texture3d")) is not None
    words = Binding(group=0, binding=2, kind="storage-buffer", element="int32")
    assert binding_mismatch(words, tensor("uint8", "buffer")) is None
    assert binding_mismatch(words, tensor("float32", "buffer")) is not None
    sampled = Binding(group=0, binding=3, kind="sampled-texture", sample_type="sint", dim="3d")
    assert binding_mismatch(sampled, tensor("float32", "texture3d")) is not None


def test_a_launch_through_wgpu_makes_one_submission(et_tree, monkeypatch):
    """The execute's copies are read back without the empty submission wgpu-py makes before a map for reading (for
    pending ``queue.write_buffer`` data; nothing but the copies wrote their buffer): one submission a launch, and
    the output it copied is all there."""
    from wgpu.backends.wgpu_native import _api

    from tests.testutils import first_adapter
    from vkdiff.cases.kernels import all_cases
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.executors.kernel import build, prepare_case

    case = all_cases(r"^add\[B1-H7-W64-fp32-buffer\]$")[0]
    prepared = prepare_case(case, 0)
    ctx = DeviceContext(*first_adapter(), ShaderBuilder(et_tree))
    assert ctx.device.transport == "wgpu"
    graph = build(ctx, case, prepared)
    submitted, real = [], _api.GPUQueue.submit
    monkeypatch.setattr(_api.GPUQueue, "submit", lambda queue, buffers: (submitted.append(len(buffers)),
                                                                         real(queue, buffers))[1])
    launched = graph.launch()
    assert submitted == [1] and launched.unwritten == 0
    np.testing.assert_allclose(launched.output, prepared.expected, rtol=1e-6)


@pytest.mark.parametrize("storage", ["buffer", "texture3d"])
def test_a_launch_reads_its_outputs_and_guard_bands_in_its_own_submission(et_tree, storage, monkeypatch):
    """The execute's submission ends with the copies of the guard bands and of the outputs (a buffer's bytes, a
    texture's whole image): no readback submission of its own follows, and the output is all there. A write past
    the tensor is still seen that way, through both transports (tests/faults)."""
    from tests.testutils import first_adapter
    from vkdiff.cases.kernels import all_cases
    from vkdiff.device.runtime.context import DeviceContext
    from vkdiff.device.shaders.build import ShaderBuilder
    from vkdiff.executors.kernel import build, prepare_case

    case = all_cases(rf"^add\[B1-H7-W64-fp32-{storage}\]$")[0]
    prepared = prepare_case(case, 0)
    graph = build(DeviceContext(*first_adapter(), ShaderBuilder(et_tree)), case, prepared)
    apart = []
    for name in ("copy_out", "read", "read_raw"):
        monkeypatch.setattr(resources, name, lambda *args, name=name, **kwargs: apart.append(name))
    launched = graph.launch()
    assert apart == [] and launched.unwritten == 0
    np.testing.assert_allclose(launched.output, prepared.expected, rtol=1e-6)

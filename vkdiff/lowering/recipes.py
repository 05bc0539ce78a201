"""Quantization recipes and partitioners by name, as model cases name them.

A recipe quantizes a module in place (``recipe(model, inputs)``: torchao configs, PT2E with
``XNNPACKQuantizer`` or ``VulkanQuantizer``, export_llama's own source transforms); a partitioner is a list of
ExecuTorch partitioners (``VulkanPartitioner`` with its compile options, ``XnnpackPartitioner``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from vkdiff.lowering.llm_export import LLM_RECIPES

RECIPES: dict[str, Callable[..., Any]] = {}
"""Quantization recipes by name: ``recipe(model, inputs)`` returns the module quantized (PT2E recipes need
the example inputs to export and calibrate; torchao recipes ignore them)."""


def _registrar(table: dict[str, Callable]) -> Callable[[str], Callable[[Callable], Callable]]:
    """A decorator factory that registers functions in ``table`` under a name."""
    def register(name: str) -> Callable[[Callable], Callable]:
        def wrap(fn: Callable) -> Callable:
            table[name] = fn
            return fn
        return wrap
    return register


recipe = _registrar(RECIPES)


@recipe("fp32")
def _fp32(model, inputs=None):
    """No quantization: the float model as is."""
    return model


@recipe("8da4w")
def _8da4w(model, inputs=None, group_size: int = 32):
    import torch
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, PerGroup, quantize_

    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                           weight_granularity=PerGroup(group_size)))
    return model


@recipe("8da4w-fp32zp")
def _8da4w_fp32zp(model, inputs=None, group_size: int = 32):
    """torchao's ``Int8DynActInt4WeightQuantizer``: per-token zero points allocated as float32 (TISO-style)."""
    from torchao.quantization import Int8DynActInt4WeightQuantizer

    return Int8DynActInt4WeightQuantizer(groupsize=group_size).quantize(model)


def _intx_weight_only(model, *, granularity, asymmetric: bool = False, embeddings: bool = False):
    import torch
    from torchao.quantization import IntxWeightOnlyConfig, MappingType, quantize_

    mapping = MappingType.ASYMMETRIC if asymmetric else MappingType.SYMMETRIC
    config = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=granularity, mapping_type=mapping)
    wanted = torch.nn.Embedding if embeddings else torch.nn.Linear
    quantize_(model, config, filter_fn=lambda module, fqn: isinstance(module, wanted))
    return model


@recipe("4w")
def _4w(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size))


@recipe("4w-asym")
def _4w_asym(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size), asymmetric=True)


@recipe("emb4w")
def _emb4w(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size), embeddings=True)


@recipe("emb4w-perrow")
def _emb4w_perrow(model, inputs=None):
    from torchao.quantization import PerAxis

    return _intx_weight_only(model, granularity=PerAxis(0), embeddings=True)


@recipe("emb4w-asym")
def _emb4w_asym(model, inputs=None, group_size: int = 32):
    from torchao.quantization import PerGroup

    return _intx_weight_only(model, granularity=PerGroup(group_size), asymmetric=True, embeddings=True)


@recipe("emb4w+4w")
def _emb4w_and_4w(model, inputs=None, group_size: int = 32):
    """Tied embedding / lm_head: both the embedding and the linear quantized 4-bit group-wise."""
    return _4w(_emb4w(model, inputs, group_size), inputs, group_size)


@recipe("pt2e-xnnpack")
def _pt2e_xnnpack(model, inputs):
    """PT2E with ``XNNPACKQuantizer`` (symmetric config), calibrated on the example inputs."""
    from vkdiff.lowering.pt2e import quantize_pt2e_xnnpack

    return quantize_pt2e_xnnpack(model, inputs)


@recipe("pt2e-xnnpack-perchannel")
def _pt2e_xnnpack_perchannel(model, inputs):
    """ET-VK's static-int8 recipe (its tests' ``get_exported_graph``): ``XNNPACKQuantizer``, static per-tensor
    int8 activations, per-channel symmetric int8 weights; lowers to ``et_vk.q8ta_*`` on Vulkan."""
    from vkdiff.lowering.pt2e import quantize_pt2e_xnnpack

    return quantize_pt2e_xnnpack(model, inputs, per_channel=True)


def _pt2e_vulkan(model, inputs, *, dynamic: bool, weight_bits: int):
    """PT2E with ``VulkanQuantizer`` (``linear`` only: weight-only, or dynamic per-tensor activations)."""
    from vkdiff.lowering.pt2e import quantize_pt2e_vulkan

    return quantize_pt2e_vulkan(model, inputs, dynamic=dynamic, weight_bits=weight_bits)


for _name, _dynamic, _bits in (("8w", False, 8), ("4w", False, 4), ("8da8w", True, 8), ("8da4w", True, 4)):
    RECIPES[f"pt2e-vulkan-{_name}"] = functools.partial(_pt2e_vulkan, dynamic=_dynamic, weight_bits=_bits)


def _bf16_checkpoint(model, inputs, quantize: Callable, unwrap: bool):
    """export_llama's bf16 path: load as bf16, quantize in bf16, then ``.to(torch.float32)``."""
    import torch

    model = quantize(model.to(torch.bfloat16), inputs).to(torch.float32)
    if unwrap:
        from torchao.utils import unwrap_tensor_subclass

        model = unwrap_tensor_subclass(model)
    return model


for _name, _quantize in (("4w", _4w), ("8da4w", _8da4w)):
    for _unwrap in (False, True):
        RECIPES[f"{_name}-bf16{'-unwrap' if _unwrap else ''}"] = functools.partial(
            _bf16_checkpoint, quantize=_quantize, unwrap=_unwrap)


PARTITIONERS: dict[str, Callable[[], list]] = {}


partitioner = _registrar(PARTITIONERS)


@partitioner("vulkan")
def _vulkan():
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return [VulkanPartitioner({})]


@partitioner("vulkan-fp16")
def _vulkan_fp16():
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return [VulkanPartitioner({"force_fp16": True})]


@partitioner("vulkan-buffer")
def _vulkan_buffer():
    """A tiny texture limit makes every tensor fall back to buffer storage."""
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

    return [VulkanPartitioner({"texture_limits": (4, 4, 4)})]


@partitioner("xnnpack")
def _xnnpack():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]

RECIPES.update(LLM_RECIPES)

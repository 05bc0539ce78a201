"""Programs built the way users build them (ExecuTorch's own API, not vkdiff's lowering), shared by the check tests."""

from __future__ import annotations

from pathlib import Path

import pytest


def _lower_with_executorch(model, inputs, folder: Path, name: str) -> tuple[Path, Path]:
    """The user's path: torch.export, to_edge_transform_and_lower with VulkanPartitioner, an ETRecord beside."""
    import torch
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    program = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(program, partitioner=[VulkanPartitioner()], generate_etrecord=True)
    lowered = edge.to_executorch()
    pte, etrecord = folder / f"{name}.pte", folder / f"{name}.etrecord"
    pte.write_bytes(lowered.buffer)
    lowered.get_etrecord().save(str(etrecord))
    return pte, etrecord


@pytest.fixture(scope="session")
def two_partitions(tmp_path_factory) -> tuple[Path, Path]:
    """``TwoPartitions`` (linear → tanh | cumsum on the CPU | linear → sigmoid), 4-bit weights, as a user lowers it."""
    import torch
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    from tests.programs.factories import two_partitions as factory

    model, inputs = factory()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    return _lower_with_executorch(model, inputs, tmp_path_factory.mktemp("program"), "two_partitions")


@pytest.fixture(scope="session")
def masked_block(tmp_path_factory) -> tuple[Path, Path]:
    """An attention block whose causal mask is ``torch.full(-inf).triu(1)``: its delegate carries a -inf scalar."""

    from tests.programs.factories import masked_attention

    model, inputs = masked_attention()
    return _lower_with_executorch(model, inputs, tmp_path_factory.mktemp("block"), "block")




@pytest.fixture(scope="session")
def gqa_block(tmp_path_factory) -> tuple[Path, Path]:
    """Grouped-query attention with a boolean mask: its delegates hold ``aten.logical_not.default``."""
    from tests.programs.factories import gqa_masked_attention

    model, inputs = gqa_masked_attention()
    return _lower_with_executorch(model, inputs, tmp_path_factory.mktemp("gqa"), "gqa")

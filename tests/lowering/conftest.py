"""Programs with dynamic sizes and their ETRecords, made as a user makes them (shared by the ETRecord tests)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _export_dynamic():
    """Linear(16, 8) → tanh over a dynamic sequence length, exported."""
    import torch

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l = torch.nn.Linear(16, 8)

        def forward(self, x):
            return torch.tanh(self.l(x))

    torch.manual_seed(0)
    return torch.export.export(Model().eval(), (torch.randn(1, 5, 16),),
                               dynamic_shapes={"x": {1: torch.export.Dim("seq", min=1, max=10)}})


@pytest.fixture(scope="session")
def dynamic_program(tmp_path_factory) -> tuple[Path, Path]:
    """Linear(16, 8) → tanh over a dynamic sequence length, lowered to Vulkan as a user does, with its ETRecord (its
    exported program holds the sizes ``s27``, ``16*s27``, ``8*s27``)."""
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import to_edge_transform_and_lower

    lowered = to_edge_transform_and_lower(_export_dynamic(), partitioner=[VulkanPartitioner()],
                                          generate_etrecord=True)
    program = lowered.to_executorch()
    folder = tmp_path_factory.mktemp("dynamic")
    pte, etrecord = folder / "dynamic.pte", folder / "dynamic.etrecord"
    pte.write_bytes(program.buffer)
    program.get_etrecord().save(str(etrecord))
    return pte, etrecord


@pytest.fixture(scope="session")
def lowered_etrecord(tmp_path_factory) -> Path:
    """An ETRecord made the older way, ``generate_etrecord`` of the edge program after ``to_backend``: its edge
    program calls the delegate, whose lowered module (the original module with its sizes) is JSON inside a string."""
    import copy

    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.devtools import generate_etrecord
    from executorch.exir import to_edge

    exported = _export_dynamic()
    lowered = to_edge(exported).to_backend(VulkanPartitioner())
    path = tmp_path_factory.mktemp("lowered") / "lowered.etrecord"
    generate_etrecord(str(path), lowered, copy.deepcopy(lowered).to_executorch(), exported_program=exported)
    return path

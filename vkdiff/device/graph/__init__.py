"""ET-VK's graph runtime re-hosted on wgpu: tensors with ``vTensor`` metadata, staging, prepack, dispatch.

``compute`` is what launchers compose on (``ComputeGraph``); ``vtensor`` holds the
metadata port; ``staging`` moves data in and out through the tree's own
``nchw_to_*`` / ``*_to_nchw`` shaders; ``delegate`` builds and runs a whole decoded
Vulkan delegate node by node.
"""

from vkdiff.device.graph.compute import ComputeGraph, DispatchRecord, Launch, SymInt, TensorRef
from vkdiff.device.graph.vtensor import TensorSpec

__all__ = ["ComputeGraph", "DispatchRecord", "Launch", "SymInt", "TensorRef", "TensorSpec"]

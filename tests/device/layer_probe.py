"""Run by ``test_hazards.py`` in a process of its own: one kernel case on raw Vulkan with ET-VK's barriers recorded
exactly and every one of them dropped, vkdiff's own hazard check silenced, the validation layer on; prints the
result as one JSON line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vkdiff.cases.kernels import all_cases
from vkdiff.datamodel.settings import RunSettings
from vkdiff.device.transports.adapters import select
from vkdiff.device.shaders.build import ShaderBuilder
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.device.graph import compute, sync
from vkdiff.harness.kernels import run_case

real_init = compute.ComputeGraph.__init__
compute.ComputeGraph.__init__ = lambda self, ctx, route=None, exact=False, alias=False: real_init(self, ctx, route, True, alias)
sync.transition = lambda *args: None
sync.SyncRecorder.check = lambda self: None
settings = RunSettings.from_environment()
found = select(via=settings.transport, validate=settings.validate)
(case,) = [c for c in all_cases() if c.id == "sdpa[B1-H4-Hkv4-S7-L9-D16-fp32-texture3d]"]
result = run_case(DeviceContext(*found[0], ShaderBuilder(Path(sys.argv[1])), settings=settings), case)
print(json.dumps({"status": result.status, "reason": result.reason,
                  "layer": any(f.startswith("layer:") for f in found[0][0].features)}))

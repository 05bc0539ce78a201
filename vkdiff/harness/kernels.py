"""Kernel cases through the house: seeded arguments and references (``vkdiff.executors.references``), the case run
on a device (``vkdiff.executors.kernel``), the verdict (``vkdiff.verdicts.kernels``), one ``Result``.

Nothing here knows an op: the case's suite draws its arguments by schema name
(``vkdiff.cases.kernels``), ``vkdiff.reference`` computes the expected output of the op
of the same name, and the launcher registered under that name runs it
(``vkdiff.device.launchers``).
"""

from __future__ import annotations

import time
from typing import Any

from vkdiff.cases.kernels import KernelCase
from vkdiff.datamodel import Result, Status, versions
from vkdiff.device.runtime.context import DeviceContext
from vkdiff.executors.kernel import run_kernel
from vkdiff.executors.references import Prepared
from vkdiff.verdicts.kernels import judge_kernel


def base_result(case: KernelCase, device: str, status: Status, **fields: Any) -> Result:
    """A result of ``case`` on ``device`` with the case's identity filled in."""
    return Result(case=case.id, op=case.op, variant=case.variant, knobs=case.knobs, shape=case.sizes,
                  device=device, status=status.name, versions={**versions(), **fields.pop("versions", {})}, **fields)


def run_case(ctx: DeviceContext, case: KernelCase, *, session_seed: int = 0, repeat: int = 1,
             repro: str = "", prepared: Prepared | None = None) -> Result:
    """Run one kernel case on one device and judge it; never raises (failures become statuses).

    Args:
        prepared (Prepared | None): the case's arguments and reference, when already computed.
    """
    start = time.perf_counter()
    result = base_result(case, ctx.info.slug, Status.ERROR, seed=case.seed(session_seed), repro=repro,
                         device_info=ctx.info_dict, versions={"et_tree": ctx.builder.tree})
    judge_kernel(result, run_kernel(ctx, case, session_seed=session_seed, repeat=repeat, prepared=prepared))
    result.seconds = round(time.perf_counter() - start, 4)
    return result

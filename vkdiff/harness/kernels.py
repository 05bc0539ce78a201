"""Running kernel cases: seeded inputs → numpy reference → ET-VK launcher → comparison → Result."""

from __future__ import annotations

import dataclasses
import itertools
import time
import traceback
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterator, Sequence

import numpy as np

from vkdiff import reference
from vkdiff.cases.kernels import KernelCase
from vkdiff.device.boundary import DeviceLimitError, DispatchError, ShaderLoadError
from vkdiff.device.build import BuildError
from vkdiff.device.context import DeviceContext, Launch, VariantMissingError
from vkdiff.device.launchers.linear_q4gsw import linear_q4gsw
from vkdiff.device.spirv import SpirvOptMissingError
from vkdiff.harness.compare import ErrorStatistics, Tolerance
from vkdiff.harness.status import Status
from vkdiff.harness.store import Result, clip, versions

NP_DTYPES = {"fp32": np.float32, "fp16": np.float16}


@dataclasses.dataclass(kw_only=True)
class Prepared:
    """A case's inputs and its expected output, computed once per case."""

    inputs: dict[str, np.ndarray]
    """Arguments passed to the launcher."""
    expected: np.ndarray
    """float64 reference output."""
    magnitude: np.ndarray | None
    """Sum of absolute terms per output element (accumulation-aware tolerance)."""
    tolerance: Tolerance
    """Policy row for this output."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class KernelExecutor:
    """How to prepare and launch one operator's cases."""

    prepare: Callable[[KernelCase, np.random.Generator], Prepared]
    launch: Callable[[DeviceContext, KernelCase, Prepared], Launch]


def prepare_linear_q4gsw(case: KernelCase, rng: np.random.Generator) -> Prepared:
    """Uniformly random packed int4 weights (all 16 codes in both nibbles) and positive group scales.

    Scales are rounded to the kernel dtype before the reference sees them, so the
    reference evaluates exactly the constants the shader reads. The weight is
    dequantized once: for the expected output and for the accumulation magnitude.
    """
    m, k, n, g = (case.size(d) for d in "MKNg")
    dtype = NP_DTYPES[case.dtype]
    x = rng.standard_normal((m, k)).astype(dtype)
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = (rng.uniform(0.5, 1.5, (n, k // g)) / (8 * np.sqrt(k))).astype(np.float32)
    scales_t = reference.transpose_scales(scales, pad_to=4).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype) if case.bias else None
    weight = reference.dequantize_q4gsw_weight(packed, scales_t, g, k)
    expected = reference.linear_float64(x, weight, bias)
    magnitude = reference.linear_float64(np.abs(x), np.abs(weight, out=weight),
                                         None if bias is None else np.abs(bias))
    return Prepared(inputs={"x": x, "packed_weight": packed, "scales": scales_t, "bias": bias},
                    expected=expected, magnitude=magnitude, tolerance=Tolerance.for_dtype(dtype))


def launch_linear_q4gsw(ctx: DeviceContext, case: KernelCase, prepared: Prepared) -> Launch:
    weight_storage = None if case.weight_storage == "auto" else case.weight_storage
    return linear_q4gsw(ctx, group_size=case.size("g"), io_storage=case.storage, weight_storage=weight_storage,
                        **prepared.inputs)


EXECUTORS: dict[str, KernelExecutor] = {
    "linear_q4gsw": KernelExecutor(prepare=prepare_linear_q4gsw, launch=launch_linear_q4gsw),
}

_EXCEPTION_STATUS: tuple[tuple[type[BaseException], Status], ...] = (
    (VariantMissingError, Status.NOT_RUN),
    (SpirvOptMissingError, Status.NOT_RUN),
    (BuildError, Status.BUILD_FAIL),
    (ShaderLoadError, Status.NOT_SUPPORTED),
    (DeviceLimitError, Status.NOT_SUPPORTED),
    (DispatchError, Status.ERROR),
)


def status_of_exception(exc: BaseException) -> tuple[Status, str]:
    """Map a pipeline stage's exception to its status and a one-line reason."""
    for kind, status in _EXCEPTION_STATUS:
        if isinstance(exc, kind):
            return status, str(exc)
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
    return Status.ERROR, f"{type(exc).__name__}: {exc}{at}"


def not_run(case: KernelCase, device: str, reason: str, repro: str = "") -> Result:
    """A result for a case whose prerequisite is absent."""
    return Result(case=case.id, op=case.op, variant=case.variant, device=device, status=Status.NOT_RUN.name,
                  reason=reason, repro=repro, versions=versions())


def prepare_case(case: KernelCase, session_seed: int = 0) -> Prepared:
    """Seeded inputs and the reference output of a case; computed once and shared by every device."""
    return EXECUTORS[case.op].prepare(case, np.random.default_rng(case.seed(session_seed)))


def prepare_or_none(case: KernelCase, session_seed: int = 0) -> Prepared | None:
    """``prepare_case``, or None when it raises: ``run_case`` then prepares again and records the failure."""
    try:
        return prepare_case(case, session_seed)
    except Exception:  # the case's own run turns this into its status
        return None


def prepared_stream(cases: Sequence[KernelCase], session_seed: int = 0,
                    ahead: int = 2) -> Iterator[tuple[KernelCase, Prepared | None]]:
    """Each case with its inputs and reference, prepared once per data id, ``ahead`` data ids in advance.

    Preparation runs on one worker thread: numpy's BLAS and ufuncs and wgpu's native calls
    release the GIL, so the next reference is computed while the device runs the current
    case. A preparation that raised yields None (see ``prepare_or_none``).
    """
    groups = iter([list(group) for _, group in itertools.groupby(cases, key=lambda c: c.data_id)])
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vkdiff-prepare") as pool:
        queue: deque[tuple[list[KernelCase], Future]] = deque()

        def submit_next() -> None:
            group = next(groups, None)
            if group is not None:
                queue.append((group, pool.submit(prepare_or_none, group[0], session_seed)))

        for _ in range(ahead + 1):
            submit_next()
        while queue:
            group, future = queue.popleft()
            submit_next()
            prepared = future.result()
            for case in group:
                yield case, prepared


def run_case(ctx: DeviceContext, case: KernelCase, *, session_seed: int = 0, repeat: int = 1,
             repro: str = "", prepared: Prepared | None = None) -> Result:
    """Run one kernel case on one device; never raises (failures become statuses).

    Args:
        prepared (Prepared | None): the case's inputs and reference, when already computed.
    """
    start = time.perf_counter()
    result = Result(case=case.id, op=case.op, variant=case.variant, device=ctx.info.slug, status=Status.ERROR.name,
                    seed=case.seed(session_seed), repro=repro, device_info=ctx.info.to_dict(),
                    versions={**versions(), "et_tree": ctx.builder.tree})
    try:
        executor = EXECUTORS[case.op]
        prepared = prepared or prepare_case(case, session_seed)
        launch = executor.launch(ctx, case, prepared)
        _record_launch(result, launch, prepared)
        for _ in range(repeat - 1):
            again = executor.launch(ctx, case, prepared)
            if again.output.tobytes() != launch.output.tobytes():
                result.status = Status.NONDETERMINISTIC.name
                result.reason = "repeat runs differ bitwise"
                break
    except Exception as exc:  # every failure becomes a status; the run goes on
        status, reason = status_of_exception(exc)
        result.status, result.reason = status.name, clip(reason)
    result.seconds = round(time.perf_counter() - start, 4)
    return result


def _record_launch(result: Result, launch: Launch, prepared: Prepared) -> None:
    from vkdiff.device.layouts import unwritten_mask

    stats = ErrorStatistics.from_arrays(launch.output, prepared.expected, prepared.tolerance,
                                        prepared.magnitude, unwritten_mask(launch.output))
    status = stats.status()
    result.status = status.name
    result.reason = "" if status is Status.PASS else clip(stats.message())
    result.shader, result.shaders = launch.variant, list(launch.shaders)
    result.metrics, result.tolerance = stats.to_dict(), prepared.tolerance.to_dict()
    result.flags = ["polyfilled"] if launch.polyfilled else []
    result.dispatch = {k: list(v) if isinstance(v, tuple) else v for k, v in launch.dispatch.items()}

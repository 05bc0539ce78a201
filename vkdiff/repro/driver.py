"""A driver bug found at run time comes with its repro: a ``FAIL_DRIVER`` kernel case is recorded again on the device
and written as a repro folder (``vkdiff.repro.kernel``) with an Amber script beside it, for the driver's owners."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from vkdiff.cases.kernels import KernelCase
from vkdiff.repro.amber import AmberExportError, write_amber
from vkdiff.repro.kernel import kernel_checks, kernel_manifest, record_case, write_bundle

__all__ = ["folder_for", "write_driver_repro"]


def folder_for(root: Path, case_id: str, device: str) -> Path:
    """``root/<case>@<device>`` with every character a file name may not hold replaced."""
    return root / re.sub(r"[^A-Za-z0-9._@=+-]", "_", f"{case_id}@{device}")


def write_driver_repro(ctx, case: KernelCase, root: str, session_seed: int) -> dict[str, Any]:
    """Record ``case`` on ``ctx`` and write its folder under ``root``: what ``Result.metrics["driver_repro"]`` holds
    (the folder, the Amber script or why none was written, and the status the recording itself got). The runner
    calls it (``Runner(on_driver_bug=...)``, with ``root`` and ``session_seed`` bound) in the device's worker."""

    try:
        result, trace, prepared, launched = record_case(ctx, case, session_seed=session_seed)
    except Exception as exc:  # noqa: BLE001 - the recording is evidence, never the verdict
        return {"error": f"recording failed: {type(exc).__name__}: {exc}"}
    out = write_bundle(folder_for(Path(root), case.id, ctx.info.slug), trace,
                       kernel_checks(case, trace, prepared, launched), kernel_manifest(case, result))
    made: dict[str, Any] = {"folder": str(out), "replay": f"python {out / 'run_repro.py'}", "status": result.status}
    try:
        made["amber"] = str(write_amber(out))
    except AmberExportError as exc:
        made["amber_error"] = str(exc)
    return made

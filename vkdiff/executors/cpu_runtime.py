"""Run a ``.pte`` on ExecuTorch's CPU runtime (portable kernels + XNNPACK), keeping the C++ log.

``executorch.runtime.Runtime`` reports backend init failures to Python only as
``RuntimeError: Failed to load method forward``; the cause (e.g. ``[XNNCompiler.cpp]
Failed to create static transpose node ... xnn_status_invalid_parameter``) is printed
by the C++ runtime on file descriptor 2 (the pybindings route ``ET_LOG`` through Python's
``sys.stderr``, which is fd 2 unless something such as pytest replaced it). :func:`run_pte`
points both at a temporary file around load and execute, and puts those lines into
:class:`RuntimeInitError`.

The redirect is process-wide: do not run it concurrently with other threads that
write to fd 2 or ``sys.stderr`` (their output lands in the capture).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import torch

from vkdiff.capture import capture_fd2

NOISE = re.compile(r"\[cpuinfo_utils\.cpp:\d+\]")
"""Captured lines kept out of error messages (harmless CPU probing on every load); still in ``.log``."""


class RuntimeInitError(RuntimeError):
    """The CPU runtime could not load or run the program; the message carries the C++ log lines.

    Attributes:
        log (list[str]): every line the C++ runtime printed on fd 2 during load and execute.
        stage (str): ``"load_program"``, ``"load_method"`` or ``"execute"``.
    """

    def __init__(self, message: str, *, log: Sequence[str] = (), stage: str = ""):
        super().__init__(message)
        self.log = list(log)
        self.stage = stage


def run_pte(pte: bytes, inputs: Sequence[torch.Tensor], *, method: str = "forward",
            log: list[str] | None = None) -> list[np.ndarray]:
    """Load ``pte`` with ``executorch.runtime.Runtime``, run ``method`` once, return its outputs.

    Args:
        pte (bytes): a serialized ExecuTorch program (``edge.to_executorch().buffer``).
        inputs (Sequence[torch.Tensor]): positional inputs of ``method``.
        method (str): method name.
        log (list[str] | None): when given, receives the C++ runtime's fd-2 lines (also on success).

    Returns:
        list[np.ndarray]: one array per output.

    Raises:
        RuntimeInitError: loading the program or method, or executing it, failed; the message is the
            Python error followed by the captured C++ lines, e.g.::

                load_method('forward'): RuntimeError: Failed to load method forward, error: 0x:1
                [XNNCompiler.cpp:1182] Failed to create static transpose node 11 with code: xnn_status_invalid_parameter
                [XNNPACKBackend.cpp:143] XNNCompiler::compileModel failed: 0x1
                [method.cpp:128] Init failed for backend XnnpackBackend: 0x1
    """
    from executorch.runtime import Runtime

    stage = "load_program"
    with capture_fd2() as lines:
        try:
            program = Runtime.get().load_program(bytes(pte))
            stage = f"load_method({method!r})"
            loaded = program.load_method(method)
            if loaded is None:
                raise RuntimeError(f"no method {method!r} in program (methods: {sorted(program.method_names)})")
            stage = "execute"
            outputs = loaded.execute(list(inputs))
        except Exception as exc:
            error = exc
        else:
            error = None
    if log is not None:
        log.extend(lines)
    if error is not None:
        cause = [line for line in lines if line.strip() and not NOISE.search(line)]
        message = "\n".join([f"{stage}: {type(error).__name__}: {error}", *cause])
        raise RuntimeInitError(message, log=lines, stage=stage) from error
    return [_numpy(out) for out in outputs]


def _numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def lower_xnnpack(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> bytes:
    """Export ``model`` (float or PT2E-converted) and lower it with ``XnnpackPartitioner``; the ``.pte`` bytes.

    A test helper: the pipeline's lowering is ``vkdiff.lowering.lower.lower`` with partitioner ``"xnnpack"``.
    """
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    program = torch.export.export(model, tuple(inputs))
    return to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()]).to_executorch().buffer

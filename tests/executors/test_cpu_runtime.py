"""ExecuTorch CPU runtime: outputs, and the C++ cause of load failures captured from fd 2."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
import torch

from vkdiff.capture import capture_fd2
from vkdiff.cases.vit import ViTTokenPath, image_inputs
from vkdiff.executors import cpu_runtime
from vkdiff.executors.cpu_runtime import RuntimeInitError, lower_xnnpack, run_pte
from vkdiff.lowering import pt2e

QUANTIZED_SLACK = 3
"""Runtime vs eager converted module: a few output scales (XNNPACK requantizes in integer arithmetic)."""


@pytest.fixture(scope="module")
def linear_pte():
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8).eval()
    x = torch.randn(2, 16)
    return lower_xnnpack(model, (x,)), model, x


def _vit(recipe):
    torch.manual_seed(0)
    model = ViTTokenPath(depth=0).eval()
    (x,) = image_inputs(32)(torch.Generator().manual_seed(0))
    converted = recipe(model, (x,))
    return lower_xnnpack(converted, (x,)), converted, x



def test_capture_fd2_sees_c_level_and_python_stderr_writes_in_order():
    before = sys.stderr
    with capture_fd2() as lines:
        os.write(2, b"[method.cpp:1] one\n")
        print("[program.cpp:2] two", file=sys.stderr)  # the pybindings' ET_LOG path
        os.write(2, b"[XNNCompiler.cpp:3] three\n")
    assert lines == ["[method.cpp:1] one", "[program.cpp:2] two", "[XNNCompiler.cpp:3] three"]
    assert sys.stderr is before


def test_float_program_matches_eager(linear_pte):
    pte, model, x = linear_pte
    log: list[str] = []
    (out,) = run_pte(pte, [x], log=log)
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_corrupted_program_header_carries_cpp_cause(linear_pte):
    pte = linear_pte[0]
    broken = pte[:4] + b"XXXX" + pte[8:]
    with pytest.raises(RuntimeInitError, match=re.escape("[program.cpp")) as info:
        run_pte(broken, [linear_pte[2]])
    assert info.value.stage == "load_program"
    assert str(info.value).startswith("load_program: RuntimeError: Failed to load program")
    assert "Program identifier 'XXXX' != expected 'ET12'" in str(info.value)


def test_corrupted_xnnpack_delegate_carries_xnncompiler_line(linear_pte):
    pte = linear_pte[0]
    at = max(pte.find(b"XN00"), pte.find(b"XN01"))
    assert at > 0
    broken = pte[:at] + b"ZZZZ" + pte[at + 4:]
    with pytest.raises(RuntimeInitError) as info:
        run_pte(broken, [linear_pte[2]])
    message = str(info.value)
    assert message.splitlines()[0].startswith("load_method('forward'): RuntimeError: Failed to load method forward")
    assert re.search(r"\[XNNCompiler\.cpp:\d+\] XNNPACK Delegate Serialization Format version identifier 'ZZZZ'",
                     message)
    assert "Init failed for backend XnnpackBackend" in message
    assert not any(cpu_runtime.NOISE.search(line) for line in message.splitlines())


def test_fixed_vit_runs_within_a_few_output_scales():
    """executorch 1.5.1 (pinned) has the cat qparams fix: the ViT token path loads and matches the converted module."""
    pte, converted, x = _vit(pt2e.quantize_pt2e_xnnpack)
    (out,) = run_pte(pte, [x])
    scale = pt2e.output_qparams(converted)[0]["scale"]
    expected = converted(x).detach().numpy()
    np.testing.assert_allclose(out, expected, rtol=0, atol=QUANTIZED_SLACK * scale)


def test_unfixed_vit_fails_init_with_static_transpose():
    """Invariant of cat_qparams, at runtime: XNNPACK refuses a static transpose whose qparams change."""
    pte, _, x = _vit(pt2e.quantize_pt2e_xnnpack_unfixed)
    with pytest.raises(RuntimeInitError) as info:
        run_pte(pte, [x])
    assert info.value.stage == "load_method('forward')"
    assert re.search(r"\[XNNCompiler\.cpp:\d+\] Failed to create static transpose node \d+ with code: "
                     r"xnn_status_invalid_parameter", str(info.value))

"""``--suite upstream``: ExecuTorch's own Vulkan delegate tests, collected from the user's tree.

``backends/vulkan/test/test_vulkan_delegate.py`` is imported from the tree with its
lowering helpers replaced by recorders: each ``lower_module_and_test_output`` call (and
each ``quantize_and_lower_module`` + ``run_delegated_model_and_check_output`` pair) leaves
the module, its sample inputs, dynamic shapes, further test inputs and the test's own
``atol``/``rtol``. Every capture becomes a model case ``upstream::test_vulkan_backend_add#0``
that is lowered by the tree's own helper (the test's own settings: strict export,
``_skip_dim_order=False``, ``require_dynamic_shapes``), then run node by node on every
device at the sample inputs and at each test input (below the bound for dynamic shapes).
Outputs are judged by the test's own ``atol``/``rtol`` against the float module, as the
test does (all outputs, also where the test asks for the first only); every node by vkdiff's
references. Tests disabled upstream (``disable_test``, mostly for SwiftShader) run too; their
results carry the upstream reason as the knob ``disabled``.

Torch's global RNG is seeded from each test's name before it runs, so a test's weights
and inputs are the same in every process.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib.util
import io
import sys
import unittest
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Callable

from vkdiff.cases.model_case import ModelCase

TEST_FILE = "test/test_vulkan_delegate.py"
"""The delegate tests, relative to the tree's ``backends/vulkan``."""
MODULE_NAME = "vkdiff_upstream_vulkan_delegate_tests"


class UpstreamError(RuntimeError):
    """The tree has no delegate tests, or they cannot be imported (one line, before any device work)."""


@dataclasses.dataclass(kw_only=True)
class Capture:
    """One lowering an upstream test asked for."""

    test: str
    """Test method name (``test_vulkan_backend_add``)."""
    index: int
    """Its n-th lowering (0-based)."""
    model: Any
    sample_inputs: tuple
    dynamic_shapes: Any = None
    test_inputs: tuple = ()
    atol: float = 1e-3
    rtol: float = 1e-1
    expect_no_delegates: bool = False
    lower: Callable[..., Any] | None = None
    """``lower(model, inputs, dynamic_shapes)`` → the test's ``EdgeProgramManager`` (the tree's own helper)."""
    lowering: str = "lower_module"
    disabled: str = ""
    """Why upstream disables the test (``disable_test``; vkdiff runs it anyway), or ''."""

    @property
    def id(self) -> str:
        return f"upstream::{self.test}#{self.index}"


@dataclasses.dataclass(kw_only=True)
class Collected:
    """What the tree's tests gave: captures, and the tests that captured nothing and why."""

    captures: list[Capture]
    silent: dict[str, str]
    """Test name → why it captured nothing (it raised, or asked for no lowering)."""
    source_sha: str
    """sha256 of the test file (part of each lowering's cache key)."""


def _seed_of(name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"upstream:{name}".encode()).digest()[:4], "little")


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(MODULE_NAME, None)
        raise UpstreamError(f"{path}: importing the delegate tests failed: {type(exc).__name__}: {exc}") from None
    return module


class _Pending:
    """What the tree's ``quantize_and_lower_module`` returns while recording: the arguments, for the check call."""

    def __init__(self, model, sample_inputs, quantizer, dynamic_shapes=None):
        self.model, self.sample_inputs, self.quantizer, self.dynamic_shapes = model, sample_inputs, quantizer, dynamic_shapes

    def to_executorch(self) -> "_Pending":
        return self


def _recorders(module, captures: list[Capture], current: list[str]) -> dict[str, Callable]:
    """Replacements for the test class's lowering helpers, appending to ``captures``."""
    lower_module, quantize_and_lower = module.lower_module, module.quantize_and_lower_module

    def add(**fields) -> None:
        name = current[0]
        captures.append(Capture(test=name, index=sum(c.test == name for c in captures), **fields))

    def lower_module_and_test_output(self, model, sample_inputs, atol=1e-03, rtol=1e-01, dynamic_shapes=None,
                                     test_inputs=None, first_output_only=False, expect_no_delegates=False):
        model.eval()
        add(model=model, sample_inputs=tuple(sample_inputs), dynamic_shapes=dynamic_shapes,
            test_inputs=tuple(test_inputs or ()), atol=atol, rtol=rtol, expect_no_delegates=expect_no_delegates,
            lower=lower_module)

    def run_delegated_model_and_check_output(self, et_program, model, sample_inputs, atol=1e-03, rtol=1e-01,
                                             test_inputs=None, first_output_only=False):
        if not isinstance(et_program, _Pending):
            raise UpstreamError("run_delegated_model_and_check_output on a program vkdiff did not record")
        quantizer = et_program.quantizer
        add(model=model, sample_inputs=tuple(sample_inputs), dynamic_shapes=et_program.dynamic_shapes,
            test_inputs=tuple(test_inputs or ()), atol=atol, rtol=rtol,
            lower=lambda m, xs, ds: quantize_and_lower(m, xs, quantizer, dynamic_shapes=ds),
            lowering="quantize_and_lower_module")

    return {"lower_module_and_test_output": lower_module_and_test_output,
            "run_delegated_model_and_check_output": run_delegated_model_and_check_output,
            "check_vk_delegation": lambda self, et_program: None,
            "check_no_delegation": lambda self, et_program: None}


RECORDED = ("lower_module_and_test_output", "run_delegated_model_and_check_output", "check_vk_delegation",
            "check_no_delegation")
"""The ``TestVulkanBackend`` helpers replaced while the tests run (on the class: some tests make their own instance)."""


def _run_test(cls, name: str, disabled: dict[str, str]) -> str:
    """Run one test method with torch seeded from its name; a test disabled upstream (``disable_test``: it only
    prints why) runs its body too, its reason kept in ``disabled``. Returns why it failed, or ''."""
    import torch

    method = getattr(cls, name)
    printed = io.StringIO()
    torch.manual_seed(_seed_of(name))
    try:
        with redirect_stdout(printed):
            method(cls(name))
            notes = [line for line in printed.getvalue().splitlines() if line.startswith("DISABLED_TEST")]
            if notes and hasattr(method, "__wrapped__"):
                disabled[name] = notes[0].split(": ", 2)[-1]
                torch.manual_seed(_seed_of(name))
                method.__wrapped__(cls(name))
    except Exception as exc:  # the test itself broke before or while asking for a lowering
        return f"the test raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return ""


@functools.lru_cache(maxsize=4)
def collect(tree: Path) -> Collected:
    """Run every test method of the tree's ``TestVulkanBackend`` with recording helpers.

    Raises:
        UpstreamError: the tree has no delegate tests or they cannot be imported.
    """
    import torch

    root = Path(tree) / "backends" / "vulkan" if (Path(tree) / "backends" / "vulkan").is_dir() else Path(tree)
    path = root / TEST_FILE
    if not path.is_file():
        raise UpstreamError(f"--suite upstream: {path} does not exist; give a full ExecuTorch tree with --et-src")
    module = _import(path)
    cls = getattr(module, "TestVulkanBackend", None)
    if cls is None or not issubclass(cls, unittest.TestCase):
        raise UpstreamError(f"{path}: no TestVulkanBackend test class")
    captures: list[Capture] = []
    current = [""]
    silent: dict[str, str] = {}
    disabled: dict[str, str] = {}
    saved = {name: cls.__dict__.get(name) for name in RECORDED}
    for name, recorder in _recorders(module, captures, current).items():
        setattr(cls, name, recorder)
    original_quantize, module.quantize_and_lower_module = module.quantize_and_lower_module, _Pending
    try:
        for name in sorted(n for n in dir(cls) if n.startswith("test_")):
            current[0], before = name, len(captures)
            error = _run_test(cls, name, disabled)
            if error:
                silent[name] = error
                del captures[before:]
            elif len(captures) == before:
                silent[name] = "asked for no lowering"
    finally:
        module.quantize_and_lower_module = original_quantize
        for name, value in saved.items():
            if value is None:
                delattr(cls, name)
            else:
                setattr(cls, name, value)
    for cap in captures:
        cap.disabled = disabled.get(cap.test, "")
    return Collected(captures=captures, silent=silent,
                     source_sha=hashlib.sha256(path.read_bytes()).hexdigest()[:12])


@dataclasses.dataclass(kw_only=True, frozen=True)
class UpstreamCase(ModelCase):
    """A captured upstream lowering as a model case: the tree's helper lowers it; its id is the capture's."""

    lower_with: Callable[..., Any] | None = None
    """``lower_with(model, inputs, dynamic_shapes)`` → ``EdgeProgramManager`` (the test's own helper)."""
    expect_delegate: bool = True
    """False when the test expects the partitioner to delegate nothing (``expect_no_delegates``)."""

    @property
    def id(self) -> str:
        return self.name

    @property
    def variant(self) -> str:
        return dict(self.options)["lowering"]


def model_cases(tree: Path, pattern: str | None = None) -> list[UpstreamCase]:
    """Each capture as a model case (see the module docstring), ids matching the regex ``pattern``."""
    import re

    from vkdiff.datamodel import Tolerance

    found = collect(Path(tree))
    return [UpstreamCase(name=cap.id, build=functools.partial(copy.deepcopy, cap.model),
                         inputs=functools.partial(_same, cap.sample_inputs), recipe="fp32", partitioner="vulkan",
                         pipeline="upstream", dynamic_shapes=cap.dynamic_shapes,
                         options=(("lowering", cap.lowering), ("test_sha", found.source_sha),
                                  *((("disabled_upstream", cap.disabled),) if cap.disabled else ())),
                         more_calls=tuple(tuple(x) for x in cap.test_inputs), lower_with=cap.lower,
                         expect_delegate=not cap.expect_no_delegates,
                         tolerance=Tolerance(atol=float(cap.atol), rtol=float(cap.rtol)))
            for cap in found.captures if not pattern or re.search(pattern, cap.id)]


def _same(inputs: tuple, generator: Any = None) -> tuple:
    """The test's own sample inputs (drawn when the test ran, from its seeded RNG)."""
    return inputs

"""The verdict vocabulary: exactly one status per (case, variant, device)."""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """Outcome of one (case, variant, device), ordered by pipeline stage.

    Example::

        >>> Status.NOT_SUPPORTED.is_failure()
        False
        >>> Status["FAIL_NUMERIC"].is_failure()
        True
    """

    __test__ = False

    PASS = 0
    """Every output within tolerance, every element written."""
    NOT_SUPPORTED = 1
    """The device lacks a feature or limit (or naga cannot load the shader); never a failure."""
    NOT_RUN = 2
    """A prerequisite is absent (no ExecuTorch tree, no adapter); the reason says which."""
    LOWER_FAIL = 3
    """ExecuTorch could not lower the model."""
    BUILD_FAIL = 4
    """Shader codegen, compilation or loading failed."""
    FAIL_CHECK = 5
    """A fusion invariant broke, or the kernel left output elements unwritten."""
    DTYPE_MISMATCH = 6
    """A shader binding's format differs from the tensor allocation."""
    FAIL_NAN = 7
    """NaN or Inf where the reference has none."""
    FAIL_NUMERIC = 8
    """Finite but over tolerance."""
    FAIL_PORTABILITY = 9
    """The shader is wrong on some conformant device: a liberty the Vulkan spec grants (inexact division, a
    transcendental through its inherited formula, ...) takes its result outside tolerance on the case's inputs. On
    every device, whatever this one computed."""
    FAIL_DRIVER = 10
    """The device's result lies outside what the Vulkan spec allows for the shader's declared arithmetic."""
    NONDETERMINISTIC = 11
    """Repeat runs differ bitwise."""
    FAIL_OOB = 12
    """A dispatch wrote outside its tensor (a canary guard band changed, or the validation layer saw it)."""
    FAIL_SYNC = 13
    """Two accesses to one resource are not ordered by a barrier (a read-after-write, write-after-read or
    write-after-write hazard in the recorded command stream)."""
    ERROR = 14
    """A harness bug or an unexpected exception."""

    def is_success(self) -> bool:
        return self is Status.PASS

    def is_skip(self) -> bool:
        """Statuses that say nothing about correctness (pytest skips them)."""
        return self in (Status.NOT_SUPPORTED, Status.NOT_RUN)

    def is_failure(self) -> bool:
        return not (self.is_success() or self.is_skip())

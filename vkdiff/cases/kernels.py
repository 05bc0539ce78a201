"""Kernel cases: one ET-VK operator at given shapes, dtype and storage, declared once.

Suites register under the operator name, as ExecuTorch's ``op_tests/cases.py`` does;
case ids are derived from the shapes (``linear_q4gsw[M13-K256-N40-g32-fp16-buffer]``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from typing import Callable, Iterable, Iterator, Literal

DType = Literal["fp32", "fp16"]
IoStorage = Literal["buffer", "texture3d"]
WeightStorage = Literal["auto", "buffer", "texture2d"]

XS, S, M1, M2, L, XL = 3, 7, 13, 31, 67, 113
"""ExecuTorch's prime dimension constants (``op_tests/cases.py``), for shapes that break tilings."""


@dataclasses.dataclass(kw_only=True, frozen=True)
class KernelCase:
    """One hermetic kernel case: operator, shapes, knobs."""

    op: str
    """Operator, e.g. ``linear_q4gsw``."""
    shape: tuple[tuple[str, int], ...]
    """Named sizes in id order, e.g. ``(("M", 13), ("K", 256), ("N", 40), ("g", 32))``."""
    dtype: DType
    """Activation/output dtype."""
    storage: IoStorage
    """Input/output storage."""
    weight_storage: WeightStorage = "auto"
    """Packed weight storage; ``auto`` applies ET-VK's own rule."""
    bias: bool = False
    """Whether a bias is added."""

    def _knobs(self, *, storage: bool) -> str:
        parts = [self.dtype]
        if storage:
            parts.append(self.storage)
            if self.weight_storage != "auto":
                parts.append(f"w{self.weight_storage}")
        if self.bias:
            parts.append("bias")
        return "-".join(parts)

    def _with_shape(self, knobs: str) -> str:
        dims = "-".join(f"{k}{v}" for k, v in self.shape)
        return f"{self.op}[{dims}-{knobs}]"

    @property
    def variant(self) -> str:
        """The knob part of the id (everything after the shapes)."""
        return self._knobs(storage=True)

    @property
    def id(self) -> str:
        return self._with_shape(self.variant)

    @property
    def data_id(self) -> str:
        """The id without the storage knobs: cases that differ only in storage get identical inputs."""
        return self._with_shape(self._knobs(storage=False))

    def size(self, name: str) -> int:
        return dict(self.shape)[name]

    def seed(self, session_seed: int = 0) -> int:
        """Inputs are seeded from a hash of the data id plus the session seed.

        Storage variants share inputs, so their outputs are comparable and one
        reference serves them all.
        """
        digest = hashlib.sha256(f"{self.data_id}:{session_seed}".encode()).digest()
        return int.from_bytes(digest[:4], "little")


SUITES: dict[str, Callable[[], Iterable[KernelCase]]] = {}
"""Registered suite generators by operator name."""


def register_test_suite(op: str) -> Callable[[Callable[[], Iterable[KernelCase]]], Callable[[], Iterable[KernelCase]]]:
    """Register a generator of the cases of ``op``."""
    def wrap(fn: Callable[[], Iterable[KernelCase]]) -> Callable[[], Iterable[KernelCase]]:
        SUITES[op] = fn
        return fn
    return wrap


LINEAR_Q4GSW_M = (1, 4, 13, 64)
LINEAR_Q4GSW_K = (64, 256, 4096)
LINEAR_Q4GSW_N = (40, 64, 4096)
GROUP_SIZES = (32, 64, 128)
DTYPES: tuple[DType, ...] = ("fp32", "fp16")
IO_STORAGES: tuple[IoStorage, ...] = ("buffer", "texture3d")


def _linear_case(m: int, k: int, n: int, g: int, dtype: DType, storage: IoStorage, **knobs) -> KernelCase:
    return KernelCase(op="linear_q4gsw", shape=(("M", m), ("K", k), ("N", n), ("g", g)),
                      dtype=dtype, storage=storage, **knobs)


@register_test_suite("linear_q4gsw")
def linear_q4gsw_suite() -> Iterator[KernelCase]:
    """The sweep of the foundation issue, plus buffer-weight and bias variants at small shapes."""
    for m, k, n, g, dtype, storage in itertools.product(
            LINEAR_Q4GSW_M, LINEAR_Q4GSW_K, LINEAR_Q4GSW_N, GROUP_SIZES, DTYPES, IO_STORAGES):
        if k % g == 0:
            yield _linear_case(m, k, n, g, dtype, storage)
    for m, dtype, storage in itertools.product((1, M1), DTYPES, IO_STORAGES):
        yield _linear_case(m, 256, 40, 32, dtype, storage, weight_storage="buffer")
        yield _linear_case(m, 256, 40, 32, dtype, storage, bias=True)


def all_cases(pattern: str | None = None) -> list[KernelCase]:
    """Every registered kernel case whose id matches the regex ``pattern`` (search, not full match)."""
    regex = re.compile(pattern) if pattern else None
    cases = [c for suite in SUITES.values() for c in suite()]
    return [c for c in cases if regex is None or regex.search(c.id)]
